"""Goldens for `mlxcpp convert --gguf` on the sparse families and GLM-4: tiny GGUFs written by gguf-py
as llama.cpp's converters lay them out, and mlx-lm's logits on what an exact import must give.

Usage: .venv/bin/python tools/oracle/gguf_moe_goldens.py GOLDEN_DIR
Reads GOLDEN_DIR/models/{qwen3-moe-bf16, glm4-bf16, glm4-moe-bf16} (tiny_models.py) and writes
GOLDEN_DIR/gguf_moe/:
  tiny-<case>.gguf             qwen3moe (Qwen3MoeModel: experts stacked as ffn_{gate,up,down}_exps
                               [E, rows, cols], router ffn_gate_inp F32, Q/K rows as HF has them),
                               glm4 (Glm4Model: gate_up_proj fused as ffn_up, post_attention_norm /
                               ffn_norm / post_ffw_norm), glm4moe (Glm4MoeModel: a dense first layer,
                               exp_probs_b, shared experts, 4 expert groups, routed scale, and one
                               MTP block after the trunk, nextn_predict_layers 1: the last layer's
                               tensors again plus nextn.eh_proj/enorm/hnorm)
  <case>.expected.safetensors  HF names -> float32: gguf.quants.dequantize of each stored tensor
  ref-<case>/                  the MLX snapshot an exact import gives, built here from the GGUF's
                               blocks (Q8_0/Q4_0 -> MLX affine, 32-wide groups, float32 scale d and
                               bias -128d / -8d; F16/F32 -> float32) with the *source* checkpoint's
                               config.json (so the imported config is checked too)
  <case>.logits.safetensors    mlx-lm's logits on ref-<case> (model_goldens.record: prompt,
                               prefill_logits, decode_tokens, decode_logits, chunked_logits, ...)
  cases.json                   case -> {gguf, expected, logits, arch, model_type, types, config}
Cases per architecture: f16 (matrices F16) and q4_0 (qwen3moe: experts Q4_0, attention and the
tied embedding Q8_0; glm4: matrices Q4_0, the embedding Q8_0 and no output.weight, so the head is
the embedding; glm4moe: experts and attention Q4_0, shared experts, the dense layer, embedding
and head Q8_0). Norms, biases, routers and correction biases are F32 throughout (as
convert_hf_to_gguf keeps them).
"""

import json
import sys
from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np
from gguf import GGMLQuantizationType as T
from safetensors.numpy import save_file

from gguf_goldens import add_vocab, load
from model_goldens import record

TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
ATTENTION = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
}
EXPERTS = {"mlp.switch_mlp.gate_proj": "ffn_gate_exps", "mlp.switch_mlp.up_proj": "ffn_up_exps",
           "mlp.switch_mlp.down_proj": "ffn_down_exps", "mlp.gate": "ffn_gate_inp"}
BLOCK = {  # gguf-py tensor_mapping.py, as each architecture's tensor list resolves it
    "qwen3moe": {**ATTENTION, **EXPERTS, "post_attention_layernorm": "ffn_norm"},
    "glm4": {**ATTENTION, "post_self_attn_layernorm": "post_attention_norm", "post_attention_layernorm": "ffn_norm",
             "post_mlp_layernorm": "post_ffw_norm", "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"},
    "glm4moe": {**ATTENTION, **EXPERTS, "post_attention_layernorm": "post_attention_norm", "mlp.gate_proj": "ffn_gate",
                "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.gate.e_score_correction": "exp_probs_b",
                "mlp.shared_experts.gate_proj": "ffn_gate_shexp", "mlp.shared_experts.up_proj": "ffn_up_shexp",
                "mlp.shared_experts.down_proj": "ffn_down_shexp"},
}
SOURCES = {"qwen3moe": "qwen3-moe-bf16", "glm4": "glm4-bf16", "glm4moe": "glm4-moe-bf16"}
# The config fields the import must get back (compared by the C++ test), by model_type.
CONFIG_FIELDS = ["model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "vocab_size", "num_experts", "num_experts_per_tok",
                 "moe_intermediate_size", "norm_topk_prob", "n_routed_experts", "n_shared_experts", "n_group",
                 "topk_group", "routed_scaling_factor", "first_k_dense_replace", "partial_rotary_factor",
                 "attention_bias", "use_qk_norm", "decoder_sparse_step", "mlp_only_layers"]


def gguf_name(arch, hf):
    module, suffix = hf.rsplit(".", 1)
    if suffix == "e_score_correction_bias":  # HF's parameter, GGUF's exp_probs_b.bias
        module, suffix = f"{module}.e_score_correction", "bias"
    if module in TOP:
        return f"{TOP[module]}.{suffix}"
    _, _, layer, part = module.split(".", 3)
    return f"blk.{layer}.{BLOCK[arch][part]}.{suffix}"


def qtype_of(case, arch, hf, ndim):
    if ndim == 1 or hf.endswith("mlp.gate.weight"):
        return T.F32
    if case == "f16":
        return T.F16
    if arch == "glm4":
        return T.Q8_0 if "embed_tokens" in hf else T.Q4_0
    return T.Q4_0 if ("switch_mlp" in hf or "self_attn" in hf) else T.Q8_0


def affine(stored, qtype):
    """The MLX affine form of Q8_0 / Q4_0 blocks: (uint32 weight, float32 scales, float32 biases)."""
    *lead, nbytes = stored.shape
    if qtype == T.Q8_0:
        blocks = stored.reshape(*lead, nbytes // 34, 34)
        d = blocks[..., :2].copy().view(np.float16).astype(np.float32)[..., 0]
        codes = (blocks[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        packed, offset = codes, 128
    else:
        blocks = stored.reshape(*lead, nbytes // 18, 18)
        d = blocks[..., :2].copy().view(np.float16).astype(np.float32)[..., 0]
        q = blocks[..., 2:]
        codes = np.concatenate([q & 0x0F, q >> 4], axis=-1)  # elements 0..15 low nibbles, 16..31 high
        packed, offset = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8), 8
    weight = np.ascontiguousarray(packed.reshape(*lead, -1)).view(np.uint32)
    return weight, d, (-offset * d).astype(np.float32)


def add_metadata(w, arch, cfg, layers):
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // heads)
    w.add_block_count(layers)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(int(head_dim * cfg.get("partial_rotary_factor", 1.0)))
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    if arch == "qwen3moe":
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if arch == "glm4moe":  # Glm4MoeModel.set_gguf_parameters
        w.add_expert_count(cfg["n_routed_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        w.add_expert_group_count(cfg["n_group"])
        w.add_expert_group_used_count(cfg["topk_group"])
        w.add_nextn_predict_layers(1)
    add_vocab(w, cfg["vocab_size"])


def mtp_block(layer, hidden, rng):
    """glm4moe's NextN parts of its MTP block blk.<trunk> (the rest: a copy of the last layer's
    tensors): llama.cpp loads them, mlx-lm and the import drop the block."""
    eh_proj = (0.02 * rng.standard_normal((hidden, 2 * hidden))).astype(np.float16)
    return {f"blk.{layer}.nextn.eh_proj.weight": (eh_proj, T.F16),
            f"blk.{layer}.nextn.enorm.weight": (np.ones(hidden, np.float32), T.F32),
            f"blk.{layer}.nextn.hnorm.weight": (np.ones(hidden, np.float32), T.F32)}


def write_case(arch, case, weights, cfg, out):
    name = f"{arch}-{case}"
    weights = dict(weights)
    if arch == "glm4" and case == "q4_0":  # a tied GGUF: llama.cpp's head is then token_embd
        weights.pop("lm_head.weight")
    layers = cfg["num_hidden_layers"] + (1 if arch == "glm4moe" else 0)
    path = out / f"tiny-{name}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{name}")
    add_metadata(w, arch, cfg, layers)
    expected, ref, quant, used = {}, {}, {}, set()
    for hf, arr in sorted(weights.items()):
        data = np.array(arr.astype(mx.float32))
        qtype = qtype_of(case, arch, hf, data.ndim)
        used.add(qtype.name)
        stored = gguf.quants.quantize(data, qtype)
        w.add_tensor(gguf_name(arch, hf), stored, raw_dtype=qtype)
        last = f"model.layers.{cfg['num_hidden_layers'] - 1}."
        if layers > cfg["num_hidden_layers"] and hf.startswith(last):  # the MTP block's decoder layer
            mtp = hf.replace(last, f"model.layers.{cfg['num_hidden_layers']}.")
            w.add_tensor(gguf_name(arch, mtp), stored, raw_dtype=qtype)
        expected[hf] = np.ascontiguousarray(gguf.quants.dequantize(stored, qtype).astype(np.float32))
        if qtype in (T.Q8_0, T.Q4_0):
            base = hf.removesuffix(".weight")
            ref[hf], ref[f"{base}.scales"], ref[f"{base}.biases"] = affine(stored, qtype)
            quant[base] = {"group_size": 32, "bits": 8 if qtype == T.Q8_0 else 4, "mode": "affine"}
        else:
            ref[hf] = expected[hf]
    if "lm_head.weight" not in weights and arch == "glm4":  # glm4.py always has lm_head: the embedding
        for part in ("weight", "scales", "biases"):
            ref[f"lm_head.{part}"] = ref[f"model.embed_tokens.{part}"]
        quant["lm_head"] = quant["model.embed_tokens"]
    if arch == "glm4moe":
        for tname, (data, qtype) in mtp_block(cfg["num_hidden_layers"], cfg["hidden_size"],
                                              np.random.default_rng(3)).items():
            w.add_tensor(tname, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    exp_path = out / f"{name}.expected.safetensors"
    save_file(expected, str(exp_path), metadata={"source": "gguf-py dequantize"})
    check_affine(ref, quant, expected)

    snap = out / f"ref-{name}"
    snap.mkdir(exist_ok=True)
    ref_cfg = dict(cfg)
    if quant:
        ref_cfg["quantization"] = {"group_size": 32, "bits": 4, "mode": "affine", **quant}
        ref_cfg["quantization_config"] = ref_cfg["quantization"]
    (snap / "config.json").write_text(json.dumps(ref_cfg, indent=2) + "\n")
    mx.save_safetensors(str(snap / "model.safetensors"), {k: mx.array(v) for k, v in ref.items()},
                        metadata={"format": "mlx"})
    logits_path = out / f"{name}.logits.safetensors"
    mx.save_safetensors(str(logits_path), record(snap))
    return name, {"gguf": path.name, "expected": exp_path.name, "logits": logits_path.name, "arch": arch,
                  "model_type": cfg["model_type"], "types": sorted(used),
                  "config": {k: cfg[k] for k in CONFIG_FIELDS if k in cfg}}


def check_affine(ref, quant, expected):
    """The reference's affine layers dequantize to gguf-py's values (else the oracle itself is wrong)."""
    for base, q in quant.items():
        got = mx.dequantize(mx.array(ref[f"{base}.weight"]), mx.array(ref[f"{base}.scales"]),
                            mx.array(ref[f"{base}.biases"]), group_size=32, bits=q["bits"])
        want = expected.get(f"{base}.weight", expected.get("model.embed_tokens.weight"))
        if not np.array_equal(np.array(got), want):
            sys.exit(f"gguf_moe_goldens: {base}: affine form differs from gguf-py's dequantization")


def main():
    golden = Path(sys.argv[1])
    out = golden / "gguf_moe"
    out.mkdir(parents=True, exist_ok=True)
    cases = {}
    for arch, source in SOURCES.items():
        weights, cfg = load(golden, source)
        for case in ("f16", "q4_0"):
            name, c = write_case(arch, case, weights, cfg, out)
            cases[name] = c
    (out / "cases.json").write_text(json.dumps(cases, indent=2) + "\n")
    print(f"gguf moe goldens: {', '.join(cases)} -> {out}")


if __name__ == "__main__":
    main()
