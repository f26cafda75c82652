// The llama descriptor's config (LlamaArgs) and the parts of it that only phi3 and minicpm
// read: their config fields, phi3's fused projections split at load, minicpm's untied head.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "artifacts/weight_map.h"
#include "core/json_file.h"
#include "nn/moe.h"
#include "nn/rope.h"

namespace mlxcpp {

struct LlamaArgs {
  std::string model_type;
  int hidden = 0, layers = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  float eps = 1e-6f;
  bool qkv_bias = false, o_bias = false, mlp_bias = false, tie = true;
  bool qk_norm = false;    // qwen3
  bool qk_norm_full = false;  // olmo2: q/k RMSNorm over the whole projection (before the head reshape)
  // Each layer's norms by name: before the attention and MLP branches, and of their outputs
  // (before the residual add); empty = none. olmo2 has only output norms, glm4 both.
  struct Norms {
    std::string attn_in = "input_layernorm", mlp_in = "post_attention_layernorm", attn_out, mlp_out;
  } norms;
  bool fused_qkv = false;      // phi3: qkv_proj and gate_up_proj in the checkpoint
  bool fused_gate_up = false;  // phi3, glm4: gate_up_proj in the checkpoint
  // qwen3_moe, glm4_moe: the sparse MLP's config and which layers have it (the others dense).
  std::optional<MoeArgs> moe;
  std::vector<bool> moe_layers;
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
// qwen3_moe.py: num_experts, num_experts_per_tok, decoder_sparse_step, mlp_only_layers,
// moe_intermediate_size, norm_topk_prob (plain RoPE: rope_scaling unread).
void parse_qwen3_moe(const JsonView& c, LlamaArgs& a);
// glm4.py: attention_bias, partial_rotary_factor, rope_theta, rope_traditional (default true);
// glm4_moe.py: the same (RoPE never traditional) plus use_qk_norm and the MoE's fields
// (n_routed_experts, num_experts_per_tok, n_group, topk_group, routed_scaling_factor,
// n_shared_experts, first_k_dense_replace, norm_topk_prob, moe_intermediate_size).
void parse_glm4(const JsonView& c, LlamaArgs& a);
// The sanitize of qwen3_moe.py / glm4_moe.py: per-expert tensors (mlp.experts.E.gate_proj.weight,
// .scales, .biases, ...) stacked into mlp.switch_mlp.*; glm4_moe's multi-token-prediction layer
// (model.layers.<num_hidden_layers>) dropped.
void stack_experts(WeightMap& w, const LlamaArgs& a);

// mistral3.py's sanitize for the text model: language_model.* (and an HF checkpoint's
// model.language_model.*) to the llama names, the vision tower and projector dropped.
void mistral3_text_weights(WeightMap& w);

// phi3: each layer's qkv_proj rows -> q_proj, k_proj, v_proj, and (phi3, glm4) gate_up_proj ->
// gate_proj, up_proj (weight, scales, biases alike: rows are independent), so the layers load
// as llama's.
void split_fused_projections(WeightMap& w, const LlamaArgs& a);
// minicpm.py's sanitize: a checkpoint without lm_head.weight uses the embedding's (always
// untied: a tied minicpm is a ConfigError, as mlx-lm cannot load one).
void minicpm_default_head(WeightMap& w, const LlamaArgs& a);

}  // namespace mlxcpp
