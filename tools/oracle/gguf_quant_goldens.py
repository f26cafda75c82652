"""Goldens for src/artifacts/gguf_quant: GGML blocks and gguf-py's float32 dequantization of them.

Usage: .venv/bin/python tools/oracle/gguf_quant_goldens.py OUTDIR
Writes OUTDIR/gguf_quant/<case>.safetensors, each with
  "bytes"     uint8 [nbytes]   the tensor's raw GGML data (blocks along the last dim)
  "expected"  float32 [shape]  gguf.quants.dequantize of those bytes (ggml's dequantize_row_*)
  metadata    type (ggml name), type_id, shape ("4,256"), source
and OUTDIR/gguf_quant/cases.json listing them. Sources:
  quantize       gguf.quants.quantize of a seeded normal tensor (types gguf-py can quantize)
  random_blocks  valid random blocks built bytewise: random quant/scale bytes, random fp16 d/dmin
                 from 1e-7 (fp16 subnormals) to 1, either sign, some zero (all K-quants: gguf-py
                 only dequantizes them)
  big_d          Q4_0/Q8_0 with d so large that -8d / -128d overflow float16
  q6_k_simple    a seeded normal tensor put through a simple Q6_K quantizer written here (realistic
                 sub-block scales, for the requantization error)
The C++ test (tests/artifacts/gguf_quant_test.cpp) requires exact equality with "expected".
"""

import json
import os
import sys
from importlib import metadata

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from safetensors.numpy import save_file

QK_K = 256


def random_f16(rng, n, lo_exp=-7.0, hi_exp=0.0, signed=True):
    mag = 10.0 ** rng.uniform(lo_exp, hi_exp, size=n)
    sign = rng.choice([-1.0, 1.0], size=n) if signed else np.ones(n)
    v = (mag * sign).astype(np.float16)
    v[rng.random(n) < 0.03] = 0  # a few zero scales
    return v


# Byte offsets of the fp16 fields of each block type (everything else is free-form bits).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_blocks(rng, qtype, shape, lo_exp=-7.0, hi_exp=0.0):
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    n_blocks = int(np.prod(shape)) // block_size
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        d = random_f16(rng, n_blocks, lo_exp, hi_exp)
        blocks[:, off:off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(*shape[:-1], shape[-1] // block_size * type_size)


def q6_k_simple(x):
    """A plain Q6_K quantizer (not llama.cpp's search): per 16 an int8 scale, per 256 an fp16 d."""
    blocks = x.reshape(-1, QK_K).astype(np.float32)
    n = blocks.shape[0]
    sub = blocks.reshape(n, 16, 16)
    sub_scale = np.abs(sub).max(axis=-1) / 31.0  # (n, 16)
    d = (sub_scale.max(axis=-1) / 127.0).astype(np.float16)  # (n,)
    d32 = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.round(sub_scale / d32), 0).clip(-128, 127).astype(np.int8)
        eff = d32 * sc.astype(np.float32)
        q = np.where(eff[..., None] != 0, np.round(sub / eff[..., None]), 0)
    codes = (q.clip(-32, 31) + 32).astype(np.uint8).reshape(n, QK_K)
    ql = np.zeros((n, 128), np.uint8)
    qh = np.zeros((n, 64), np.uint8)
    for h in range(2):
        c = codes[:, 128 * h:128 * (h + 1)]
        ql[:, 64 * h:64 * h + 32] = (c[:, 0:32] & 0xF) | ((c[:, 64:96] & 0xF) << 4)
        ql[:, 64 * h + 32:64 * h + 64] = (c[:, 32:64] & 0xF) | ((c[:, 96:128] & 0xF) << 4)
        qh[:, 32 * h:32 * h + 32] = ((c[:, 0:32] >> 4) | ((c[:, 32:64] >> 4) << 2)
                                     | ((c[:, 64:96] >> 4) << 4) | ((c[:, 96:128] >> 4) << 6))
    out = np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(n, 2)], axis=1)
    # Our packing must be what gguf-py reads back.
    want = (eff[..., None] * (codes.reshape(n, 16, 16).astype(np.float32) - 32)).reshape(n, QK_K)
    got = gguf.quants.dequantize(out, T.Q6_K)
    assert np.array_equal(got, want), "q6_k_simple packing disagrees with gguf-py"
    return out.reshape(*x.shape[:-1], -1)


def main(outdir):
    out = os.path.join(outdir, "gguf_quant")
    os.makedirs(out, exist_ok=True)
    cases = []

    def emit(name, qtype, shape, data, source):
        data = np.ascontiguousarray(data)
        expected = gguf.quants.dequantize(data, qtype).astype(np.float32)
        assert expected.shape == tuple(shape), (name, expected.shape, shape)
        meta = {"type": qtype.name, "type_id": str(int(qtype)),
                "shape": ",".join(str(s) for s in shape), "source": source}
        save_file({"bytes": data.view(np.uint8).reshape(-1), "expected": expected},
                  os.path.join(out, name + ".safetensors"), metadata=meta)
        cases.append(dict(name=name, **meta))

    seed = 0
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16, T.F16, T.F32]:
        for shape in [(8, 256), (2, 3, 64)]:
            seed += 1
            rng = np.random.default_rng(seed)
            x = rng.normal(0, 1, size=shape) * rng.uniform(0.01, 2.0, size=(*shape[:-1], 1))
            data = gguf.quants.quantize(x.astype(np.float32), qtype)
            emit(f"{qtype.name.lower()}_quantize_{'x'.join(map(str, shape))}", qtype, shape,
                 data, "quantize")

    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                  T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]:
        for shape in [(6, 512), (2, 2, 256)]:
            seed += 1
            rng = np.random.default_rng(seed)
            data = random_blocks(rng, qtype, shape)
            emit(f"{qtype.name.lower()}_random_{'x'.join(map(str, shape))}", qtype, shape, data,
                 "random_blocks")

    for qtype in [T.Q4_0, T.Q8_0]:
        seed += 1
        rng = np.random.default_rng(seed)
        data = random_blocks(rng, qtype, (4, 64), lo_exp=3.0, hi_exp=4.5)
        emit(f"{qtype.name.lower()}_big_d", qtype, (4, 64), data, "big_d")

    seed += 1
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.02, size=(32, 1024)).astype(np.float32)
    emit("q6_k_simple_32x1024", T.Q6_K, (32, 1024), q6_k_simple(x), "q6_k_simple")

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"gguf": metadata.version("gguf"), "numpy": np.__version__, "cases": cases},
                  f, indent=1)
    print(f"gguf_quant goldens: {len(cases)} cases in {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
