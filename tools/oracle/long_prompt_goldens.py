"""Records mlx-lm's logits for long prompts on the tiny Qwen3.5 / Qwen3-Next / Gemma 4 checkpoints
(parity mode: model cast to float32, as model_goldens.py does).

Usage: python tools/oracle/long_prompt_goldens.py OUTDIR   (after tiny_models.py OUTDIR)
Writes OUTDIR/long_prompts/<name>.safetensors with, per checkpoint:
  prompt            [T] int32  T = 200 for the gated-DeltaNet checkpoints (three full 64-token
                               chunks and a partial one), 100 for Gemma 4 (its sliding window is 8:
                               the rotating caches wrap many times)
  prefill_logits    [T, V]     one T-token forward through a fresh cache
  decode_tokens     [16]       greedy tokens fed during decode
  decode_logits     [16, V]    logits of 16 greedy single-token steps after the prefill
  chunked_logits    [T, V]     the same prefill in uneven chunks (`chunks`, [n, 2] int32 bounds)
"""
import os
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.utils import load_model

sys.path.insert(0, os.path.dirname(__file__))
from model_goldens import prefill_decode_chunked  # noqa: E402

# name -> (prompt length, chunk bounds): chunk edges that do not fall on the 64-token DeltaNet
# chunks nor on the 8-token window.
CHECKPOINTS = {
    "qwen3_5-bf16": (200, [(0, 70), (70, 141), (141, 200)]),
    "qwen3_5-q4g64": (200, [(0, 70), (70, 141), (141, 200)]),
    "qwen3_5-moe-q4g64": (200, [(0, 70), (70, 141), (141, 200)]),
    "qwen3-next-bf16": (200, [(0, 70), (70, 141), (141, 200)]),
    "qwen3-next-q4g64": (200, [(0, 70), (70, 141), (141, 200)]),
    "gemma4-text-bf16": (100, [(0, 13), (13, 50), (50, 51), (51, 100)]),
    "gemma4-text-q4g64": (100, [(0, 13), (13, 50), (50, 51), (51, 100)]),
    "gemma4-moe-untied-q4g64": (100, [(0, 13), (13, 50), (50, 51), (51, 100)]),
}


def record(path, length, chunks):
    model, config = load_model(path)
    model.set_dtype(mx.float32)
    vocab = config["vocab_size"] if "vocab_size" in config else config["text_config"]["vocab_size"]
    rng = np.random.default_rng(11)
    prompt = mx.array(rng.integers(4, vocab, length), dtype=mx.int32)
    g = {"prompt": prompt, "chunks": mx.array(chunks, dtype=mx.int32)}
    g.update(prefill_decode_chunked(model, prompt, chunks))
    return g


def main(out):
    out = Path(out)
    (out / "long_prompts").mkdir(parents=True, exist_ok=True)
    for name, (length, chunks) in CHECKPOINTS.items():
        g = record(out / "models" / name, length, chunks)
        mx.save_safetensors(str(out / "long_prompts" / f"{name}.safetensors"), g)


if __name__ == "__main__":
    main(sys.argv[1])
