"""Records mlx-lm's logits on the tiny checkpoints (parity mode: model cast to float32).

Usage: python tools/oracle/model_goldens.py OUTDIR   (after tiny_models.py OUTDIR)
Writes OUTDIR/logits/<name>.safetensors with, per checkpoint:
  prompt            [20] int32
  prefill_logits    [20, V]   one 20-token forward through a fresh cache
  decode_tokens     [16]      greedy tokens fed during decode
  decode_logits     [16, V]   logits of 16 greedy single-token steps after the prefill
  chunked_logits    [20, V]   the same prefill in 3 chunks (7, 7, 6)
  rotating_logits   [20, V]   RotatingKVCache(max_size=12, keep=4) in place of each of make_prompt_cache's
                              caches: 10-token prefill, 20 steps
  rotating_tokens   [20]      (both absent for models with recurrent layers: no rotating cache)
  gen_tokens, gen_logprobs          generate_step greedy, 16 tokens
  gen_chunked_tokens, gen_chunked_logprobs   generate_step with prefill_step_size=8
  gen_sampled_tokens               generate_step, seed 42, temp 0.8, top_p 0.9, top_k 50
"""
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import ArraysCache, RotatingKVCache, make_prompt_cache
from mlx_lm.sample_utils import make_sampler
from mlx_lm.utils import load_model


def greedy_steps(model, cache, first, steps):
    tokens, logits = [], []
    y = first
    for _ in range(steps):
        tokens.append(y)
        out = model(mx.array([[y]], dtype=mx.int32), cache=cache)
        logits.append(out[0, -1])
        y = int(mx.argmax(out[0, -1]).item())
    return mx.array(tokens, dtype=mx.int32), mx.stack(logits)


def prefill_decode_chunked(model, prompt, chunks):
    """prefill_logits (one forward), decode_tokens/decode_logits (16 greedy steps after it) and
    chunked_logits (the same prompt through a fresh cache in chunks [(a, b), ...])."""
    g = {}
    cache = make_prompt_cache(model)
    logits = model(prompt[None], cache=cache)
    g["prefill_logits"] = logits[0]
    first = int(mx.argmax(logits[0, -1]).item())
    g["decode_tokens"], g["decode_logits"] = greedy_steps(model, cache, first, 16)

    cache = make_prompt_cache(model)
    parts = [model(prompt[None, a:b], cache=cache)[0] for a, b in chunks]
    g["chunked_logits"] = mx.concatenate(parts, axis=0)
    return g


def run_generate(prompt, model, **kw):
    toks, lps = [], []
    for tok, lp in generate_step(prompt, model, max_tokens=16, **kw):
        toks.append(int(tok))
        lps.append(lp)
    return mx.array(toks, dtype=mx.int32), mx.stack(lps)


def record(path):
    model, config = load_model(path)
    model.set_dtype(mx.float32)
    vocab = config["vocab_size"] if "vocab_size" in config else config["text_config"]["vocab_size"]  # mistral3: nested
    rng = np.random.default_rng(7)
    prompt = mx.array(rng.integers(4, vocab, 20), dtype=mx.int32)
    g = {"prompt": prompt}

    g.update(prefill_decode_chunked(model, prompt, [(0, 7), (7, 14), (14, 20)]))

    # One per cache make_prompt_cache gives (Gemma 4's KV-shared layers have none); none for models
    # with recurrent layers (no rotating cache for them).
    if not any(isinstance(c, ArraysCache) for c in make_prompt_cache(model)):
        cache = [RotatingKVCache(max_size=12, keep=4) for _ in make_prompt_cache(model)]
        logits = model(prompt[None, :10], cache=cache)
        first = int(mx.argmax(logits[0, -1]).item())
        g["rotating_tokens"], g["rotating_logits"] = greedy_steps(model, cache, first, 20)

    g["gen_tokens"], g["gen_logprobs"] = run_generate(prompt, model)
    g["gen_chunked_tokens"], g["gen_chunked_logprobs"] = run_generate(prompt, model, prefill_step_size=8)
    mx.random.seed(42)
    sampler = make_sampler(temp=0.8, top_p=0.9, top_k=50)
    g["gen_sampled_tokens"], _ = run_generate(prompt, model, sampler=sampler)
    return g


def main(out):
    out = Path(out)
    (out / "logits").mkdir(parents=True, exist_ok=True)
    for path in sorted((out / "models").iterdir()):
        if (path / "tokenizer.json").exists():
            continue  # a snapshot for the CLI / server tests (real vocabulary): no logits goldens
        g = record(path)
        mx.save_safetensors(str(out / "logits" / f"{path.name}.safetensors"), g)


if __name__ == "__main__":
    main(sys.argv[1])
