"""Builds tiny deterministic MLX checkpoints with mlx-lm's own model classes.

Usage: python tools/oracle/tiny_models.py OUTDIR [NAME...]   -> OUTDIR/models/<name>/ (NAMEs: only those)
Each snapshot is what mlx-lm itself would save (config.json + safetensors + index).
"""
import copy
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from mlx_lm.models import (gemma3, gemma3_text, gemma4, gemma4_text, glm4, glm4_moe, granite, llama, minicpm,
                            ministral3, mistral3, olmo2, phi3, qwen2, qwen3, qwen3_5, qwen3_5_moe, qwen3_moe,
                            qwen3_next, smollm3)
from mlx_lm.utils import quantize_model, save_config, save_model

from fixtures import fixture_dir

BASE = {
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
}

LLAMA = {**BASE, "model_type": "llama", "rope_theta": 10000.0, "tie_word_embeddings": True}
QWEN2 = {**BASE, "model_type": "qwen2", "rope_theta": 1000000.0, "tie_word_embeddings": True}
# head_dim * heads != hidden on purpose (Qwen3-0.6B: 16 x 128 over 1024); untied like Qwen3-8B.
QWEN3 = {**BASE, "model_type": "qwen3", "head_dim": 48, "rope_theta": 1000000.0, "tie_word_embeddings": True}
QWEN3_UNTIED = {**QWEN3, "tie_word_embeddings": False}
# phi3.py: untied by default, fused qkv_proj / gate_up_proj. The longrope one as Phi-4-mini lays
# it out (partial_rotary_factor 0.75: 24 of 32 head dims rotated, 12 factors); max / original
# = 32 > 1 so the sqrt(1 + log 32 / log 64) input scale applies (mlx-lm always uses long_factor).
PHI3 = {**BASE, "model_type": "phi3", "rope_theta": 10000.0}
# minicpm.py: untied (its tied head cannot load in mlx-lm), 3 layers so the residual scale
# scale_depth / sqrt(3) is no round number, hidden / dim_model_base = 8/3 for the logits.
MINICPM = {
    **BASE,
    "model_type": "minicpm",
    "num_hidden_layers": 3,
    "rope_theta": 10000.0,
    "scale_emb": 12.0,
    "scale_depth": 1.4,
    "dim_model_base": 48,
    "tie_word_embeddings": False,
}
# MiniCPM4's layout: rope_type longrope through initialize_rope (original length in rope_scaling).
MINICPM_LONGROPE = {
    **MINICPM,
    "rope_scaling": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.02 * i for i in range(16)],
        "long_factor": [1.0 + 0.5 * i for i in range(16)],
        "original_max_position_embeddings": 64,
    },
}
# olmo2.py: q/k norms over the whole projection, post-attention/post-feedforward norms on the
# branches (no input norms); untied as OLMo-2's checkpoints.
OLMO2 = {**BASE, "model_type": "olmo2", "rope_theta": 500000.0, "tie_word_embeddings": False}
# granite.py: scaled embeddings and residuals, attention_multiplier as the attention scale
# (not head_dim ** -0.5), logits / logits_scaling; tied as Granite 3's small checkpoints.
GRANITE = {
    **BASE,
    "model_type": "granite",
    "rope_theta": 10000.0,
    "attention_bias": False,
    "mlp_bias": False,
    "embedding_multiplier": 12.0,
    "attention_multiplier": 0.0625,
    "residual_multiplier": 0.22,
    "logits_scaling": 3.0,
    "tie_word_embeddings": True,
}
# ministral3.py: rope_parameters carry rope_theta, yarn and the llama-4 attention temperature
# (queries * (1 + 0.1 * log(1 + floor(pos / 8))): original length 8 so the 20-36-token goldens
# cross several steps of it).
MINISTRAL3 = {
    **BASE,
    "model_type": "ministral3",
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 1000000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 8,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "llama_4_scaling_beta": 0.1,
    },
    "tie_word_embeddings": True,
}
# mistral3.py: the text model nested under text_config (weights under language_model.),
# untied by default; ministral3's text model as Ministral 3, llama's as Mistral Small 3.1.
MISTRAL3 = {"model_type": "mistral3", "text_config": {k: v for k, v in MINISTRAL3.items() if k != "tie_word_embeddings"}}
MISTRAL3_LLAMA = {"model_type": "mistral3", "text_config": {**BASE, "model_type": "mistral", "rope_theta": 1000000000.0}}
# qwen3_moe.py: qwen3's attention, a softmax router over 8 experts, top 4 (a 20-token prefill
# routes 80 pairs: mlx-lm's sorted gather path; 7-token chunks and decode steps: unsorted). The
# router quantizes at 8 bits (its quant_predicate). The second one: layer 1 dense
# (mlp_only_layers), router probabilities not renormalized, untied.
QWEN3_MOE = {
    **BASE,
    "model_type": "qwen3_moe",
    "head_dim": 48,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
    "num_experts": 8,
    "num_experts_per_tok": 4,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "moe_intermediate_size": 64,
    "norm_topk_prob": True,
}
QWEN3_MOE_MIXED = {**QWEN3_MOE, "num_hidden_layers": 3, "mlp_only_layers": [1], "norm_topk_prob": False,
                   "tie_word_embeddings": False}
# glm4.py: q/k/v biases, fused gate_up_proj, a norm after each branch besides the input norms,
# traditional RoPE over half of each head; always untied.
GLM4 = {**BASE, "model_type": "glm4", "attention_bias": True, "head_dim": 32, "partial_rotary_factor": 0.5,
        "rope_theta": 10000.0}
# glm4_moe.py: layer 0 dense (first_k_dense_replace), then a sigmoid router with its correction
# bias over 16 experts in 4 groups (the best 2 groups kept), top 4, scaled by 2.5, plus a shared
# expert; q/k norms, non-traditional RoPE over half of each head; 3 layers (the checkpoint's
# MTP layer, model.layers.3, is dropped by sanitize).
GLM4_MOE = {
    **BASE,
    "model_type": "glm4_moe",
    "num_hidden_layers": 3,
    "head_dim": 32,
    "attention_bias": True,
    "partial_rotary_factor": 0.5,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "use_qk_norm": True,
    "tie_word_embeddings": False,
    "moe_intermediate_size": 64,
    "n_routed_experts": 16,
    "n_shared_experts": 1,
    "num_experts_per_tok": 4,
    "n_group": 4,
    "topk_group": 2,
    "routed_scaling_factor": 2.5,
    "first_k_dense_replace": 1,
    "norm_topk_prob": True,
}
PHI3_LONGROPE = {
    **PHI3,
    "partial_rotary_factor": 0.75,
    "original_max_position_embeddings": 64,
    "rope_scaling": {
        "type": "longrope",
        "short_factor": [1.0 + 0.05 * i for i in range(12)],
        "long_factor": [1.0 + 0.75 * i for i in range(12)],
    },
}
LLAMA3 = {
    **LLAMA,
    "tie_word_embeddings": False,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
}
LLAMA_SWA = {
    **LLAMA,
    "num_hidden_layers": 3,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "sliding_window": 8,
}

MISTRAL_YARN = {
    **LLAMA,
    "model_type": "mistral",
    "head_dim": 48,
    "attention_bias": True,
    "mlp_bias": True,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
}
LLAMA_LINEAR = {**LLAMA, "tie_word_embeddings": False, "rope_scaling": {"type": "linear", "factor": 2.0}}
LLAMA_DYNAMIC = {**LLAMA, "max_position_embeddings": 16, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
SMOLLM3 = {**LLAMA, "model_type": "smollm3", "num_hidden_layers": 4, "no_rope_layer_interval": 2}
# 7 layers with pattern 3: sliding layers 0,1,3,4,6 and global 2,5; a window of 8 wraps the
# rotating caches within the goldens' 20 + 16 tokens. head_dim * heads != hidden on purpose.
GEMMA3_TEXT = {
    **BASE,
    "model_type": "gemma3_text",
    "num_hidden_layers": 7,
    "head_dim": 48,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "query_pre_attn_scalar": 32,
    "sliding_window": 8,
    "sliding_window_pattern": 3,
}
# The multimodal layout (weights under language_model.) with a linear-scaled global rope, untied.
GEMMA3_NESTED = {
    "model_type": "gemma3",
    "vocab_size": 512,
    "text_config": {
        **{k: v for k, v in GEMMA3_TEXT.items() if k != "vocab_size"},
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    },
}
# gemma4_text.py: 6 layers, the last 2 KV-shared (layer 4 reads sliding layer 3's keys, layer 5
# full layer 2's; their MLPs double wide), per-layer input embeddings (6 x 32 per token), head_dim
# 32 on sliding layers (window 8, default RoPE) and 64 on full ones (proportional RoPE over a
# quarter of each head), q/k/v norms, attention scale 1, logits softcapped at 30; tied.
GEMMA4_TEXT = {
    **BASE,
    "model_type": "gemma4_text",
    "num_hidden_layers": 6,
    "head_dim": 32,
    "global_head_dim": 64,
    "rms_norm_eps": 1e-6,
    "hidden_size_per_layer_input": 32,
    "vocab_size_per_layer_input": 512,
    "num_kv_shared_layers": 2,
    "sliding_window": 8,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
                    "sliding_attention", "full_attention"],
    "rope_parameters": {
        "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
        "sliding_attention": {"partial_rotary_factor": 1.0, "rope_theta": 10000.0, "rope_type": "default"},
    },
    "final_logit_softcapping": 30.0,
    "tie_word_embeddings": True,
}
# The multimodal layout (weights under language_model.) of the 26B: no KV sharing nor per-layer
# inputs; full layers take values = keys (attention_k_eq_v) with 1 KV head; each layer's dense
# MLP runs beside a mixture of 8 experts, top 4 (the router at 8 bits, its quant_predicate); untied.
GEMMA4_MOE = {
    "model_type": "gemma4",
    "vocab_size": 512,
    "text_config": {
        **{k: v for k, v in GEMMA4_TEXT.items() if k != "vocab_size"},
        "num_kv_shared_layers": 0,
        "hidden_size_per_layer_input": 0,
        "attention_k_eq_v": True,
        "num_global_key_value_heads": 1,
        "enable_moe_block": True,
        "num_experts": 8,
        "top_k_experts": 4,
        "moe_intermediate_size": 64,
        "tie_word_embeddings": False,
    },
}

# Qwen3.5: gated-DeltaNet layers 0, 2, 4 and gated full attention 1, 3, 5 (interval 2); 4 value heads
# over 2 key heads; half of each attention head rotated. The nested (text_config) layout
# real checkpoints use; the MoE variant flat, with a gated shared expert.
QWEN3_5_TEXT = {
    "model_type": "qwen3_5_text",
    "hidden_size": 128,
    "num_hidden_layers": 6,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "rms_norm_eps": 1e-6,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "linear_num_value_heads": 4,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 32,
    "linear_value_head_dim": 32,
    "linear_conv_kernel_dim": 4,
    "full_attention_interval": 2,
    "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.5,
                        "mrope_section": [4, 2, 2]},
}
QWEN3_5 = {"model_type": "qwen3_5", "text_config": QWEN3_5_TEXT}
QWEN3_5_MOE = {
    **QWEN3_5_TEXT,
    "model_type": "qwen3_5_moe",
    "tie_word_embeddings": True,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 128,
}
# Qwen3-Next: the fused qkvz / ba projections, a dense first layer (mlp_only_layers), softmax router
# without renormalization.
QWEN3_NEXT = {
    **{k: v for k, v in QWEN3_5_TEXT.items() if k != "rope_parameters"},
    "model_type": "qwen3_next",
    "num_hidden_layers": 4,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.25,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [0],
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
    "norm_topk_prob": False,
}

# Qwen3.5 at the real Qwen3 vocabulary with its tokenizer and chat template (npm fixture): what
# `mlxcpp chat` / `serve` run in tests/e2e/test_qwen3_5.py. Random weights: the text is noise.
QWEN3_5_CHAT = {**QWEN3_5_TEXT, "model_type": "qwen3_5", "hidden_size": 64, "head_dim": 16, "intermediate_size": 128,
                "linear_key_head_dim": 16, "linear_value_head_dim": 16, "vocab_size": 151936,
                "tie_word_embeddings": True}
# Gemma 4 at the real Gemma 3 vocabulary (262144; Gemma 4 keeps its size and ids) with the
# E2B layout: nested text_config, per-layer inputs over the whole vocabulary (4 layers x 16),
# sliding (window 16) and full layers, the last full layer KV-shared. No Gemma 4 tokenizer is
# available here: it gets Gemma 3's tokenizer and chat template.
GEMMA4_CHAT = {
    "model_type": "gemma4",
    "vocab_size": 262144,
    "text_config": {
        **{k: v for k, v in GEMMA4_TEXT.items() if k != "vocab_size"},
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "hidden_size_per_layer_input": 16,
        "vocab_size_per_layer_input": 262144,
        "num_kv_shared_layers": 1,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    },
}
# Snapshots that get a fixture's tokenizer.json and tokenizer_config.json.
TOKENIZERS = {"qwen3_5-chat-q4g64": "qwen3", "gemma4-chat-q4g64": "gemma3"}

# name -> (config, quantization: None | (bits, group_size[, mode]) | "mixed")
SPECS = {
    "llama-bf16": (LLAMA, None),
    "llama-q4g64": (LLAMA, (4, 64)),
    "llama-q8g32": (LLAMA, (8, 32)),
    "llama3rope-untied-q4g64": (LLAMA3, (4, 64)),
    "llama-swa-bf16": (LLAMA_SWA, None),
    "llama-mixed": (LLAMA, "mixed"),
    "llama-q2g32": (LLAMA, (2, 32)),
    "llama-q3g128": (LLAMA, (3, 128)),
    "llama-q5g64": (LLAMA, (5, 64)),
    "llama-q6g32": (LLAMA, (6, 32)),
    "llama-mxfp4": (LLAMA, (4, 32, "mxfp4")),
    "llama-nvfp4": (LLAMA, (4, 16, "nvfp4")),
    "llama-mxfp8": (LLAMA, (8, 32, "mxfp8")),
    "mistral-yarn-bias-bf16": (MISTRAL_YARN, None),
    "llama-linear-untied-bf16": (LLAMA_LINEAR, None),
    "llama-dynamic-bf16": (LLAMA_DYNAMIC, None),
    "smollm3-q4g64": (SMOLLM3, (4, 64)),
    "qwen2-bf16": (QWEN2, None),
    "qwen2-q4g64": (QWEN2, (4, 64)),
    "qwen2-q8g32": (QWEN2, (8, 32)),
    "gemma3-text-bf16": (GEMMA3_TEXT, None),
    "gemma3-text-q4g64": (GEMMA3_TEXT, (4, 64)),
    "gemma3-nested-untied-bf16": (GEMMA3_NESTED, None),
    # New entries go last: each checkpoint's seed is 1234 + its position here.
    "qwen3-bf16": (QWEN3, None),
    "qwen3-q4g64": (QWEN3, (4, 64)),
    "qwen3-untied-q8g32": (QWEN3_UNTIED, (8, 32)),
    "phi3-bf16": (PHI3, None),
    "phi3-q4g64": (PHI3, (4, 64)),
    "phi3-longrope-bf16": (PHI3_LONGROPE, None),
    "phi3-longrope-q4g64": (PHI3_LONGROPE, (4, 64)),
    "minicpm-bf16": (MINICPM, None),
    "minicpm-q4g64": (MINICPM, (4, 64)),
    "minicpm-longrope-q8g32": (MINICPM_LONGROPE, (8, 32)),
    "olmo2-bf16": (OLMO2, None),
    "olmo2-q4g64": (OLMO2, (4, 64)),
    "granite-bf16": (GRANITE, None),
    "granite-q4g64": (GRANITE, (4, 64)),
    "ministral3-bf16": (MINISTRAL3, None),
    "mistral3-q4g64": (MISTRAL3, (4, 64)),
    "mistral3-llama-bf16": (MISTRAL3_LLAMA, None),
    "qwen3-moe-bf16": (QWEN3_MOE, None),
    "qwen3-moe-q4g64": (QWEN3_MOE, (4, 64)),
    "qwen3-moe-mixed-q8g32": (QWEN3_MOE_MIXED, (8, 32)),
    "glm4-bf16": (GLM4, None),
    "glm4-q4g64": (GLM4, (4, 64)),
    "glm4-moe-bf16": (GLM4_MOE, None),
    "glm4-moe-q4g64": (GLM4_MOE, (4, 64)),
    "qwen3_5-bf16": (QWEN3_5, None),
    "qwen3_5-q4g64": (QWEN3_5, (4, 64)),
    "qwen3_5-moe-q4g64": (QWEN3_5_MOE, (4, 64)),
    "qwen3-next-bf16": (QWEN3_NEXT, None),
    "qwen3-next-q4g64": (QWEN3_NEXT, (4, 64)),
    "qwen3_5-chat-q4g64": (QWEN3_5_CHAT, (4, 64)),
    "gemma4-text-bf16": (GEMMA4_TEXT, None),
    "gemma4-text-q4g64": (GEMMA4_TEXT, (4, 64)),
    "gemma4-moe-untied-bf16": (GEMMA4_MOE, None),
    "gemma4-moe-untied-q4g64": (GEMMA4_MOE, (4, 64)),
    "gemma4-chat-q4g64": (GEMMA4_CHAT, (4, 64)),
}

MODULES = {
    "llama": llama,
    "mistral": llama,
    "qwen2": qwen2,
    "qwen3": qwen3,
    "qwen3_moe": qwen3_moe,
    "glm4": glm4,
    "glm4_moe": glm4_moe,
    "phi3": phi3,
    "minicpm": minicpm,
    "olmo2": olmo2,
    "granite": granite,
    "ministral3": ministral3,
    "mistral3": mistral3,
    "smollm3": smollm3,
    "qwen3_5": qwen3_5,
    "qwen3_5_moe": qwen3_5_moe,
    "qwen3_next": qwen3_next,
    "gemma3_text": gemma3_text,
    "gemma3": gemma3,
    "gemma4_text": gemma4_text,
    "gemma4": gemma4,
}


def perturb_norms(model):
    """Norm weights init to ones (all equal): perturb them so each norm is exercised."""
    norms = [(k, v + 0.2 * mx.random.normal(v.shape)) for k, v in tree_flatten(model.parameters()) if k.endswith("norm.weight")]
    model.load_weights(norms, strict=False)


def perturb_router(model):
    """glm4_moe's MoEGate starts at zeros (weight and correction bias): every expert would tie."""
    params = [(k, 0.1 * mx.random.normal(v.shape)) for k, v in tree_flatten(model.parameters())
              if k.endswith("mlp.gate.weight") or k.endswith("e_score_correction_bias")]
    model.load_weights(params, strict=False)


def perturb_gemma4_scales(model):
    """gemma4's layer_scalar and the router's scales start at ones: draw them in [0.5, 1.5)."""
    params = [(k, mx.random.uniform(0.5, 1.5, v.shape)) for k, v in tree_flatten(model.parameters())
              if k.endswith(("layer_scalar", "router.scale", "router.per_expert_scale"))]
    model.load_weights(params, strict=False)


def gemma_setup(model, tie):
    """Perturbed norms, and the head tied as sanitize() does when a checkpoint has no lm_head.weight."""
    perturb_norms(model)
    if tie:
        lm = model.language_model if hasattr(model, "language_model") else model
        lm.pop("lm_head")
        lm.tie_word_embeddings = True


def build(name, config, quant, seed):
    mx.random.seed(seed)
    mod = MODULES[config["model_type"]]
    model = mod.Model(mod.ModelArgs.from_dict(copy.deepcopy(config)))
    if config["model_type"].startswith("gemma3"):
        gemma_setup(model, tie="untied" not in name)
    if config["model_type"] in ("qwen3", "phi3", "minicpm", "olmo2", "granite", "ministral3", "mistral3", "qwen3_moe",
                                "glm4", "glm4_moe", "qwen3_5", "qwen3_5_moe", "qwen3_next"):
        perturb_norms(model)  # the q/k norms above all
    if config["model_type"] == "glm4_moe":
        perturb_router(model)
    if config["model_type"].startswith("gemma4"):
        perturb_norms(model)
        perturb_gemma4_scales(model)
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    config = copy.deepcopy(config)
    if quant == "mixed":
        # Per-path overrides: 8-bit g32 attention, embedding left unquantized, the rest 4-bit g64.
        def predicate(path, module):
            if "embed_tokens" in path:
                return False
            if "self_attn" in path:
                return {"group_size": 32, "bits": 8}
            return True

        model, config = quantize_model(model, config, 64, 4, quant_predicate=predicate)
    elif quant is not None:
        bits, group, mode = (*quant, "affine")[:3]
        model, config = quantize_model(model, config, group, bits, mode=mode)
    return model, config


def main(out, only=None):
    root = Path(out) / "models"
    for i, (name, (config, quant)) in enumerate(SPECS.items()):
        if only and name not in only:
            continue
        model, cfg = build(name, config, quant, seed=1234 + i)
        path = root / name
        save_model(path, model)
        save_config(cfg, config_path=path / "config.json")
        if name in TOKENIZERS:
            src = Path(fixture_dir(TOKENIZERS[name]))
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copyfile(src / f, path / f)
            continue  # its eos comes from the tokenizer config
        with open(path / "generation_config.json", "w") as f:
            json.dump({"eos_token_id": [2, 3]}, f)
    # A sharded copy of llama-q4g64: two files and the index, as large snapshots come.
    if not only or "llama-q4g64-sharded" in only:
        shard_copy(root / "llama-q4g64", root / "llama-q4g64-sharded")


def shard_copy(src, dst):
    dst.mkdir(parents=True, exist_ok=True)
    weights = mx.load(str(src / "model.safetensors"))
    names = sorted(weights)
    halves = [names[: len(names) // 2], names[len(names) // 2 :]]
    index = {"metadata": {}, "weight_map": {}}
    for i, part in enumerate(halves):
        fname = f"model-{i + 1:05d}-of-00002.safetensors"
        mx.save_safetensors(str(dst / fname), {k: weights[k] for k in part}, metadata={"format": "mlx"})
        for k in part:
            index["weight_map"][k] = fname
    with open(dst / "model.safetensors.index.json", "w") as f:
        json.dump(index, f, indent=2)
    for extra in ["config.json", "generation_config.json"]:
        (dst / extra).write_text((src / extra).read_text())


if __name__ == "__main__":
    main(sys.argv[1], only=set(sys.argv[2:]))  # names after the folder: only those snapshots
