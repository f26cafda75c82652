"""Records mlx-lm's generate_step with a quantized KV cache (kv_bits) on tiny checkpoints.

Usage: python tools/oracle/kv_quant_goldens.py OUTDIR   (after tiny_models.py OUTDIR)

Parity mode (the model cast to float32). Per case, OUTDIR/kv_quant/<case>.safetensors:
  prompt [20] int32, tokens [16] int32, logprobs [16, V] float32 (generate_step, greedy,
  prefill_step_size 8, so the cache turns quantized between prefill chunks when
  quantized_kv_start is 12), nbytes (metadata: the first layer's cache bytes after the run);
metadata: model, kv_bits, kv_group_size, quantized_kv_start.
"""
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model

CASES = {  # name: (checkpoint, kv_bits, kv_group_size, quantized_kv_start)
    "llama_b8_start0": ("llama-q4g64", 8, 32, 0),
    "llama_b4_start12": ("llama-q4g64", 4, 32, 12),
    "llama_b2_start0": ("llama-q4g64", 2, 32, 0),
    "phi3_b4_start0": ("phi3-q4g64", 4, 32, 0),
    "qwen2_b8_start12": ("qwen2-q8g32", 8, 32, 12),
}


def main(out):
    out = Path(out)
    (out / "kv_quant").mkdir(parents=True, exist_ok=True)
    for name, (ckpt, bits, group, start) in CASES.items():
        model, config = load_model(out / "models" / ckpt)
        model.set_dtype(mx.float32)
        rng = np.random.default_rng(5)
        prompt = mx.array(rng.integers(4, config["vocab_size"], 20), dtype=mx.int32)
        cache = make_prompt_cache(model)
        toks, lps = [], []
        for tok, lp in generate_step(prompt, model, max_tokens=16, prompt_cache=cache, prefill_step_size=8,
                                     kv_bits=bits, kv_group_size=group, quantized_kv_start=start):
            toks.append(int(tok))
            lps.append(lp)
        assert type(cache[0]).__name__ == "QuantizedKVCache", type(cache[0])
        mx.save_safetensors(str(out / "kv_quant" / f"{name}.safetensors"),
                            {"prompt": prompt, "tokens": mx.array(toks, dtype=mx.int32), "logprobs": mx.stack(lps)},
                            metadata={"model": ckpt, "kv_bits": str(bits), "kv_group_size": str(group),
                                      "quantized_kv_start": str(start), "nbytes": str(cache[0].nbytes)})


if __name__ == "__main__":
    main(sys.argv[1])
