// The llama descriptor's config (LlamaArgs) and the parts of it that only phi3 and minicpm
// read: their config fields, phi3's fused projections split at load, minicpm's untied head.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "artifacts/weight_map.h"
#include "core/json_file.h"
#include "nn/rope.h"

namespace mlxcpp {

struct LlamaArgs {
  std::string model_type;
  int hidden = 0, layers = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  float eps = 1e-6f;
  bool qkv_bias = false, o_bias = false, mlp_bias = false, tie = true;
  bool qk_norm = false;    // qwen3
  bool qk_norm_full = false;  // olmo2: q/k RMSNorm over the whole projection (before the head reshape)
  bool sandwich = false;      // olmo2: no input norm; post_attention/post_feedforward norms on the branches
  bool fused_qkv = false;  // phi3: qkv_proj and gate_up_proj in the checkpoint
  // minicpm: embeddings * embed_scale, residual branches * residual_scale, the untied head's
  // input / logit_divisor (1: none).
  double embed_scale = 1.0, residual_scale = 1.0, logit_divisor = 1.0;
  // granite: the attention scale (attention_multiplier) and the logits / logits_scaling (after
  // the head; minicpm divides the head's input instead).
  std::optional<double> attn_scale;
  double logits_scaling = 1.0;
  // ministral3: queries * (1 + beta * log(1 + floor(position / original_max))) after RoPE.
  std::optional<double> llama4_beta;
  int llama4_original_max = 0;
  RopeParams rope;
  std::optional<JsonView> rope_scaling;
  std::vector<bool> sliding;   // per layer
  std::vector<bool> use_rope;  // per layer (smollm3 NoPE)
  std::optional<int> sliding_window;

  static LlamaArgs parse(const JsonView& c);
};

// phi3.py: rope_theta, rope_traditional, partial_rotary_factor, max_position_embeddings,
// original_max_position_embeddings, rope_scaling (su/longrope/linear; others dropped).
void parse_phi3(const JsonView& c, LlamaArgs& a);
// minicpm.py: scale_emb, scale_depth, dim_model_base, rope_theta (1e6), rope_scaling.
void parse_minicpm(const JsonView& c, LlamaArgs& a);
// granite.py: embedding_multiplier, attention_multiplier, residual_multiplier, logits_scaling.
void parse_granite(const JsonView& c, LlamaArgs& a);
// ministral3.py: rope_parameters (rope_theta, the scaling, llama_4_scaling_beta,
// original_max_position_embeddings) required.
void parse_ministral3(const JsonView& c, LlamaArgs& a);
// mistral3.py's sanitize for the text model: language_model.* (and an HF checkpoint's
// model.language_model.*) to the llama names, the vision tower and projector dropped.
void mistral3_text_weights(WeightMap& w);

// phi3: each layer's qkv_proj rows -> q_proj, k_proj, v_proj and gate_up_proj -> gate_proj,
// up_proj (weight, scales, biases alike: rows are independent), so the layers load as llama's.
void split_fused_projections(WeightMap& w, const LlamaArgs& a);
// minicpm.py's sanitize: a checkpoint without lm_head.weight uses the embedding's (always
// untied: a tied minicpm is a ConfigError, as mlx-lm cannot load one).
void minicpm_default_head(WeightMap& w, const LlamaArgs& a);

}  // namespace mlxcpp
