"""Goldens for `mlxcpp convert --hf`: mlx_lm.convert's output on the tiny bf16 checkpoints.

Usage: .venv/bin/python tools/oracle/convert_goldens.py GOLDEN_DIR   (after tiny_models.py)
Writes GOLDEN_DIR/convert/:
  in/<model>/     a tiny checkpoint (GOLDEN_DIR/models/<model>) plus a 512-token word-level
                  tokenizer (mlx_lm.convert needs one; its bytes are not compared)
  out/<case>/     what mlx_lm.convert.convert wrote for the case
  <case>.logits.safetensors   mlx-lm's logits on out/<case> (model_goldens.record), for the
                  cases in LOGITS
  cases.json      case -> {model, args (the convert() keywords)}
"""

import json
import shutil
import sys
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import mlx.core as mx
from tokenizers import Tokenizer, models, pre_tokenizers

from model_goldens import record

AFFINE_Q4 = {"quantize": True, "q_bits": 4, "q_group_size": 64}
# case -> (input checkpoint, convert() keywords)
CASES = {
    "llama-q4g64": ("llama-bf16", AFFINE_Q4),
    "llama-q8g32": ("llama-bf16", {"quantize": True, "q_bits": 8, "q_group_size": 32}),
    "llama-q2g32": ("llama-bf16", {"quantize": True, "q_bits": 2, "q_group_size": 32}),
    "llama-q3g128": ("llama-bf16", {"quantize": True, "q_bits": 3, "q_group_size": 128}),
    "llama-q5g64": ("llama-bf16", {"quantize": True, "q_bits": 5, "q_group_size": 64}),
    "llama-q6g32": ("llama-bf16", {"quantize": True, "q_bits": 6, "q_group_size": 32}),
    "llama-default": ("llama-bf16", {"quantize": True}),
    "llama-mixed_2_6": ("llama-bf16", {"quantize": True, "quant_predicate": "mixed_2_6"}),  # group_size null
    "llama-mixed_3_4": ("llama-bf16", {"quantize": True, "q_group_size": 32, "quant_predicate": "mixed_3_4"}),
    "llama-mixed_3_6": ("llama-bf16", {"quantize": True, "q_group_size": 64, "quant_predicate": "mixed_3_6"}),
    "llama-mixed_4_6": ("llama-bf16", {"quantize": True, "q_group_size": 64, "quant_predicate": "mixed_4_6"}),
    "llama-mxfp4": ("llama-bf16", {"quantize": True, "q_mode": "mxfp4"}),
    "llama-nvfp4": ("llama-bf16", {"quantize": True, "q_mode": "nvfp4"}),
    "llama-mxfp8": ("llama-bf16", {"quantize": True, "q_mode": "mxfp8"}),
    "llama-float16": ("llama-bf16", {"dtype": "float16"}),
    "llama-float32-q4g64": ("llama-bf16", {**AFFINE_Q4, "dtype": "float32"}),
    "llama-dequantize": ("llama-q4g64", {"dequantize": True}),
    "mistral-bias-q4g64": ("mistral-yarn-bias-bf16", AFFINE_Q4),
    "qwen2-q4g64": ("qwen2-bf16", AFFINE_Q4),
    "qwen3-q4g64": ("qwen3-bf16", AFFINE_Q4),
    "gemma3-text-q4g64": ("gemma3-text-bf16", AFFINE_Q4),
    "gemma3-nested-q4g64": ("gemma3-nested-untied-bf16", AFFINE_Q4),
    "phi3-q4g64": ("phi3-bf16", AFFINE_Q4),
    "minicpm-q4g64": ("minicpm-bf16", AFFINE_Q4),
    "minicpm-mixed_3_6": ("minicpm-bf16", {"quantize": True, "q_group_size": 64, "quant_predicate": "mixed_3_6"}),
    "olmo2-q4g64": ("olmo2-bf16", AFFINE_Q4),
    "granite-q4g64": ("granite-bf16", AFFINE_Q4),
    "ministral3-q4g64": ("ministral3-bf16", AFFINE_Q4),
    "mistral3-llama-q4g64": ("mistral3-llama-bf16", AFFINE_Q4),
    "qwen3-moe-q4g64": ("qwen3-moe-bf16", AFFINE_Q4),
    "qwen3-moe-mixed_3_6": ("qwen3-moe-bf16", {"quantize": True, "q_group_size": 64, "quant_predicate": "mixed_3_6"}),
    "qwen3-moe-mxfp4": ("qwen3-moe-bf16", {"quantize": True, "q_mode": "mxfp4"}),
    "qwen3-moe-dequantize": ("qwen3-moe-q4g64", {"dequantize": True}),
    "glm4-q4g64": ("glm4-bf16", AFFINE_Q4),
    "glm4-moe-q4g64": ("glm4-moe-bf16", AFFINE_Q4),
    "glm4-moe-float32": ("glm4-moe-bf16", {"dtype": "float32"}),
    "glm4-moe-dequantize": ("glm4-moe-q4g64", {"dequantize": True}),
    # Layer 1 dense (mlp_only_layers): the dense MLP's order inside a qwen3_moe model.
    "qwen3-moe-mixed-dequantize": ("qwen3-moe-mixed-q8g32", {"dequantize": True}),
    "smollm3-dequantize": ("smollm3-q4g64", {"dequantize": True}),
    "llama-swa-q4g64": ("llama-swa-bf16", AFFINE_Q4),
    "qwen3-untied-dequantize": ("qwen3-untied-q8g32", {"dequantize": True}),
    # Partly quantized input (embedding dense, attention 8-bit): the rest quantized, each path
    # written to the config (quantize_model's fine-grained branch).
    "llama-mixed-requantize": ("llama-mixed", {"quantize": True, "q_bits": 4, "q_group_size": 64}),
    # config's torch_dtype is the cast target without --dtype.
    "llama-torch-dtype": ("llama-torch-f16", AFFINE_Q4),
    # What llama's sanitize drops: rotary_emb.inv_freq and the head of a tied model.
    "llama-sanitize": ("llama-extra-tensors", AFFINE_Q4),
    # HF layouts: per-expert tensors stacked (glm4_moe: its MTP layer dropped) as sanitize does.
    "qwen3-moe-hf-q4g64": ("qwen3-moe-hf", AFFINE_Q4),
    "glm4-moe-hf-bf16": ("glm4-moe-hf", {}),
    # Multimodal snapshots: the vision tower and vision_config dropped (mistral3: HF names).
    "mistral3-hf-q4g64": ("mistral3-hf", AFFINE_Q4),
    "gemma3-vision-q4g64": ("gemma3-vision", AFFINE_Q4),
    # No torch_dtype: text_config's dtype is the cast target.
    "gemma3-text-dtype-float32": ("gemma3-text-dtype", {}),
    # minicpm without lm_head.weight: the embedding becomes the head.
    "minicpm-headless-q4g64": ("minicpm-headless", AFFINE_Q4),
    # Qwen3.5 (nested text_config, language_model.*), Qwen3.5-MoE, Qwen3-Next: the gated-DeltaNet
    # layout's order; the MoE routers and shared-expert gates at 8 bits (quant_predicate); A_log
    # kept as it is on a dtype cast (qwen3_5's cast_predicate; qwen3_next has none).
    "qwen3_5-q4g64": ("qwen3_5-bf16", AFFINE_Q4),
    "qwen3_5-mixed_3_6": ("qwen3_5-bf16", {"quantize": True, "q_group_size": 64, "quant_predicate": "mixed_3_6"}),
    "qwen3_5-float16": ("qwen3_5-bf16", {"dtype": "float16"}),
    "qwen3_5-mxfp4": ("qwen3_5-bf16", {"quantize": True, "q_mode": "mxfp4"}),
    "qwen3_5-dequantize": ("qwen3_5-q4g64", {"dequantize": True}),
    "qwen3_5-moe-dequantize": ("qwen3_5-moe-q4g64", {"dequantize": True}),
    "qwen3_5-moe-q4g64": ("qwen3_5-moe-bf16", AFFINE_Q4),
    "qwen3_5-moe-mixed_2_6": ("qwen3_5-moe-bf16", {"quantize": True, "quant_predicate": "mixed_2_6"}),
    "qwen3_5-moe-float32": ("qwen3_5-moe-bf16", {"dtype": "float32"}),
    "qwen3-next-q4g64": ("qwen3-next-bf16", AFFINE_Q4),
    "qwen3-next-float16": ("qwen3-next-bf16", {"dtype": "float16"}),
    "qwen3-next-dequantize": ("qwen3-next-q4g64", {"dequantize": True}),
    # Their HF layouts: conv1d [C,1,K], norms stored minus one, model.language_model.* names,
    # vision and MTP tensors, qwen3_5_moe's fused experts.gate_up_proj, qwen3_next's per-expert
    # tensors; A_log float32 with text_config.dtype / torch_dtype bfloat16 as the cast target.
    "qwen3_5-hf-bf16": ("qwen3_5-hf", {}),
    "qwen3_5-hf-q4g64": ("qwen3_5-hf", AFFINE_Q4),
    "qwen3_5-moe-hf-q4g64": ("qwen3_5-moe-hf", AFFINE_Q4),
    "qwen3-next-hf-bf16": ("qwen3-next-hf", {}),
    "qwen3-next-hf-q4g64": ("qwen3-next-hf", AFFINE_Q4),
    # Gemma 4: per-layer inputs, KV-shared layers, layer_scalar; the MoE block's router (proj,
    # scale, per_expert_scale) with proj at 8 bits (quant_predicate), experts.switch_glu; no
    # cast_predicate. gemma4's ModelArgs writes vocab_size and the head counts into text_config.
    "gemma4-text-q4g64": ("gemma4-text-bf16", AFFINE_Q4),
    "gemma4-text-mixed_3_6": ("gemma4-text-bf16", {"quantize": True, "q_group_size": 64, "quant_predicate": "mixed_3_6"}),
    "gemma4-text-float16": ("gemma4-text-bf16", {"dtype": "float16"}),
    "gemma4-text-dequantize": ("gemma4-text-q4g64", {"dequantize": True}),
    "gemma4-moe-q4g64": ("gemma4-moe-untied-bf16", AFFINE_Q4),
    "gemma4-moe-mixed_2_6": ("gemma4-moe-untied-bf16", {"quantize": True, "quant_predicate": "mixed_2_6"}),
    "gemma4-moe-dequantize": ("gemma4-moe-untied-q4g64", {"dequantize": True}),
    # Their HF layouts (gemma4.py / gemma4_text.py sanitize): model.language_model.* names, the
    # vision/audio towers and embedders, rotary_emb, clipping bounds (input_max ...), the KV-shared
    # layers' k_proj/v_proj/k_norm, the experts fused as experts.gate_up_proj / down_proj.
    "gemma4-hf-bf16": ("gemma4-hf", {}),
    "gemma4-hf-q4g64": ("gemma4-hf", AFFINE_Q4),
    "gemma4-text-hf-q4g64": ("gemma4-text-hf", AFFINE_Q4),
    "gemma4-moe-hf-q4g64": ("gemma4-moe-hf", AFFINE_Q4),
}
# Written with make_shards' limit at SHARD_BYTES instead of 5 GiB (mlxcpp: max_shard_bytes).
SHARDED = {"llama-sharded-q8g32": ("llama-bf16", {"quantize": True, "q_bits": 8, "q_group_size": 32})}
SHARD_BYTES = 100_000
LOGITS = ["llama-q4g64", "llama-mixed_3_6", "qwen3-moe-q4g64", "glm4-moe-q4g64", "qwen3_5-q4g64", "qwen3_5-moe-q4g64",
          "qwen3-next-q4g64", "gemma4-text-q4g64", "gemma4-moe-q4g64", "gemma4-hf-q4g64"]


def small_shards(weights):
    """utils.make_shards with a SHARD_BYTES limit (its own takes whole gigabytes)."""
    shards, size = [], 0
    for k, v in weights.items():
        if not shards or size + v.nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][k] = v
        size += v.nbytes
    return shards


def write_tokenizer(dst, vocab_size=512):
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(dst / "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "t1", "eos_token": "t2", "unk_token": "t0"}
    (dst / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))


def torch_f16(src, dst):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**config, "torch_dtype": "float16"}, indent=4))


def extra_tensors(src, dst):
    shutil.copytree(src, dst)
    w = mx.load(str(dst / "model.safetensors"))
    w["model.layers.0.self_attn.rotary_emb.inv_freq"] = mx.arange(8, dtype=mx.float32)
    w["lm_head.weight"] = w["model.embed_tokens.weight"]
    (dst / "model.safetensors.index.json").unlink()
    mx.save_safetensors(str(dst / "model.safetensors"), w, metadata={"format": "mlx"})


def unstack_experts(src, dst, mtp_layer=None):
    """The HF layout: experts one tensor each (and glm4_moe's MTP layer: a copy of the last)."""
    shutil.copytree(src, dst)
    w = mx.load(str(dst / "model.safetensors"))
    for k in [k for k in w if ".switch_mlp." in k]:
        stacked = w.pop(k)
        for e in range(stacked.shape[0]):
            w[k.replace(".switch_mlp.", f".experts.{e}.")] = stacked[e]
    if mtp_layer is not None:
        last = f"model.layers.{mtp_layer - 1}."
        for k in [k for k in w if k.startswith(last)]:
            w[k.replace(last, f"model.layers.{mtp_layer}.")] = w[k]
    (dst / "model.safetensors.index.json").unlink()
    mx.save_safetensors(str(dst / "model.safetensors"), w, metadata={"format": "mlx"})


def rewrite(src, dst, edit_weights, edit_config=None):
    shutil.copytree(src, dst)
    w = edit_weights(mx.load(str(dst / "model.safetensors")))
    (dst / "model.safetensors.index.json").unlink()
    mx.save_safetensors(str(dst / "model.safetensors"), w, metadata={"format": "mlx"})
    if edit_config:
        config = json.loads((dst / "config.json").read_text())
        (dst / "config.json").write_text(json.dumps(edit_config(config), indent=4))


VISION = {"vision_tower.patch_conv.weight": mx.ones((4, 4), dtype=mx.bfloat16),
          "multi_modal_projector.linear_1.weight": mx.ones((4, 4), dtype=mx.bfloat16)}


def with_vision(config):
    return {**config, "vision_config": {"hidden_size": 4, "model_type": "pixtral"}}


def mistral3_hf_names(w):
    """Transformers' Mistral3ForConditionalGeneration names, plus a vision tower."""
    out = dict(VISION)
    for k, v in w.items():
        if k.startswith("language_model.model."):
            out["model.language_model." + k[len("language_model.model."):]] = v
        else:
            out[k[len("language_model."):]] = v
    return out


QWEN_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight", ".q_norm.weight",
              ".k_norm.weight")


def qwen_hf_common(w):
    """What the HF Qwen3.5 / Qwen3-Next checkpoints store: conv1d [C,1,K], the RMSNorm weights
    minus one (qwen3_5.py / qwen3_next.py sanitize add it back), A_log float32, MTP weights."""
    out = {}
    for k, v in w.items():
        if "conv1d.weight" in k:
            v = v.swapaxes(1, 2)
        elif k.endswith(QWEN_NORMS) and v.ndim == 1:
            v = v - 1.0
        elif k.endswith("A_log"):
            v = v.astype(mx.float32)
        out[k] = v
    out["mtp.fc.weight"] = mx.ones((8, 8), dtype=mx.bfloat16)
    out["mtp.layers.0.input_layernorm.weight"] = mx.ones((8,), dtype=mx.bfloat16)
    return out


def fuse_experts(w, stacked, fused):
    """The HF layout's fused experts, in place: <base>.<stacked>.{gate,up}_proj.weight become
    <base>.<fused>gate_up_proj [E, 2I, H] (gate rows first), down_proj.weight <base>.<fused>down_proj."""
    for k in [k for k in w if k.endswith(f".{stacked}.gate_proj.weight")]:
        base = k[: -len(f".{stacked}.gate_proj.weight")]
        gate, up = w.pop(k), w.pop(f"{base}.{stacked}.up_proj.weight")
        w[f"{base}.{fused}gate_up_proj"] = mx.concatenate([gate, up], axis=-2)
        w[f"{base}.{fused}down_proj"] = w.pop(f"{base}.{stacked}.down_proj.weight")


def qwen3_5_hf_names(w):
    """Transformers' Qwen3_5ForConditionalGeneration names plus a vision tower; qwen3_5_moe's
    experts fused as experts.gate_up_proj [E, 2I, H] and experts.down_proj."""
    out = {"model.visual.patch_embed.proj.weight": mx.ones((4, 4), dtype=mx.bfloat16)}
    for k, v in qwen_hf_common(w).items():
        if k.startswith("language_model.model."):
            k = "model.language_model." + k[len("language_model.model."):]
        elif k.startswith("language_model."):
            k = k[len("language_model."):]
        out[k] = v
    fuse_experts(out, "switch_mlp", "experts.")
    return out


def qwen3_5_hf_config(c):
    text = c.get("text_config", c)
    text = {**text, "dtype": "bfloat16"}
    base = c if "text_config" in c else {"model_type": c["model_type"]}
    return {**base, "text_config": text, "vision_config": {"model_type": "qwen3_5", "depth": 1}}


def qwen3_next_hf(w):
    out = {}
    for k, v in qwen_hf_common(w).items():
        if ".switch_mlp." in k:
            for e in range(v.shape[0]):
                out[k.replace(".switch_mlp.", f".experts.{e}.")] = v[e]
        else:
            out[k] = v
    return out


def gemma4_hf_text(w, config):
    """What an HF Gemma 4 text model stores beyond mlx-lm's names: rotary_emb, a clipping bound,
    and k_proj / v_proj / k_norm in the KV-shared layers (mlx-lm drops them); experts fused."""
    text = config.get("text_config", config)
    n, shared = text["num_hidden_layers"], text.get("num_kv_shared_layers", 0)
    prefix = "language_model.model." if "text_config" in config else "model."
    out = dict(w)
    hidden = text["hidden_size"]
    for i in range(n - shared, n):
        full = text["layer_types"][i] == "full_attention"
        hd = text["global_head_dim"] if full else text["head_dim"]
        rows = text["num_key_value_heads"] * hd
        attn = f"{prefix}layers.{i}.self_attn."
        out[attn + "k_proj.weight"] = mx.ones((rows, hidden), dtype=mx.bfloat16)
        out[attn + "v_proj.weight"] = mx.ones((rows, hidden), dtype=mx.bfloat16)
        out[attn + "k_norm.weight"] = mx.ones((hd,), dtype=mx.bfloat16)
    out[prefix + "layers.0.self_attn.rotary_emb.inv_freq"] = mx.arange(8, dtype=mx.float32)
    out[prefix + "layers.1.self_attn.o_proj.input_max"] = mx.array(4.0, dtype=mx.bfloat16)
    fuse_experts(out, "switch_glu", "")
    return out


GEMMA4_TOWERS = {"model.vision_tower.encoder.layers.0.mlp.down_proj.input_max": mx.array(4.0, dtype=mx.bfloat16),
                 "model.vision_tower.patch_embedder.weight": mx.ones((4, 4), dtype=mx.bfloat16),
                 "model.embed_vision.embedding_projection.weight": mx.ones((4, 4), dtype=mx.bfloat16),
                 "model.audio_tower.conv.weight": mx.ones((4, 4), dtype=mx.bfloat16),
                 "model.embed_audio.embedding_projection.weight": mx.ones((4, 4), dtype=mx.bfloat16)}


def gemma4_hf(src, dst, nested_from_flat):
    """Gemma4ForConditionalGeneration's layout: model.language_model.* plus the towers; from the
    flat tiny text model, its config nested under text_config as the real checkpoints are."""
    config = json.loads((src / "config.json").read_text())
    if nested_from_flat:
        text = {k: v for k, v in config.items() if k != "vocab_size"}
        config = {"model_type": "gemma4", "vocab_size": config["vocab_size"], "text_config": text}
    w = mx.load(str(src / "model.safetensors"))
    if nested_from_flat:
        w = {"language_model." + k: v for k, v in w.items()}
    w = gemma4_hf_text(w, config)
    out = dict(GEMMA4_TOWERS)
    for k, v in w.items():
        out["model.language_model." + k[len("language_model.model."):] if k.startswith("language_model.model.") else k] = v
    config = {**config, "torch_dtype": "bfloat16", "vision_config": {"model_type": "gemma4_vision", "hidden_size": 4},
              "audio_config": {"model_type": "gemma4_audio", "hidden_size": 4}}
    shutil.copytree(src, dst)
    (dst / "model.safetensors.index.json").unlink()
    mx.save_safetensors(str(dst / "model.safetensors"), out, metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps(config, indent=4))


def dequantized(src, dst):
    from mlx_lm.convert import convert

    with redirect_stdout(StringIO()):
        convert(str(src), str(dst), dequantize=True)


# Inputs made from another input, in order (one may be made from an earlier one): name -> (source, how).
DERIVED = {
    "llama-torch-f16": ("llama-bf16", torch_f16),
    "llama-extra-tensors": ("llama-bf16", extra_tensors),
    "qwen3-moe-hf": ("qwen3-moe-bf16", unstack_experts),
    "glm4-moe-hf": ("glm4-moe-bf16", lambda src, dst: unstack_experts(src, dst, mtp_layer=3)),
    "mistral3-hf": ("mistral3-llama-bf16", lambda src, dst: rewrite(src, dst, mistral3_hf_names, with_vision)),
    "gemma3-vision": ("gemma3-nested-untied-bf16", lambda src, dst: rewrite(src, dst, lambda w: {**w, **VISION}, with_vision)),
    "gemma3-text-dtype": ("gemma3-nested-untied-bf16", lambda src, dst: rewrite(
        src, dst, lambda w: w, lambda c: {**c, "text_config": {**c["text_config"], "dtype": "float32"}})),
    "minicpm-headless": ("minicpm-bf16", lambda src, dst: rewrite(src, dst, lambda w: {k: v for k, v in w.items() if k != "lm_head.weight"})),
    # No bf16 Qwen3.5-MoE among the tiny models: mlx_lm.convert's dequantization of the q4g64 one.
    "qwen3_5-moe-bf16": ("qwen3_5-moe-q4g64", dequantized),
    "qwen3_5-hf": ("qwen3_5-bf16", lambda src, dst: rewrite(src, dst, qwen3_5_hf_names, qwen3_5_hf_config)),
    "qwen3_5-moe-hf": ("qwen3_5-moe-bf16", lambda src, dst: rewrite(src, dst, qwen3_5_hf_names, qwen3_5_hf_config)),
    "qwen3-next-hf": ("qwen3-next-bf16", lambda src, dst: rewrite(src, dst, qwen3_next_hf, lambda c: {**c, "torch_dtype": "bfloat16"})),
    "gemma4-hf": ("gemma4-text-bf16", lambda src, dst: gemma4_hf(src, dst, nested_from_flat=True)),
    "gemma4-moe-hf": ("gemma4-moe-untied-bf16", lambda src, dst: gemma4_hf(src, dst, nested_from_flat=False)),
    # The flat gemma4_text layout (model.layers.*) with what its sanitize drops.
    "gemma4-text-hf": ("gemma4-text-bf16", lambda src, dst: rewrite(
        src, dst, lambda w: gemma4_hf_text(w, json.loads((src / "config.json").read_text())))),
}


def main(golden):
    from mlx_lm.convert import convert

    golden = Path(golden)
    root = golden / "convert"
    shutil.rmtree(root, ignore_errors=True)
    (root / "out").mkdir(parents=True)
    def base(m):
        return base(DERIVED[m][0]) if m in DERIVED else m

    for model in sorted({base(m) for m, _ in CASES.values()} | {base(m) for m in DERIVED}):
        dst = root / "in" / model
        shutil.copytree(golden / "models" / model, dst)
        write_tokenizer(dst)
    for model, (src, make) in DERIVED.items():
        make(root / "in" / src, root / "in" / model)
    for case, (model, args) in CASES.items():
        with redirect_stdout(StringIO()):
            convert(str(root / "in" / model), str(root / "out" / case), **args)
    import mlx_lm.utils as utils

    make_shards = utils.make_shards
    utils.make_shards = small_shards
    try:
        for case, (model, args) in SHARDED.items():
            with redirect_stdout(StringIO()):
                convert(str(root / "in" / model), str(root / "out" / case), **args)
    finally:
        utils.make_shards = make_shards
    for case in LOGITS:
        mx.save_safetensors(str(root / f"{case}.logits.safetensors"), record(root / "out" / case))
    cases = {case: {"model": model, "args": args} for case, (model, args) in CASES.items()}
    cases.update({case: {"model": model, "args": args, "max_shard_bytes": SHARD_BYTES}
                  for case, (model, args) in SHARDED.items()})
    (root / "cases.json").write_text(json.dumps(cases, indent=2))


if __name__ == "__main__":
    main(sys.argv[1])
