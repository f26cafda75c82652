"""Goldens for src/generate/sampler and logits_processors: run mlx-lm's sample_utils.

Usage: .venv/bin/python tools/oracle/sampler_goldens.py OUTDIR
Writes OUTDIR/sampler/:
  cases.json             every case below (parameters, seeds, which inputs), versions
  inputs.safetensors     "lp.<input>" sampler logprobs [B, V]; "lg.<input>" processor logits
  random.safetensors     draws after mx.random.seed: checks the default key sequence
  tokens.safetensors     "<case>.<input>": make_sampler tokens, uint32 [draws, B], one seed per case
  filters.safetensors    "<filter>.<input>": apply_top_p / apply_min_p / apply_top_k / apply_xtc /
                         categorical_sampling outputs (seeded when they draw)
  processors.safetensors "<case>.<input>.<history>": logits after make_logits_processors' list
The C++ tests (tests/generate/test_sampler.cpp, test_logits_processors.cpp) replay these and
require exact equality.
"""

import json
import os
import sys

import mlx.core as mx
import mlx_lm
from mlx_lm.sample_utils import (
    apply_min_p,
    apply_top_k,
    apply_top_p,
    apply_xtc,
    categorical_sampling,
    make_logits_processors,
    make_sampler,
)

DRAWS = 32
VOCAB = 256
PROC_VOCAB = 64
RANDOM_SEED = 1234


def logprobs_of(logits):
    # As generate_step does: logits - logsumexp(logits), in the logits' dtype.
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def sampler_inputs():
    def normal(shape, key, scale):
        return mx.random.normal(shape, key=mx.random.key(key)) * scale

    return {
        "f32_b2": logprobs_of(normal((2, VOCAB), 1, 2.5)),
        "f32_b1": logprobs_of(normal((1, VOCAB), 2, 2.5)),
        "bf16_b2": logprobs_of(normal((2, VOCAB), 3, 2.5).astype(mx.bfloat16)),
        "f32_peaky_b2": logprobs_of(normal((2, VOCAB), 4, 6.0)),
        # Rounded logits: many exact ties for sort / argpartition.
        "f32_ties_b2": logprobs_of(mx.round(normal((2, VOCAB), 5, 2.0))),
    }


def processor_inputs():
    def normal(shape, key):
        return mx.random.normal(shape, key=mx.random.key(key)) * 3.0

    return {
        "f32_b2": normal((2, PROC_VOCAB), 10),
        "bf16_b1": normal((1, PROC_VOCAB), 11).astype(mx.bfloat16),
        "f32_b3": normal((3, PROC_VOCAB), 12),
    }


def histories():
    long = mx.random.randint(0, 24, (40,), key=mx.random.key(13)).tolist()  # many repeats
    return {"long": long, "short": [5, 5, 9], "one": [PROC_VOCAB - 1], "empty": []}


SAMPLER_CASES = [
    ("greedy", {}),
    ("temp_0.7", {"temp": 0.7}),
    ("temp_1.0", {"temp": 1.0}),
    ("temp_1.5", {"temp": 1.5}),
    ("temp_1.1", {"temp": 1.1}),  # 1.0 / temp rounds differently from a float temp
    ("temp_0.85", {"temp": 0.85}),
    ("top_p_0.9", {"temp": 1.0, "top_p": 0.9}),
    ("top_p_0.5", {"temp": 0.7, "top_p": 0.5}),
    ("min_p_0.05_k1", {"temp": 1.0, "min_p": 0.05}),
    ("min_p_0.05_k3", {"temp": 1.0, "min_p": 0.05, "min_tokens_to_keep": 3}),
    ("min_p_0.2_k1", {"temp": 1.0, "min_p": 0.2}),
    ("min_p_0.2_k3", {"temp": 1.3, "min_p": 0.2, "min_tokens_to_keep": 3}),
    ("top_k_1", {"temp": 1.0, "top_k": 1}),
    ("top_k_5", {"temp": 1.0, "top_k": 5}),
    ("top_k_50", {"temp": 0.9, "top_k": 50}),
    ("xtc_1.0_0.1", {"temp": 1.0, "xtc_probability": 1.0, "xtc_threshold": 0.1}),
    (
        "xtc_1.0_0.05_special",
        {"temp": 1.0, "xtc_probability": 1.0, "xtc_threshold": 0.05,
         "xtc_special_tokens": [0, 5, 17]},
    ),
    (
        "xtc_0.5_0.02_special",
        {"temp": 1.0, "xtc_probability": 0.5, "xtc_threshold": 0.02, "xtc_special_tokens": [3]},
    ),
    (
        "combo_a",
        {"temp": 0.7, "top_p": 0.9, "min_p": 0.05, "top_k": 50, "xtc_probability": 0.5,
         "xtc_threshold": 0.1, "xtc_special_tokens": [1, 2]},
    ),
    (
        "combo_b",
        {"temp": 1.5, "top_p": 0.5, "min_p": 0.2, "min_tokens_to_keep": 3, "top_k": 5},
    ),
    (
        "combo_c",
        {"temp": 1.1, "top_p": 0.95, "min_p": 0.03, "min_tokens_to_keep": 2, "top_k": 20,
         "xtc_probability": 1.0, "xtc_threshold": 0.08, "xtc_special_tokens": [0]},
    ),
]

# (name, kind, arguments; "seed" reseeds first for the ones that draw)
FILTER_CASES = [
    ("top_p_0.3", "top_p", {"top_p": 0.3}),
    ("top_p_0.5", "top_p", {"top_p": 0.5}),
    ("top_p_0.9", "top_p", {"top_p": 0.9}),
    ("top_p_0.95", "top_p", {"top_p": 0.95}),
    ("min_p_0.05_k1", "min_p", {"min_p": 0.05, "min_tokens_to_keep": 1}),
    ("min_p_0.2_k3", "min_p", {"min_p": 0.2, "min_tokens_to_keep": 3}),
    ("min_p_0.5_k5", "min_p", {"min_p": 0.5, "min_tokens_to_keep": 5}),
    ("min_p_0.8_k1", "min_p", {"min_p": 0.8, "min_tokens_to_keep": 1}),
    ("top_k_1", "top_k", {"top_k": 1}),
    ("top_k_2", "top_k", {"top_k": 2}),
    ("top_k_50", "top_k", {"top_k": 50}),
    ("top_k_255", "top_k", {"top_k": 255}),
    ("xtc_1.0_0.1", "xtc", {"p": 1.0, "t": 0.1, "special": [], "seed": 99}),
    ("xtc_1.0_0.02_special", "xtc", {"p": 1.0, "t": 0.02, "special": [0, 5], "seed": 98}),
    ("xtc_0.5_0.1_special", "xtc", {"p": 0.5, "t": 0.1, "special": [2], "seed": 97}),
    ("categorical_0.9", "categorical", {"temp": 0.9, "seed": 5}),
    ("categorical_1.1", "categorical", {"temp": 1.1, "seed": 6}),
]

PROCESSOR_CASES = [
    ("bias", {"logit_bias": {3: 2.5, 10: -100.0, 0: 1.0, 63: 0.125}}),
    ("rep_1.1_20", {"repetition_penalty": 1.1, "repetition_context_size": 20}),
    ("rep_1.3_5", {"repetition_penalty": 1.3, "repetition_context_size": 5}),
    ("rep_0.8_100", {"repetition_penalty": 0.8, "repetition_context_size": 100}),
    ("rep_1.2_0", {"repetition_penalty": 1.2, "repetition_context_size": 0}),
    ("rep_0", {"repetition_penalty": 0.0}),
    ("presence_0.5_20", {"presence_penalty": 0.5, "presence_context_size": 20}),
    ("presence_-0.3_7", {"presence_penalty": -0.3, "presence_context_size": 7}),
    ("freq_0.2_20", {"frequency_penalty": 0.2, "frequency_context_size": 20}),
    ("freq_1.0_40", {"frequency_penalty": 1.0, "frequency_context_size": 40}),
    ("freq_0.7_0", {"frequency_penalty": 0.7, "frequency_context_size": 0}),
    (
        "all",
        {"logit_bias": {7: 3.0, 1: -0.5}, "repetition_penalty": 1.15,
         "repetition_context_size": 16, "presence_penalty": 0.4, "presence_context_size": 10,
         "frequency_penalty": 0.3, "frequency_context_size": 30},
    ),
]


def random_draws():
    mx.random.seed(RANDOM_SEED)
    out = {
        "randint_a": mx.random.randint(0, 1000000, (4,)),
        "uniform": mx.random.uniform(shape=(3,)),
        "randint_b": mx.random.randint(0, 1000000, (4,)),
    }
    mx.random.seed(RANDOM_SEED)  # reseeding restarts the sequence
    out["randint_again"] = mx.random.randint(0, 1000000, (4,))
    return out


def run_filter(kind, args, x):
    if "seed" in args:
        mx.random.seed(args["seed"])
    if kind == "top_p":
        return apply_top_p(x, args["top_p"])
    if kind == "min_p":
        return apply_min_p(x, args["min_p"], args["min_tokens_to_keep"])
    if kind == "top_k":
        return apply_top_k(x, args["top_k"])
    if kind == "xtc":
        return apply_xtc(x, args["p"], args["t"], args["special"])
    return categorical_sampling(x, args["temp"])


def json_params(params):
    out = dict(params)
    if "logit_bias" in out:
        out["logit_bias"] = [[k, v] for k, v in out["logit_bias"].items()]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = os.path.join(sys.argv[1], "sampler")
    os.makedirs(outdir, exist_ok=True)

    lps, lgs, hists = sampler_inputs(), processor_inputs(), histories()
    inputs = {f"lp.{k}": v for k, v in lps.items()}
    inputs.update({f"lg.{k}": v for k, v in lgs.items()})

    tokens, cases = {}, []
    for i, (name, params) in enumerate(SAMPLER_CASES):
        seed = 1000 + i
        sampler = make_sampler(**params)
        for in_name, x in lps.items():
            mx.random.seed(seed)
            tokens[f"{name}.{in_name}"] = mx.stack([sampler(x) for _ in range(DRAWS)])
            mx.eval(tokens[f"{name}.{in_name}"])
        cases.append({"name": name, "params": params, "seed": seed})

    filters = {}
    for name, kind, args in FILTER_CASES:
        for in_name, x in lps.items():
            filters[f"{name}.{in_name}"] = run_filter(kind, args, x)
            mx.eval(filters[f"{name}.{in_name}"])

    processed, proc_cases = {}, []
    for name, params in PROCESSOR_CASES:
        procs = make_logits_processors(**params)
        for in_name, logits in lgs.items():
            for h_name, hist in hists.items():
                out = mx.array(logits)  # a fresh object: processors assign into it
                toks = mx.array(hist, dtype=mx.int32)
                for proc in procs:
                    out = proc(toks, out)
                processed[f"{name}.{in_name}.{h_name}"] = out
                mx.eval(out)
        proc_cases.append({"name": name, "params": json_params(params), "n": len(procs)})

    mx.save_safetensors(os.path.join(outdir, "inputs.safetensors"), inputs)
    mx.save_safetensors(os.path.join(outdir, "random.safetensors"), random_draws())
    mx.save_safetensors(os.path.join(outdir, "tokens.safetensors"), tokens)
    mx.save_safetensors(os.path.join(outdir, "filters.safetensors"), filters)
    mx.save_safetensors(os.path.join(outdir, "processors.safetensors"), processed)
    doc = {
        "mlx": mx.__version__,
        "mlx_lm": mlx_lm.__version__,
        "draws": DRAWS,
        "random_seed": RANDOM_SEED,
        "sampler_inputs": list(lps),
        "processor_inputs": list(lgs),
        "histories": hists,
        "sampler_cases": cases,
        "filter_cases": [{"name": n, "kind": k, "args": a} for n, k, a in FILTER_CASES],
        "processor_cases": proc_cases,
    }
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {outdir}: {len(tokens)} token runs, {len(filters)} filter outputs, "
          f"{len(processed)} processor outputs")


if __name__ == "__main__":
    main()
