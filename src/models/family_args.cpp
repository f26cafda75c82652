// Config and weight-layout pieces of the llama descriptor that only phi3 (mlx_lm/models/phi3.py)
// and minicpm (mlx_lm/models/minicpm.py) have.
#include "models/family_args.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mlx/ops.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

void parse_phi3(const JsonView& c, LlamaArgs& a) {
  a.fused_qkv = a.fused_gate_up = true;
  a.rope.base = c.number_or("rope_theta", 10000.0);
  a.rope.traditional = c.bool_or("rope_traditional", false);
  const double partial = c.number_or("partial_rotary_factor", 1.0);
  a.rope.dims = static_cast<int>(a.head_dim * partial);  // int(head_dim * partial_rotary_factor)
  if (a.rope.dims <= 0 || a.rope.dims % 2 != 0 || a.rope.dims > a.head_dim) {
    c.fail("partial_rotary_factor", fmt::format("{} gives {} rotary dims of head_dim {}", partial, a.rope.dims, a.head_dim));
  }
  a.rope.max_position_embeddings = c.int_or("max_position_embeddings", 131072);
  a.rope.original_max_position_embeddings = c.int_or("original_max_position_embeddings", 4096);
  a.rope_scaling.reset();
  auto rs = c.get("rope_scaling");
  if (!rs || !rs->node().is_object() || rs->node().empty()) return;  // `if self.rope_scaling:`
  for (const char* key : {"long_factor", "type"}) {
    if (!rs->has(key)) rs->fail(key, "missing (phi3's rope_scaling must contain long_factor and type)");
  }
  const std::string type = rs->req_string("type");
  // phi3.py warns and drops any other type (plain RoPE).
  if (type == "su" || type == "longrope" || type == "linear") a.rope_scaling = rs;
}

void parse_minicpm(const JsonView& c, LlamaArgs& a) {
  if (a.tie) {
    c.fail("tie_word_embeddings", "true is not supported: mlx-lm's minicpm.py cannot load a tied checkpoint "
                                  "(its sanitize adds lm_head.weight, which the tied model lacks)");
  }
  a.rope.base = c.number_or("rope_theta", 1000000.0);
  a.embed_scale = c.req_number("scale_emb");
  // scale_depth / num_hidden_layers ** 0.5, and hidden_size / dim_model_base, as Python computes them.
  a.residual_scale = c.req_number("scale_depth") / std::pow(static_cast<double>(a.layers), 0.5);
  const double base = c.req_number("dim_model_base");
  if (!(base > 0)) c.fail("dim_model_base", "must be positive");
  a.logit_divisor = a.hidden / base;
}

void parse_granite(const JsonView& c, LlamaArgs& a) {
  a.rope.base = c.req_number("rope_theta");
  a.embed_scale = c.req_number("embedding_multiplier");
  a.attn_scale = c.req_number("attention_multiplier");
  a.residual_scale = c.req_number("residual_multiplier");
  a.logits_scaling = c.req_number("logits_scaling");
  if (a.logits_scaling == 0) c.fail("logits_scaling", "must be nonzero");
}

void parse_ministral3(const JsonView& c, LlamaArgs& a) {
  auto rp = c.get("rope_parameters");
  if (!rp || !rp->node().is_object()) c.fail("rope_parameters", "missing (ministral3 reads rope_theta and llama_4_scaling_beta from it)");
  a.rope.base = rp->req_number("rope_theta");
  a.rope.traditional = false;
  a.rope_scaling = rp;  // initialize_rope(..., rope_parameters, ...)
  a.llama4_beta = rp->req_number("llama_4_scaling_beta");
  a.llama4_original_max = rp->req_int32("original_max_position_embeddings");
  if (a.llama4_original_max <= 0) rp->fail("original_max_position_embeddings", "must be positive");
}

void mistral3_text_weights(WeightMap& w) {
  for (const auto& name : w.names()) {
    if (name.find("vision_tower") != std::string::npos || name.find("multi_modal_projector") != std::string::npos) {
      w.drop(name);
      continue;
    }
    std::string to;
    if (name.starts_with("model.language_model.")) to = "model." + name.substr(21);
    else if (name.starts_with("language_model.")) to = name.substr(15);
    else continue;
    const auto file = w.file_of(name);
    w.add(to, w.take(name), file);
  }
}

namespace {

// Moves rows [start, start + n) of each of `from`'s tensors (weight, and scales/biases when
// quantized) to `to`.
void take_rows(WeightMap& w, const std::string& from, const std::vector<std::pair<std::string, int>>& parts) {
  int total = 0;
  for (const auto& p : parts) total += p.second;
  for (const char* suffix : {".weight", ".scales", ".biases"}) {
    const std::string name = from + suffix;
    if (!w.has(name) && std::string(suffix) != ".weight") continue;  // a missing weight: take's error
    const auto file = w.file_of(name);
    mx::array t = w.take(name);
    if (t.ndim() != 2 || t.shape(0) != total) {
      throw WeightError(fmt::format("{}: tensor '{}': expected {} rows, got shape [{}]", file, name, total,
                                    fmt::join(t.shape(), ", ")));
    }
    int start = 0;
    for (const auto& [to, n] : parts) {
      w.add(to + suffix, mx::slice(t, {start, 0}, {start + n, t.shape(1)}), file);
      start += n;
    }
  }
}

}  // namespace

void split_fused_projections(WeightMap& w, const LlamaArgs& a) {
  const int qd = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
  for (int i = 0; i < a.layers; ++i) {
    const auto attn = fmt::format("model.layers.{}.self_attn", i), mlp = fmt::format("model.layers.{}.mlp", i);
    if (a.fused_qkv) take_rows(w, attn + ".qkv_proj", {{attn + ".q_proj", qd}, {attn + ".k_proj", kvd}, {attn + ".v_proj", kvd}});
    if (a.fused_gate_up) take_rows(w, mlp + ".gate_up_proj", {{mlp + ".gate_proj", a.intermediate}, {mlp + ".up_proj", a.intermediate}});
  }
}

namespace {

void require(const JsonView& c, std::initializer_list<const char*> keys, const std::string& family) {
  for (const char* k : keys) {
    if (!c.has(k)) c.fail(k, fmt::format("missing ({} requires it)", family));
  }
}

}  // namespace

void parse_qwen3_moe(const JsonView& c, LlamaArgs& a) {
  require(c, {"num_experts", "num_experts_per_tok", "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size",
              "norm_topk_prob"}, "qwen3_moe");
  a.rope_scaling.reset();  // qwen3_moe.py builds a plain nn.RoPE
  MoeArgs m;
  m.experts = c.req_int32("num_experts");
  m.top_k = c.req_int32("num_experts_per_tok");
  m.hidden = c.req_int32("moe_intermediate_size");
  m.norm_topk_prob = c.bool_or("norm_topk_prob", false);
  const int step = c.req_int32("decoder_sparse_step");
  if (step <= 0) c.fail("decoder_sparse_step", "must be positive");
  const auto dense = c.int_list("mlp_only_layers");
  a.moe_layers.assign(a.layers, false);
  for (int i = 0; i < a.layers; ++i) {
    const bool listed = std::find(dense.begin(), dense.end(), i) != dense.end();
    a.moe_layers[i] = !listed && m.experts > 0 && (i + 1) % step == 0;
  }
  if (m.experts > 0) {
    if (m.top_k <= 0 || m.top_k > m.experts) c.fail("num_experts_per_tok", fmt::format("must be 1..num_experts ({})", m.experts));
    if (m.hidden <= 0) c.fail("moe_intermediate_size", "must be positive");
    a.moe = m;
  }
}

void parse_glm4(const JsonView& c, LlamaArgs& a) {
  const bool moe = a.model_type == "glm4_moe";
  require(c, {"attention_bias", "head_dim", "partial_rotary_factor", "rope_theta"}, a.model_type);
  a.qkv_bias = c.bool_or("attention_bias", false);
  a.o_bias = a.mlp_bias = false;
  a.tie = false;  // glm4.py / glm4_moe.py always have lm_head
  a.rope.base = c.req_number("rope_theta");
  a.rope.traditional = moe ? false : c.bool_or("rope_traditional", true);
  const double partial = c.req_number("partial_rotary_factor");
  a.rope.dims = static_cast<int>(a.head_dim * partial);
  if (a.rope.dims <= 0 || a.rope.dims % 2 != 0 || a.rope.dims > a.head_dim) {
    c.fail("partial_rotary_factor", fmt::format("{} gives {} rotary dims of head_dim {}", partial, a.rope.dims, a.head_dim));
  }
  a.rope_scaling.reset();  // a plain nn.RoPE in both files
  if (!moe) {
    a.fused_gate_up = true;
    a.norms.attn_out = "post_self_attn_layernorm";
    a.norms.mlp_out = "post_mlp_layernorm";
    return;
  }
  require(c, {"use_qk_norm", "num_experts_per_tok", "n_group", "topk_group", "routed_scaling_factor",
              "first_k_dense_replace", "norm_topk_prob", "moe_intermediate_size"}, "glm4_moe");
  a.qk_norm = c.bool_or("use_qk_norm", false);
  a.moe_layers.assign(a.layers, false);
  if (!c.has("n_routed_experts")) return;  // `config.n_routed_experts is not None`: every layer dense
  MoeArgs m;
  m.router = MoeArgs::Router::kSigmoidGroups;
  m.experts = c.req_int32("n_routed_experts");
  m.top_k = c.req_int32("num_experts_per_tok");
  m.hidden = c.req_int32("moe_intermediate_size");
  m.norm_topk_prob = c.bool_or("norm_topk_prob", false);
  m.n_group = c.req_int32("n_group");
  m.topk_group = c.req_int32("topk_group");
  m.routed_scaling = c.req_number("routed_scaling_factor");
  if (c.has("n_shared_experts")) m.shared_hidden = m.hidden * c.req_int32("n_shared_experts");
  if (m.experts <= 0) c.fail("n_routed_experts", "must be positive");
  if (m.hidden <= 0) c.fail("moe_intermediate_size", "must be positive");
  if (m.n_group <= 0 || m.experts % m.n_group != 0) c.fail("n_group", fmt::format("must divide n_routed_experts ({})", m.experts));
  if (m.n_group > 1 && m.experts / m.n_group < 2) c.fail("n_group", "each group needs at least 2 experts (its score is its top 2)");
  if (m.topk_group <= 0 || m.topk_group > m.n_group) c.fail("topk_group", fmt::format("must be 1..n_group ({})", m.n_group));
  const int candidates = m.n_group > 1 ? m.topk_group * (m.experts / m.n_group) : m.experts;
  if (m.top_k <= 0 || m.top_k > candidates) {
    c.fail("num_experts_per_tok", fmt::format("must be 1..{} (the experts of the kept groups)", candidates));
  }
  const int first_dense = c.req_int32("first_k_dense_replace");
  for (int i = 0; i < a.layers; ++i) a.moe_layers[i] = i >= first_dense;
  a.moe = m;
}

void stack_experts(WeightMap& w, const LlamaArgs& a) {
  if (a.model_type == "glm4_moe") {
    const auto mtp = fmt::format("model.layers.{}.", a.layers);
    for (const auto& name : w.names()) {
      if (name.starts_with(mtp)) w.drop(name);
    }
  }
  if (!a.moe) return;
  for (int i = 0; i < a.layers; ++i) {
    const auto p = fmt::format("model.layers.{}.mlp", i);
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      for (const char* t : {"weight", "scales", "biases"}) {
        if (!w.has(fmt::format("{}.experts.0.{}.{}", p, proj, t))) continue;
        std::vector<mx::array> parts;
        const auto file = w.file_of(fmt::format("{}.experts.0.{}.{}", p, proj, t));
        for (int e = 0; e < a.moe->experts; ++e) parts.push_back(w.take(fmt::format("{}.experts.{}.{}.{}", p, e, proj, t)));
        w.add(fmt::format("{}.switch_mlp.{}.{}", p, proj, t), mx::stack(parts), file);
      }
    }
  }
}

void minicpm_default_head(WeightMap& w, const LlamaArgs& a) {
  if (a.tie || w.has("lm_head.weight") || w.has("lm_head.scales")) return;
  const std::string embed = "model.embed_tokens.weight";
  if (w.has(embed)) w.add("lm_head.weight", w.peek(embed), w.file_of(embed));
}

}  // namespace mlxcpp
