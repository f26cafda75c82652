// GGUF -> HF for qwen3moe, glm4 and glm4moe. Sources (llama.cpp as bench/peers pins it):
// conversion/qwen.py Qwen3MoeModel (a Qwen2MoeModel: each layer's experts stacked into
// ffn_{gate,up,down}_exps, ne [cols, rows, experts], Q/K rows as HF has them),
// conversion/glm.py Glm4Model (gate_up_proj kept fused as ffn_up; Q/K permuted only for
// M-RoPE) and Glm4MoeModel (experts stacked, shared experts, exp_probs_b, the MTP block after
// the trunk), src/models/qwen3moe.cpp, glm4.cpp, glm4-moe.cpp (keys read, graphs: qwen3moe
// always renormalizes its top-k softmax weights), llama-model.cpp's rope types (glm4: NORM,
// adjacent pairs = mlx-lm's traditional RoPE; qwen3moe, glm4moe: NEOX), gguf-py
// tensor_mapping.py (names); mlx-lm models/qwen3_moe.py, glm4.py, glm4_moe.py (config fields).
#include <fmt/format.h>

#include "artifacts/gguf_arch_detail.h"
#include "core/errors.h"

namespace mlxcpp::gguf_detail {

using nlohmann::json;

namespace {

// What a sparse layer's tensors must look like (GGUF ne order).
struct MoeShape {
  int64_t hidden = 0, experts = 0, ff = 0;
  int64_t shared_ff = 0;  // 0: no shared expert
  bool correction_bias = false;
};

// Every tensor a sparse layer needs is there with the shape the keys give (llama.cpp's
// create_tensor checks): a missing expert tensor or another expert count fails here, naming
// the tensor and the keys, before anything is written.
void check_moe_layer(const GgufFile& g, const Keys& k, int layer, const MoeShape& m) {
  auto need = [&](const std::string& part, const char* suffix, const std::vector<int64_t>& ne) {
    const std::string name = fmt::format("blk.{}.{}.{}", layer, part, suffix);
    const auto* t = g.find_tensor(name);
    const std::string keys = fmt::format("'{}' {}, '{}' {}, '{}' {}", k.k("embedding_length"), m.hidden,
                                         k.k("expert_count"), m.experts, k.k("expert_feed_forward_length"), m.ff);
    if (t == nullptr) {
      throw WeightError(fmt::format("{}: tensor '{}': missing (layer {} is sparse; {})", g.path().string(), name,
                                    layer, keys));
    }
    if (t->ne != ne) {
      throw WeightError(fmt::format("{}: tensor '{}': ne [{}], expected [{}] from {}", g.path().string(), name,
                                    fmt::join(t->ne, ", "), fmt::join(ne, ", "), keys));
    }
  };
  need("ffn_gate_inp", "weight", {m.hidden, m.experts});
  need("ffn_gate_exps", "weight", {m.hidden, m.ff, m.experts});
  need("ffn_up_exps", "weight", {m.hidden, m.ff, m.experts});
  need("ffn_down_exps", "weight", {m.ff, m.hidden, m.experts});
  if (m.correction_bias) need("exp_probs_b", "bias", {m.experts});
  if (m.shared_ff > 0) {
    need("ffn_gate_shexp", "weight", {m.hidden, m.shared_ff});
    need("ffn_up_shexp", "weight", {m.hidden, m.shared_ff});
    need("ffn_down_shexp", "weight", {m.shared_ff, m.hidden});
  }
}

// expert_count and expert_used_count, checked as llama.cpp's loaders do.
std::pair<int64_t, int64_t> expert_counts(const GgufFile& g, const Keys& k) {
  const int64_t experts = k.req("expert_count");
  if (experts <= 0) g.fail_key(k.k("expert_count"), fmt::format("{} is not positive", experts));
  const int64_t used = k.req("expert_used_count");
  if (used <= 0 || used > experts) {
    g.fail_key(k.k("expert_used_count"), fmt::format("{} is not in 1..expert_count ({})", used, experts));
  }
  return {experts, used};
}

// The families below build a plain nn.RoPE in mlx-lm: a scaled GGUF would run differently.
void no_rope_scaling(const GgufFile& g, const Keys& k, const char* model_type) {
  if (rope_scaling(g, k)) {
    g.fail_key(k.k("rope.scaling.type"), fmt::format("RoPE scaling is not supported for {} (mlx-lm's {}.py has none)",
                                                     model_type, model_type));
  }
  if (g.find_tensor("rope_freqs.weight")) {
    throw WeightError(fmt::format("{}: tensor 'rope_freqs.weight': RoPE frequency factors are not supported for {}",
                                  g.path().string(), model_type));
  }
}

// GLM's partial rotary factor from rope.dimension_count (Glm4Model/Glm4MoeModel write
// head_dim * partial_rotary_factor), and a refusal of GLM-4V's M-RoPE layout (Q/K rows permuted
// to NEOX and position sections mlx-lm's text models do not have).
double glm_rotary_factor(const GgufFile& g, const Keys& k, const json& c) {
  if (const auto* s = g.find(k.k("rope.dimension_sections")); s && s->is_array()) {
    const auto sections = g.req_ints(k.k("rope.dimension_sections"));
    if (sections.size() >= 2 && sections[0] > 0 && sections[1] > 0) {
      g.fail_key(k.k("rope.dimension_sections"), "M-RoPE (GLM-4V) GGUFs are not supported");
    }
  }
  const int64_t head_dim = c["head_dim"];
  const int64_t dims = k.get("rope.dimension_count", head_dim);
  if (dims <= 0 || dims > head_dim || dims % 2 != 0) {
    g.fail_key(k.k("rope.dimension_count"), fmt::format("{} is not an even number in 1..head_dim ({})", dims, head_dim));
  }
  return static_cast<double>(dims) / static_cast<double>(head_dim);
}

// block_count minus the MTP (NextN) layers llama.cpp keeps after the trunk (mlx-lm drops them).
int64_t trunk_layers(const GgufFile& g, const Keys& k) {
  const int64_t blocks = k.req("block_count");
  const int64_t nextn = k.get("nextn_predict_layers", 0);
  if (nextn < 0 || nextn >= blocks) {
    g.fail_key(k.k("nextn_predict_layers"), fmt::format("{} is not in 0..block_count-1 ({})", nextn, blocks - 1));
  }
  return blocks - nextn;
}

// Qwen3MoeModel: qwen3's attention (q/k norms, head_dim as key_length), every layer sparse.
class Qwen3MoeArch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "qwen3moe"};
    no_rope_scaling(g, k, "qwen3_moe");
    json c = family_config(g, k, "Qwen3MoeForCausalLM", "qwen3_moe", 1000000.0);
    const auto [experts, used] = expert_counts(g, k);
    c["hidden_act"] = "silu";
    c["rope_scaling"] = nullptr;
    c["num_experts"] = experts;
    c["num_experts_per_tok"] = used;
    // llama.cpp: n_ff / n_expert_used when the key is missing.
    const int64_t ff = k.get("expert_feed_forward_length", c["intermediate_size"].get<int64_t>() / used);
    c["moe_intermediate_size"] = ff;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = json::array();
    c["norm_topk_prob"] = true;  // qwen3moe.cpp: build_moe_ffn(..., norm_w = true, ...)
    const MoeShape shape{c["hidden_size"].get<int64_t>(), experts, ff};
    for (int i = 0; i < c["num_hidden_layers"].get<int>(); ++i) check_moe_layer(g, k, i, shape);
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    static const auto kBlock = block_names({{"attn_q_norm", "self_attn.q_norm"},
                                            {"attn_k_norm", "self_attn.k_norm"},
                                            {"ffn_norm", "post_attention_layernorm"},
                                            {"ffn_gate_inp", "mlp.gate"},
                                            {"ffn_gate_exps", "mlp.switch_mlp.gate_proj"},
                                            {"ffn_up_exps", "mlp.switch_mlp.up_proj"},
                                            {"ffn_down_exps", "mlp.switch_mlp.down_proj"}});
    return map_name(g, name, kBlock);
  }
  GgufTensorFix fix(const GgufFile&, const std::string&) const override { return {}; }
};

// Both GLM files always have lm_head: a tied GGUF's embedding is written as lm_head too.
class GlmArchBase : public GgufArch {
 public:
  GgufTensorFix fix(const GgufFile&, const std::string&) const override { return {}; }
  std::optional<std::string> also_as(const GgufFile& g, const std::string& hf) const override {
    if (hf == "model.embed_tokens.weight" && !g.find_tensor("output.weight")) return "lm_head.weight";
    return std::nullopt;
  }

 protected:
  // family_config plus what both take from the tensors and the rope keys.
  static json glm_config(const GgufFile& g, const Keys& k, const char* cls, const char* model_type) {
    no_rope_scaling(g, k, model_type);
    json c = family_config(g, k, cls, model_type, 10000.0);
    c["num_hidden_layers"] = trunk_layers(g, k);
    c["tie_word_embeddings"] = false;
    c["attention_bias"] = g.find_tensor("blk.0.attn_q.bias") != nullptr;
    c["partial_rotary_factor"] = glm_rotary_factor(g, k, c);
    c["rope_scaling"] = nullptr;
    return c;
  }
  // Tensors of the MTP layers (block >= the trunk's layers) are dropped.
  static std::optional<std::string> trunk_name(const GgufFile& g, const Keys& k, const std::string& name,
                                               const BlockNames& block) {
    if (block_index(name) >= trunk_layers(g, k)) return std::nullopt;
    return map_name(g, name, block);
  }
};

// Glm4Model: input norms and a norm after each branch (post_attention_norm, post_ffw_norm); the
// pre-MLP norm is ffn_norm.
class Glm4Arch : public GlmArchBase {
 public:
  json config(const GgufFile& g) const override {
    json c = glm_config(g, Keys{g, "glm4"}, "Glm4ForCausalLM", "glm4");
    c["rope_traditional"] = true;  // llama.cpp ropes glm4 as NORM (adjacent pairs), Q/K rows as HF has them
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    static const auto kBlock = block_names({{"post_attention_norm", "post_self_attn_layernorm"},
                                            {"ffn_norm", "post_attention_layernorm"},
                                            {"post_ffw_norm", "post_mlp_layernorm"},
                                            {"ffn_up", "mlp.gate_up_proj"}});
    return trunk_name(g, Keys{g, "glm4"}, name, kBlock);
  }
};

// Glm4MoeModel: leading dense layers, then a sigmoid router with its correction bias over expert
// groups, routed scaling and shared experts; here post_attention_norm is the pre-MLP norm.
class Glm4MoeArch : public GlmArchBase {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "glm4moe"};
    json c = glm_config(g, k, "Glm4MoeForCausalLM", "glm4_moe");
    const auto [experts, used] = expert_counts(g, k);
    if (const int64_t f = k.get("expert_gating_func", 2); f != 0 && f != 2) {  // 0 (none): llama.cpp's sigmoid
      g.fail_key(k.k("expert_gating_func"), fmt::format("{} is not supported (glm4_moe routes by sigmoid, 2)", f));
    }
    const int64_t ff = k.req("expert_feed_forward_length");
    const int64_t shared = k.get("expert_shared_count", 0);
    const int64_t dense = k.get("leading_dense_block_count", 0);
    c["use_qk_norm"] = g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    c["n_routed_experts"] = experts;
    c["num_experts_per_tok"] = used;
    c["moe_intermediate_size"] = ff;
    c["n_shared_experts"] = shared > 0 ? json(shared) : json(nullptr);
    c["first_k_dense_replace"] = dense;
    c["n_group"] = std::max<int64_t>(k.get("expert_group_count", 1), 1);
    c["topk_group"] = std::max<int64_t>(k.get("expert_group_used_count", 1), 1);
    const double scale = k.num("expert_weights_scale", 0.0);  // llama.cpp: 0 = unscaled
    c["routed_scaling_factor"] = scale == 0.0 ? 1.0 : scale;
    c["norm_topk_prob"] = g.opt_bool(k.k("expert_weights_norm")).value_or(false);
    c["scoring_func"] = "sigmoid";
    c["topk_method"] = "noaux_tc";
    const MoeShape shape{c["hidden_size"].get<int64_t>(), experts, ff, ff * shared, true};
    for (int i = static_cast<int>(dense); i < c["num_hidden_layers"].get<int>(); ++i) check_moe_layer(g, k, i, shape);
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    static const auto kBlock = block_names({{"attn_q_norm", "self_attn.q_norm"},
                                            {"attn_k_norm", "self_attn.k_norm"},
                                            {"post_attention_norm", "post_attention_layernorm"},
                                            {"ffn_gate_inp", "mlp.gate"},
                                            {"exp_probs_b", "mlp.gate.e_score_correction"},
                                            {"ffn_gate_exps", "mlp.switch_mlp.gate_proj"},
                                            {"ffn_up_exps", "mlp.switch_mlp.up_proj"},
                                            {"ffn_down_exps", "mlp.switch_mlp.down_proj"},
                                            {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
                                            {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
                                            {"ffn_down_shexp", "mlp.shared_experts.down_proj"}});
    auto hf = trunk_name(g, Keys{g, "glm4moe"}, name, kBlock);
    // HF's parameter is e_score_correction_bias, not a module's bias.
    const std::string bias = "e_score_correction.bias";
    if (hf && hf->ends_with(bias)) hf->replace(hf->size() - bias.size(), bias.size(), "e_score_correction_bias");
    return hf;
  }
};

}  // namespace

const GgufArch& qwen3moe_arch() {
  static const Qwen3MoeArch kArch;
  return kArch;
}

const GgufArch& glm4_arch() {
  static const Glm4Arch kArch;
  return kArch;
}

const GgufArch& glm4moe_arch() {
  static const Glm4MoeArch kArch;
  return kArch;
}

}  // namespace mlxcpp::gguf_detail
