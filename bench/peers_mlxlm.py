"""mlx-lm's side of bench/peers: prefill and decode tok/s of one MLX snapshot, as one JSON line.

Usage: .venv/bin/python bench/peers_mlxlm.py --model DIR [--prompt-tokens 512] [--gen-tokens 128]
         [--batch 1] [--runs 5] [--decode-depths 0,512] [--float32] [--seed 0]
Batch 1 is timed with mlx_lm.generate.generate_step as mlx-lm's stream_generate times it
(prefill: start to the first token; decode: the gen_tokens after it over the time since it).
Batch B > 1 runs the model on ids [B, L] with make_prompt_cache and the same chunked prefill
and pipelined greedy loop (mlx-lm has no batched generate_step), aggregate tok/s.
Each run times prefill on --prompt-tokens, then decode at each of --decode-depths: a depth equal
to the prompt continues that prompt's cache; another depth d gets its own untimed prefill of
max(1, d) tokens (0: a 1-token prompt, like llama-bench's tg), as `mlxcpp bench --decode-depth`
does. One untimed warm-up run first (mlx-lm on CPU is slow: keep runs and tokens modest).
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model


def prompts(batch, tokens, vocab, seed):
    return np.random.default_rng(seed).integers(min(4, vocab - 1), vocab, (batch, tokens)).astype(np.int32)


def run_single(model, prompt, gen):
    """(prefill tok/s, decode tok/s) of one generate_step run."""
    tic = time.perf_counter()
    prefill = decode = 0.0
    for n, _ in enumerate(generate_step(mx.array(prompt), model, max_tokens=gen + 1)):
        if n == 0:
            prefill = len(prompt) / (time.perf_counter() - tic)
            tic = time.perf_counter()
    if gen > 0:
        decode = gen / (time.perf_counter() - tic)
    return prefill, decode


def greedy_step(model, ids, cache):
    logits = model(ids, cache=cache)[:, -1, :]
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    return mx.argmax(logprobs, axis=-1), logprobs


def run_batch(model, ids, gen, step_size=2048):
    """generate_step's prefill and pipelined loop for ids [B, L] (aggregate tok/s)."""
    B, L = ids.shape
    ids = mx.array(ids)
    cache = make_prompt_cache(model)
    tic = time.perf_counter()
    done = 0
    while L - done > 1:
        n = min(step_size, L - done - 1)
        model(ids[:, done:done + n], cache=cache)
        mx.eval([c.state for c in cache])
        done += n
        mx.clear_cache()
    y, lp = greedy_step(model, ids[:, done:], cache)
    mx.eval(y, lp)
    prefill = B * L / (time.perf_counter() - tic)
    tic = time.perf_counter()
    for _ in range(gen):
        nxt, lp = greedy_step(model, y[:, None], cache)
        mx.async_eval(nxt, lp)
        mx.eval(y)
        y = nxt
    mx.eval(y)
    decode = B * gen / (time.perf_counter() - tic) if gen > 0 else 0.0
    return prefill, decode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--decode-depths", default="")
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    model, config = load_model(Path(a.model))
    if a.float32:
        model.set_dtype(mx.float32)
    asked = [int(d) for d in a.decode_depths.split(",") if d] or [a.prompt_tokens]
    depths = [d if d == a.prompt_tokens else max(1, d) for d in asked]
    ids = prompts(a.batch, max(depths + [a.prompt_tokens]), config.get("vocab_size") or config["text_config"]["vocab_size"], a.seed)

    def measure(tokens, gen):
        if a.batch == 1:
            return run_single(model, ids[0, :tokens].tolist(), gen)
        return run_batch(model, ids[:, :tokens], gen)

    def once(gen):
        """[prefill tok/s, decode tok/s at each depth]"""
        with_prompt = a.prompt_tokens in depths
        prefill, at_prompt = measure(a.prompt_tokens, gen if with_prompt else 0)
        return [prefill] + [at_prompt if d == a.prompt_tokens else measure(d, gen)[1] for d in depths]

    once(min(a.gen_tokens, 16))
    runs = [once(a.gen_tokens) for _ in range(a.runs)]

    def summary(xs):
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}

    print(json.dumps({
        "model": a.model, "batch": a.batch, "prompt_tokens": a.prompt_tokens, "gen_tokens": a.gen_tokens,
        "float32": a.float32, "runs": a.runs, "prefill_tps": summary([r[0] for r in runs]),
        "decode_tps": {str(d): summary([r[i + 1] for r in runs]) for i, d in enumerate(asked)},
    }))


if __name__ == "__main__":
    main()
