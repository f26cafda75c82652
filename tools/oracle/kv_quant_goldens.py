"""Records mlx-lm's generate_step with a quantized KV cache (kv_bits) on tiny checkpoints.

mlx-lm has no quantized rotating cache (RotatingKVCache.to_quantized raises): for --max-kv-size
runs the reference below is one, written from mlx-lm's own RotatingKVCache: the ring applied to
each of mx.quantize's three tensors (packed rows, scales, biases) by three rotating caches kept in
step; attention goes through mlx-lm's quantized_scaled_dot_product_attention as for its own
QuantizedKVCache (base.scaled_dot_product_attention checks for `bits`).

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
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache
from mlx_lm.utils import load_model

CASES = {  # name: (checkpoint, kv_bits, kv_group_size, quantized_kv_start, max_kv_size)
    "llama_b8_start0": ("llama-q4g64", 8, 32, 0, None),
    "llama_b4_start12": ("llama-q4g64", 4, 32, 12, None),
    "llama_b2_start0": ("llama-q4g64", 2, 32, 0, None),
    "phi3_b4_start0": ("phi3-q4g64", 4, 32, 0, None),
    "qwen2_b8_start12": ("qwen2-q8g32", 8, 32, 12, None),
    # Rotating (max_kv_size 12, keep 4): 20 prompt tokens and 16 steps wrap the ring several times.
    "llama_rot12_b8_start0": ("llama-q4g64", 8, 32, 0, 12),
    "llama_rot12_b4_start10": ("llama-q4g64", 4, 32, 10, 12),
}


class QuantizedRotatingKVCache:
    """RotatingKVCache's ring on mx.quantize's (packed, scales, biases): three lanes in step."""

    def __init__(self, max_size, keep, group_size, bits):
        self.lanes = [RotatingKVCache(max_size=max_size, keep=keep) for _ in range(3)]
        self.group_size, self.bits = group_size, bits

    @classmethod
    def from_rotating(cls, c, group_size, bits):
        q = cls(c.max_size, c.keep, group_size, bits)
        if c.keys is not None:
            qk = mx.quantize(c.keys, group_size=group_size, bits=bits)
            qv = mx.quantize(c.values, group_size=group_size, bits=bits)
            for lane, k, v in zip(q.lanes, qk, qv):
                lane.state = (k, v, c.offset, c.keep, c.max_size, c._idx)
        return q

    @property
    def offset(self):
        return self.lanes[0].offset

    def update_and_fetch(self, keys, values):
        qk = mx.quantize(keys, group_size=self.group_size, bits=self.bits)
        qv = mx.quantize(values, group_size=self.group_size, bits=self.bits)
        out = [lane.update_and_fetch(k, v) for lane, k, v in zip(self.lanes, qk, qv)]
        return tuple(o[0] for o in out), tuple(o[1] for o in out)

    def make_mask(self, *args, **kwargs):
        return self.lanes[0].make_mask(*args, **kwargs)

    @property
    def state(self):
        return [a for lane in self.lanes if lane.keys is not None for a in (lane.keys, lane.values)]

    @property
    def nbytes(self):
        return sum(lane.nbytes for lane in self.lanes)


RotatingKVCache.to_quantized = lambda self, group_size=64, bits=4: QuantizedRotatingKVCache.from_rotating(
    self, group_size, bits)


def main(out):
    out = Path(out)
    (out / "kv_quant").mkdir(parents=True, exist_ok=True)
    for name, (ckpt, bits, group, start, max_kv) in CASES.items():
        model, config = load_model(out / "models" / ckpt)
        model.set_dtype(mx.float32)
        rng = np.random.default_rng(5)
        prompt = mx.array(rng.integers(4, config["vocab_size"], 20), dtype=mx.int32)
        # RotatingKVCache(max_kv, keep=4) per layer, as make_prompt_cache(max_kv_size) builds for
        # models without a make_cache (llama has one, which would ignore max_kv_size).
        cache = (make_prompt_cache(model) if max_kv is None
                 else [RotatingKVCache(max_size=max_kv, keep=4) for _ in model.layers])
        toks, lps = [], []
        for tok, lp in generate_step(prompt, model, max_tokens=16, prompt_cache=cache, prefill_step_size=8,
                                     kv_bits=bits, kv_group_size=group, quantized_kv_start=start):
            toks.append(int(tok))
            lps.append(lp)
        assert type(cache[0]).__name__ == ("QuantizedKVCache" if max_kv is None else "QuantizedRotatingKVCache")
        mx.save_safetensors(str(out / "kv_quant" / f"{name}.safetensors"),
                            {"prompt": prompt, "tokens": mx.array(toks, dtype=mx.int32), "logprobs": mx.stack(lps)},
                            metadata={"model": ckpt, "kv_bits": str(bits), "kv_group_size": str(group),
                                      "quantized_kv_start": str(start), "nbytes": str(cache[0].nbytes),
                                      "max_kv_size": str(max_kv or 0)})


if __name__ == "__main__":
    main(sys.argv[1])
