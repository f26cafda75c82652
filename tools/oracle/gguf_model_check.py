"""Compares an MLX snapshot written by `mlxcpp convert --gguf` with the GGUF it came from.

The reference side is independent of our C++: gguf-py reads and dequantizes every tensor
(gguf.quants.dequantize, float32), names are mapped and llama.cpp's changes undone here in numpy
(llama Q/K `permute`, Gemma norm +1). The snapshot side is loaded with MLX (quantized layers via
mx.dequantize). Prints the max |difference| per tensor and per GGML type; with --generate, loads the
snapshot with mlx-lm and greedily generates from a chat prompt.

usage: gguf_model_check.py FILE.gguf SNAPSHOT_DIR [--generate PROMPT [--expect REGEX]] [--max-diff X]
Exit 1 when a tensor is missing or a difference exceeds --max-diff (default: no limit).
"""

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import mlx.core as mx
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
BLOCK = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
BLOCK_BY_ARCH = {
    "llama": {**BLOCK, "ffn_norm": "post_attention_layernorm"},
    "gemma3": {**BLOCK, "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
               "post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
               "post_ffw_norm": "post_feedforward_layernorm"},
}


def field(r, key):
    f = r.fields.get(key)
    return None if f is None else f.contents()


def hf_name(arch, name):
    stem, suffix = name.rsplit(".", 1)
    if stem in TOP:
        return f"{TOP[stem]}.{suffix}"
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", stem)
    if m and m.group(2) in BLOCK_BY_ARCH[arch]:
        return f"model.layers.{m.group(1)}.{BLOCK_BY_ARCH[arch][m.group(2)]}.{suffix}"
    return None


def unpermute(w, n_head):
    # convert_hf_to_gguf.py: w.reshape(n_head, 2, rows // n_head // 2, *rest).swapaxes(1, 2)
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def reference(r, arch):
    heads = field(r, f"{arch}.attention.head_count")
    kv_heads = field(r, f"{arch}.attention.head_count_kv") or heads
    for t in r.tensors:
        name = hf_name(arch, t.name)
        if name is None:
            continue
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        if arch == "llama" and name.endswith("q_proj.weight"):
            w = unpermute(w, heads)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            w = unpermute(w, kv_heads)
        elif arch == "gemma3" and name.endswith("norm.weight"):
            w = w - np.float32(1.0)
        yield t.tensor_type.name, name, w


def snapshot_tensor(weights, config, name):
    base = name.removesuffix(".weight")
    if f"{base}.scales" in weights:
        q = config.get("quantization", {})
        spec = q.get(base, q)
        w = mx.dequantize(weights[name], weights[f"{base}.scales"], weights.get(f"{base}.biases"),
                          group_size=spec["group_size"], bits=spec["bits"])
    else:
        w = weights[name]
    return np.array(w.astype(mx.float32))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("snapshot")
    ap.add_argument("--generate")
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--max-diff", type=float)
    ap.add_argument("--expect", help="regex the generated text must contain")
    args = ap.parse_args()
    r = GGUFReader(args.gguf)
    arch = field(r, "general.architecture")
    snap = Path(args.snapshot)
    config = json.loads((snap / "config.json").read_text())
    weights = mx.load(str(snap / "model.safetensors"))
    by_type, worst, bad = defaultdict(float), [], False
    for gtype, name, ref in reference(r, arch):
        if name not in weights:
            print(f"missing in snapshot: {name}")
            bad = True
            continue
        got = snapshot_tensor(weights, config, name)
        if got.shape != ref.shape:
            print(f"{name}: shape {got.shape} != {ref.shape}")
            bad = True
            continue
        d = float(np.max(np.abs(got - ref))) if ref.size else 0.0
        rel = d / max(float(np.max(np.abs(ref))), 1e-30)
        by_type[gtype] = max(by_type[gtype], d)
        worst.append((d, rel, name, gtype))
        if args.max_diff is not None and d > args.max_diff:
            bad = True
    for gtype, d in sorted(by_type.items()):
        print(f"{gtype:6s} max |diff| {d:.3g}")
    for d, rel, name, gtype in sorted(worst, reverse=True)[:5]:
        print(f"  {name} ({gtype}): max |diff| {d:.3g} ({rel:.3g} of max |w|)")
    if args.generate:
        from mlx_lm import generate, load
        model, tok = load(str(snap))
        prompt = args.generate
        if tok.chat_template:
            prompt = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
        text = generate(model, tok, prompt=prompt, max_tokens=args.max_tokens, verbose=False)
        print("generated:", text)
        if args.expect and not re.search(args.expect, text):
            print(f"generated text does not match {args.expect!r}")
            bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
