"""Goldens for src/cache: drive mlx-lm's KVCache / RotatingKVCache and its mask helpers.

Usage: .venv/bin/python tools/oracle/cache_goldens.py OUTDIR
Writes OUTDIR/cache/<scenario>.safetensors (one per cache scenario) and OUTDIR/cache/masks.safetensors.

A scenario is a cache plus an op string, replayed verbatim by tests/cache/golden_replay_test.cpp:
  u<S>  update_and_fetch with S new tokens (S == 1 takes the in-place path of RotatingKVCache)
  s<K>  K single-token updates in a row; only the state after the last one is recorded
  t<n>  trim_prompt_cache([cache], n)
Step i records (keys "<i>.<name>"): the inputs (in_keys/in_values, shape (B, H, S, D)), the fetched
keys/values, the full state buffers, scalars [offset, size, nbytes, empty, is_trimmable, trimmed, idx]
and, for every mask query (n, window, return_array), the kind (0 None, 1 "causal", 2 array) and the
array. Step "init" records the masks of the fresh cache.
"""

import os
import sys

import mlx.core as mx
import numpy as np
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import (
    KVCache,
    RotatingKVCache,
    can_trim_prompt_cache,
    create_attention_mask,
    trim_prompt_cache,
)

# (n, window_size or 0 for None, return_array)
MASK_QUERIES = [
    (n, w, r) for n in (1, 3, 6) for w in (0, 1, 3, 5) for r in (0, 1)
]

SCENARIOS = [
    # name, kind, max_size, keep, (B, H, Dk, Dv), dtype, ops
    ("kv_growth", "kv", 0, 0, (1, 2, 4, 3), mx.float32,
     "u7 u1 u1 u1 u3 t2 u1 u250 u1 t300 u5 s260 u3 t0 u1"),
    ("kv_f16_batch", "kv", 0, 0, (2, 3, 8, 8), mx.float16, "u1 u256 u1 t1 u1 u255 u1"),
    ("rot8_keep0", "rotating", 8, 0, (1, 2, 4, 4), mx.float32,
     "u2 u5 u4 u1 u1 u1 u1 u1 u1 u1 u1 u1 u1 t1 u3 u1 u1"),
    ("rot8_keep2", "rotating", 8, 2, (1, 2, 4, 4), mx.float32,
     "u20 u1 u1 u1 u1 u1 u1 u1 u1 u1 u1 u3 u1 u1 u1 u7 u1"),
    ("rot8_prefill7", "rotating", 8, 0, (1, 2, 4, 4), mx.float32,
     "u7 t2 u1 u1 u1 u1 u1 u1 u3 u1 u1 t2 u1"),
    ("rot6_trim", "rotating", 6, 0, (1, 8, 4, 4), mx.float32, "u5 t4 u1 u1 u1 u10 t4 u1"),
    ("rot18_chat", "rotating", 18, 0, (1, 2, 4, 4), mx.float16,
     "u8 u1 u2 u3 u6 u2 u1 u1 u5 t1 u1"),
    ("rot16_keep4", "rotating", 16, 4, (2, 2, 4, 2), mx.float32,
     "u3 s15 u1 u1 u5 u1 s20 u2 u1"),
    ("rot300_keep4", "rotating", 300, 4, (1, 1, 2, 2), mx.float32, "u2 s300 u1 u10 u1"),
    ("rot4_single", "rotating", 4, 0, (1, 2, 4, 4), mx.float32, "u1 u1 u1 u1 u1 u1 u2 u1 u1"),
]


def snapshot(a):
    # mlx-lm's slice assignment overwrites the array it returned earlier; copy through numpy.
    return mx.array(np.array(a))


def record_masks(out, prefix, cache):
    for n, w, r in MASK_QUERIES:
        m = cache.make_mask(n, window_size=(w or None), return_array=bool(r))
        name = f"{prefix}.mask.n{n}.w{w}.r{r}"
        if m is None:
            kind = 0
        elif isinstance(m, str):
            assert m == "causal"
            kind = 1
        else:
            kind = 2
            out[name] = snapshot(m)
        out[name + ".kind"] = mx.array([kind], dtype=mx.int32)


def record_state(out, prefix, cache, trimmed):
    if not cache.empty():
        st = cache.state
        out[f"{prefix}.state_keys"] = snapshot(st[0])
        out[f"{prefix}.state_values"] = snapshot(st[1])
    idx = cache._idx if isinstance(cache, RotatingKVCache) else -1
    out[f"{prefix}.scalars"] = mx.array(
        [cache.offset, cache.size(), cache.nbytes, int(cache.empty()),
         int(cache.is_trimmable()), trimmed, idx],
        dtype=mx.int64,
    )
    record_masks(out, prefix, cache)


def run_scenario(name, kind, max_size, keep, dims, dtype, ops):
    b, h, dk, dv = dims
    cache = KVCache() if kind == "kv" else RotatingKVCache(max_size=max_size, keep=keep)
    out = {}
    record_masks(out, "init", cache)
    for i, op in enumerate(ops.split()):
        code, n = op[0], int(op[1:])
        p = str(i)
        if code in "us":
            keys = mx.random.uniform(shape=(b, h, n, dk)).astype(dtype)
            values = mx.random.uniform(shape=(b, h, n, dv)).astype(dtype)
            # Snapshots: RotatingKVCache adopts its first input and later writes into it.
            out[p + ".in_keys"], out[p + ".in_values"] = snapshot(keys), snapshot(values)
            if code == "u":
                k, v = cache.update_and_fetch(keys, values)
            else:
                for j in range(n):
                    k, v = cache.update_and_fetch(keys[..., j : j + 1, :], values[..., j : j + 1, :])
            out[p + ".keys"], out[p + ".values"] = snapshot(k), snapshot(v)
            record_state(out, p, cache, -1)
        elif code == "t":
            assert can_trim_prompt_cache([cache]) == cache.is_trimmable()
            record_state(out, p, cache, trim_prompt_cache([cache], n))
        else:
            raise ValueError(f"unknown op {op}")
    meta = {
        "kind": kind,
        "max_size": str(max_size),
        "keep": str(keep),
        "ops": ops,
        "mask_queries": " ".join(f"{n}:{w}:{r}" for n, w, r in MASK_QUERIES),
    }
    return out, meta


def mask_goldens():
    out = {}
    for n in range(1, 7):
        for off in range(0, 5):
            for w in (0, 1, 2, 3, 7):
                win = w or None
                out[f"causal.n{n}.o{off}.w{w}"] = create_causal_mask(n, off, window_size=win)
                for r in (0, 1):
                    m = create_attention_mask(n, off, bool(r), win)
                    key = f"attn.n{n}.o{off}.w{w}.r{r}"
                    kind = 0 if m is None else 1 if isinstance(m, str) else 2
                    out[key + ".kind"] = mx.array([kind], dtype=mx.int32)
                    if kind == 2:
                        out[key] = m
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: cache_goldens.py OUTDIR")
    outdir = os.path.join(sys.argv[1], "cache")
    os.makedirs(outdir, exist_ok=True)
    mx.random.seed(1234)
    for sc in SCENARIOS:
        out, meta = run_scenario(*sc)
        mx.save_safetensors(os.path.join(outdir, sc[0] + ".safetensors"), out, meta)
    mx.save_safetensors(os.path.join(outdir, "masks.safetensors"), mask_goldens())
    print(f"wrote {len(SCENARIOS) + 1} files to {outdir}")


if __name__ == "__main__":
    main()
