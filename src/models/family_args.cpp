// Config and weight-layout pieces of the llama descriptor that only phi3 (mlx_lm/models/phi3.py)
// and minicpm (mlx_lm/models/minicpm.py) have.
#include "models/family_args.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mlx/ops.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

void parse_phi3(const JsonView& c, LlamaArgs& a) {
  a.fused_qkv = true;
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
    take_rows(w, attn + ".qkv_proj", {{attn + ".q_proj", qd}, {attn + ".k_proj", kvd}, {attn + ".v_proj", kvd}});
    take_rows(w, mlp + ".gate_up_proj", {{mlp + ".gate_proj", a.intermediate}, {mlp + ".up_proj", a.intermediate}});
  }
}

void minicpm_default_head(WeightMap& w, const LlamaArgs& a) {
  if (a.tie || w.has("lm_head.weight") || w.has("lm_head.scales")) return;
  const std::string embed = "model.embed_tokens.weight";
  if (w.has(embed)) w.add("lm_head.weight", w.peek(embed), w.file_of(embed));
}

}  // namespace mlxcpp
