"""Goldens for `mlxcpp convert --gguf`: tiny llama GGUF files written by gguf-py, and the tensors an
exact conversion must produce.

Usage: .venv/bin/python tools/oracle/gguf_goldens.py GOLDEN_DIR
Reads GOLDEN_DIR/models/{llama-bf16, qwen3-bf16, phi3-longrope-bf16, minicpm-bf16} (tiny_models.py)
and writes GOLDEN_DIR/gguf/:
  tiny-llama-<case>.gguf           the checkpoint as llama.cpp's convert_hf_to_gguf.py lays it out:
                                   llama.* metadata, Q/K rows `permute`d, a small gpt2 vocabulary
  tiny-llama-<case>.expected.safetensors
                                   HF names -> float32: gguf.quants.dequantize of each stored
                                   tensor with the permutation undone (what mlx must compute from
                                   our snapshot: mx.dequantize or the dense tensor)
  tiny-qwen3-q8_0.gguf (+ .expected)  qwen3.* metadata (head_dim 48 as key_length), Q/K rows as
                                   HF has them (Qwen3Model keeps rotate-half), q/k norms
  tiny-phi3-q8_0.gguf (+ .expected)  phi3-longrope-bf16: attn_qkv and ffn_up (gate + up) fused,
                                   24 rotary dims, rope_factors_long/short F32 tensors, untied
  tiny-minicpm-q4_0.gguf (+ .expected)  minicpm-bf16 without its lm_head (MiniCPM-2B's GGUFs are
                                   tied): embedding/residual/logit scales, Q/K permuted; the
                                   snapshot's lm_head is the embedding (expected as such)
  cases.json                       case -> {gguf, expected, types, arch}
Cases: q8_0 (every matrix Q8_0), q4_0 (matrices Q4_0, embedding Q8_0: per-path overrides),
f16 (matrices F16), qwen3-q8_0, phi3-q8_0, minicpm-q4_0, olmo2-q8_0 (olmo2-bf16: post-norms,
whole-projection q/k norms, Q/K unpermuted), granite-q8_0 (granite-bf16: the four multipliers,
Q/K permuted, tied). Norms are F32 throughout.
"""

import json
import sys
from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np
from gguf import GGMLQuantizationType as T
from safetensors.numpy import save_file

NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
BLOCK = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up",  # phi3: fused as in HF
}


# Olmo2Model: the branches' post-norms (no input norms).
OLMO2_BLOCK = {**BLOCK, "post_attention_layernorm": "post_attention_norm", "post_feedforward_layernorm": "post_ffw_norm"}


def gguf_name(hf, arch="llama"):
    if hf in NAMES:
        return NAMES[hf]
    _, _, layer, rest = hf.split(".", 3)
    part, suffix = rest.rsplit(".", 1)
    return f"blk.{layer}.{(OLMO2_BLOCK if arch == 'olmo2' else BLOCK)[part]}.{suffix}"


def permute(w, n_head):  # convert_hf_to_gguf.py LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def byte_chars():  # GPT-2's bytes_to_unicode
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def vocab(size):
    tokens = byte_chars()
    merges, seen = [], set(tokens)
    letters = [tokens[b] for b in b" etaoinshrdlucmfwypvbgkjqxz"]
    for a in letters:
        for b in letters:
            if len(tokens) == size - 1:
                break
            if a + b not in seen:
                tokens.append(a + b)
                merges.append(f"{a} {b}")
                seen.add(a + b)
    tokens.append("<|endoftext|>")
    types = [gguf.TokenType.NORMAL] * (len(tokens) - 1) + [gguf.TokenType.CONTROL]
    return tokens, types, merges


def add_vocab(w, size):
    """vocab(size) as a gpt2-model tokenizer, <|endoftext|> as BOS and EOS."""
    tokens, types, merges = vocab(size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)


def write_case(case, weights, cfg, out, arch="llama"):
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // heads)
    # convert_hf_to_gguf permutes Q/K for llama and MiniCPM (not Qwen2/3, Phi-3's fused qkv)
    permuted = arch in ("llama", "minicpm", "granite")  # GraniteModel is a LlamaModel; Olmo2Model keeps HF's rows
    path = out / f"tiny-{arch}-{case}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}-{case}")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    # Phi3MiniModel: int(partial_rotary_factor * hidden) // heads rotary dims.
    w.add_rope_dimension_count(int(cfg.get("partial_rotary_factor", 1.0) * cfg["hidden_size"]) // heads)
    if arch == "minicpm":  # MiniCPMModel.set_gguf_parameters
        w.add_embedding_scale(cfg["scale_emb"])
        w.add_residual_scale(cfg["scale_depth"] / cfg["num_hidden_layers"] ** 0.5)
        w.add_logit_scale(cfg["hidden_size"] / cfg["dim_model_base"])
        # Tied as MiniCPM-2B's GGUF is: no output.weight (llama.cpp falls back to token_embd).
        weights = {k: v for k, v in weights.items() if not k.startswith("lm_head.")}
    if arch == "granite":  # GraniteModel.set_gguf_parameters
        w.add_embedding_scale(cfg["embedding_multiplier"])
        w.add_attention_scale(cfg["attention_multiplier"])
        w.add_residual_scale(cfg["residual_multiplier"])
        w.add_logit_scale(cfg["logits_scaling"])
    if arch == "phi3":
        w.add_rope_scaling_orig_ctx_len(cfg["original_max_position_embeddings"])
        rs = cfg["rope_scaling"]
        w.add_tensor("rope_factors_long.weight", np.array(rs["long_factor"], dtype=np.float32), raw_dtype=T.F32)
        w.add_tensor("rope_factors_short.weight", np.array(rs["short_factor"], dtype=np.float32), raw_dtype=T.F32)
    if head_dim != cfg["hidden_size"] // heads:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    add_vocab(w, cfg["vocab_size"])
    expected, used = {}, set()
    for hf, arr in sorted(weights.items()):
        data = np.array(arr.astype(mx.float32))
        if permuted and hf.endswith("q_proj.weight"):
            data = permute(data, heads)
        elif permuted and hf.endswith("k_proj.weight"):
            data = permute(data, kv_heads)
        if data.ndim == 1:
            qtype = T.F32
        elif case == "f16":
            qtype = T.F16
        elif case == "q4_0" and not hf.startswith("model.embed_tokens"):
            qtype = T.Q4_0
        else:
            qtype = T.Q8_0
        used.add(qtype.name)
        stored = gguf.quants.quantize(data, qtype)
        w.add_tensor(gguf_name(hf, arch), stored, raw_dtype=qtype)
        ref = gguf.quants.dequantize(stored, qtype).astype(np.float32)
        if permuted and hf.endswith("q_proj.weight"):
            ref = unpermute(ref, heads)
        elif permuted and hf.endswith("k_proj.weight"):
            ref = unpermute(ref, kv_heads)
        expected[hf] = np.ascontiguousarray(ref)
    if arch == "minicpm":  # the snapshot's lm_head is the embedding (minicpm.py's sanitize)
        expected["lm_head.weight"] = expected["model.embed_tokens.weight"]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    exp_path = out / f"tiny-{arch}-{case}.expected.safetensors"
    save_file(expected, str(exp_path), metadata={"source": "gguf-py dequantize, permutation undone"})
    return {"gguf": path.name, "expected": exp_path.name, "types": sorted(used), "arch": arch}


def load(golden, name):
    src = golden / "models" / name
    weights = {}
    for f in sorted(src.glob("*.safetensors")):
        weights.update(mx.load(str(f)))
    return weights, json.loads((src / "config.json").read_text())


def main():
    golden = Path(sys.argv[1])
    out = golden / "gguf"
    out.mkdir(parents=True, exist_ok=True)
    weights, cfg = load(golden, "llama-bf16")
    cases = {case: write_case(case, weights, cfg, out) for case in ("q8_0", "q4_0", "f16")}
    weights, cfg = load(golden, "qwen3-bf16")
    cases["qwen3-q8_0"] = write_case("q8_0", weights, cfg, out, arch="qwen3")
    weights, cfg = load(golden, "phi3-longrope-bf16")
    cases["phi3-q8_0"] = write_case("q8_0", weights, cfg, out, arch="phi3")
    weights, cfg = load(golden, "minicpm-bf16")
    cases["minicpm-q4_0"] = write_case("q4_0", weights, cfg, out, arch="minicpm")
    weights, cfg = load(golden, "olmo2-bf16")
    cases["olmo2-q8_0"] = write_case("q8_0", weights, cfg, out, arch="olmo2")
    weights, cfg = load(golden, "granite-bf16")
    cases["granite-q8_0"] = write_case("q8_0", weights, cfg, out, arch="granite")
    (out / "cases.json").write_text(json.dumps(cases, indent=2) + "\n")
    print(f"gguf goldens: {', '.join(cases)} -> {out}")


if __name__ == "__main__":
    main()
