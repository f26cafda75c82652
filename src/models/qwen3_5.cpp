// Qwen3.5 / Qwen3-Next: gated-DeltaNet linear-attention layers interleaved with gated full
// attention. Ports mlx_lm/models/qwen3_5.py (text model; the nested config's text_config,
// weights under language_model.), qwen3_5_moe.py (the same with sparse MLPs) and qwen3_next.py
// (flat config, fused in_proj_qkvz / in_proj_ba, mlp_only_layers and decoder_sparse_step).
// Reads: hidden_size, num_hidden_layers, intermediate_size, num_attention_heads,
// num_key_value_heads, head_dim, rms_norm_eps, vocab_size, max_position_embeddings,
// linear_num_value_heads, linear_num_key_heads, linear_key_head_dim, linear_value_head_dim,
// linear_conv_kernel_dim, full_attention_interval, tie_word_embeddings, attention_bias,
// rope_parameters (qwen3_5: rope_theta, partial_rotary_factor, the scaling) or rope_theta,
// partial_rotary_factor, rope_scaling (qwen3_next), num_experts, num_experts_per_tok,
// moe_intermediate_size, shared_expert_intermediate_size, norm_topk_prob, decoder_sparse_step,
// mlp_only_layers (defaults as mlx-lm's ModelArgs).
#include <algorithm>
#include <cmath>
#include <optional>
#include <variant>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "cache/arrays_cache.h"
#include "models/registry.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/gated_delta.h"
#include "nn/mlp.h"
#include "nn/moe.h"
#include "nn/norm.h"
#include "nn/rope.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

struct Qwen35Args {
  std::string model_type, prefix;  // prefix: "language_model." (qwen3_5*) or "" (qwen3_next)
  int hidden = 0, layers = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int interval = 4;
  float eps = 1e-6f;
  bool tie = false, attention_bias = false;
  RopeParams rope;
  std::optional<JsonView> rope_scaling;
  GatedDeltaArgs delta;
  MoeArgs moe;
  int sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  bool is_linear(int i) const { return (i + 1) % interval != 0; }
  bool is_sparse(int i) const {
    return moe.experts > 0 && (i + 1) % sparse_step == 0 &&
           std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) == mlp_only_layers.end();
  }
  static Qwen35Args parse(const JsonView& root);
};

Qwen35Args Qwen35Args::parse(const JsonView& root) {
  Qwen35Args a;
  a.model_type = root.req_string("model_type");
  const bool next = a.model_type == "qwen3_next";
  // qwen3_5.ModelArgs.from_dict: a flat config is its own text_config.
  const JsonView c = (!next && root.has("text_config")) ? root.at("text_config") : root;
  a.prefix = next ? "" : "language_model.";
  a.hidden = next ? c.req_int32("hidden_size") : c.int32_or("hidden_size", 4096);
  a.layers = next ? c.req_int32("num_hidden_layers") : c.int32_or("num_hidden_layers", 32);
  a.intermediate = next ? c.req_int32("intermediate_size") : c.int32_or("intermediate_size", 14336);
  a.heads = next ? c.req_int32("num_attention_heads") : c.int32_or("num_attention_heads", 32);
  a.kv_heads = next ? c.req_int32("num_key_value_heads") : c.int32_or("num_key_value_heads", 8);
  a.vocab = next ? c.req_int32("vocab_size") : c.int32_or("vocab_size", 151936);
  a.eps = static_cast<float>(next ? c.req_number("rms_norm_eps") : c.number_or("rms_norm_eps", 1e-6));
  if (a.hidden <= 0 || a.layers <= 0 || a.heads <= 0 || a.vocab <= 0 || a.intermediate <= 0) {
    c.fail("hidden_size", "hidden_size, num_hidden_layers, num_attention_heads, intermediate_size and vocab_size "
                          "must be positive");
  }
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) {
    c.fail("num_key_value_heads", fmt::format("{} must divide num_attention_heads ({})", a.kv_heads, a.heads));
  }
  a.head_dim = next ? c.req_int32("head_dim") : c.int32_or("head_dim", a.hidden / a.heads);
  if (a.head_dim <= 0) c.fail("head_dim", "must be positive");
  a.interval = c.int32_or("full_attention_interval", 4);
  if (a.interval <= 0) c.fail("full_attention_interval", "must be positive");
  a.tie = c.bool_or("tie_word_embeddings", false);
  a.attention_bias = c.bool_or("attention_bias", false);
  double partial = 0.25;
  if (next) {
    a.rope.base = c.req_number("rope_theta");
    partial = c.req_number("partial_rotary_factor");
    a.rope_scaling = c.get("rope_scaling");
  } else {
    // __post_init__: rope_parameters (rope_type renamed type) is also the scaling config.
    a.rope.base = 100000.0;
    if (auto p = c.get("rope_parameters"); p && p->node().is_object() && !p->node().empty()) {
      partial = p->number_or("partial_rotary_factor", 0.25);
      a.rope.base = p->number_or("rope_theta", 100000.0);
      a.rope_scaling = p;
    }
  }
  a.rope.dims = static_cast<int>(a.head_dim * partial);
  if (a.rope.dims <= 0 || a.rope.dims > a.head_dim) c.fail("partial_rotary_factor", "must be in (0, 1]");
  a.rope.max_position_embeddings = c.int_or("max_position_embeddings", 131072);

  auto& d = a.delta;
  d.layout = next ? GatedDeltaArgs::Layout::kInterleaved : GatedDeltaArgs::Layout::kSplit;
  d.hidden = a.hidden;
  d.v_heads = next ? c.req_int32("linear_num_value_heads") : c.int32_or("linear_num_value_heads", 64);
  d.k_heads = next ? c.req_int32("linear_num_key_heads") : c.int32_or("linear_num_key_heads", 16);
  d.k_dim = next ? c.req_int32("linear_key_head_dim") : c.int32_or("linear_key_head_dim", 192);
  d.v_dim = next ? c.req_int32("linear_value_head_dim") : c.int32_or("linear_value_head_dim", 128);
  d.conv_kernel = next ? c.req_int32("linear_conv_kernel_dim") : c.int32_or("linear_conv_kernel_dim", 4);
  d.eps = a.eps;
  if (d.k_heads <= 0 || d.v_heads % d.k_heads != 0) {
    c.fail("linear_num_value_heads", fmt::format("{} must be a positive multiple of linear_num_key_heads ({})",
                                                 d.v_heads, d.k_heads));
  }
  if (d.k_dim <= 0 || d.v_dim <= 0 || d.conv_kernel < 2) {
    c.fail("linear_conv_kernel_dim", "linear head dims must be positive and the conv kernel at least 2");
  }

  auto& m = a.moe;
  m.router = MoeArgs::Router::kSoftmax;
  m.experts = next ? c.req_int32("num_experts") : c.int32_or("num_experts", 0);
  if (m.experts > 0) {
    m.top_k = next ? c.req_int32("num_experts_per_tok") : c.int32_or("num_experts_per_tok", 0);
    m.hidden = next ? c.req_int32("moe_intermediate_size") : c.int32_or("moe_intermediate_size", 0);
    m.shared_hidden = next ? c.req_int32("shared_expert_intermediate_size")
                           : c.int32_or("shared_expert_intermediate_size", 0);
    m.gated_shared = true;
    m.norm_topk_prob = c.bool_or("norm_topk_prob", !next);
    if (m.top_k <= 0 || m.top_k > m.experts || m.hidden <= 0 || m.shared_hidden <= 0) {
      c.fail("num_experts_per_tok", "a sparse model needs 0 < num_experts_per_tok <= num_experts and positive "
                                    "moe_intermediate_size and shared_expert_intermediate_size");
    }
  }
  if (next) {
    a.sparse_step = c.req_int32("decoder_sparse_step");
    if (a.sparse_step <= 0) c.fail("decoder_sparse_step", "must be positive");
    a.mlp_only_layers = c.int_list("mlp_only_layers");
  }
  return a;
}

// Qwen3NextAttention: q_proj yields queries and an output gate per head; q/k RMSNorm; partial RoPE.
class GatedAttention {
 public:
  GatedAttention(const Qwen35Args& a, const LoadContext& ctx, const std::string& p)
      : q_(Linear::load(ctx, p + ".q_proj", a.hidden, a.heads * a.head_dim * 2, a.attention_bias)),
        k_(Linear::load(ctx, p + ".k_proj", a.hidden, a.kv_heads * a.head_dim, a.attention_bias)),
        v_(Linear::load(ctx, p + ".v_proj", a.hidden, a.kv_heads * a.head_dim, a.attention_bias)),
        o_(Linear::load(ctx, p + ".o_proj", a.heads * a.head_dim, a.hidden, a.attention_bias)),
        q_norm_(RMSNorm::load(ctx, p + ".q_norm", a.head_dim, a.eps)),
        k_norm_(RMSNorm::load(ctx, p + ".k_norm", a.head_dim, a.eps)),
        rope_(Rope::create(a.rope, a.rope_scaling)),
        heads_(a.heads),
        kv_heads_(a.kv_heads),
        scale_(static_cast<float>(std::pow(static_cast<double>(a.head_dim), -0.5))),
        fast_(ctx.fast) {}

  mx::array operator()(const mx::array& x, const AttentionMask& mask, KVCacheBase* cache) const {
    const int B = x.shape(0), L = x.shape(1);
    auto qg = mx::split(mx::reshape(q_(x), {B, L, heads_, -1}), 2, -1);
    auto gate = mx::reshape(qg[1], {B, L, -1});
    auto q = mx::transpose(q_norm_(qg[0]), {0, 2, 1, 3});
    auto k = mx::transpose(k_norm_(mx::reshape(k_(x), {B, L, kv_heads_, -1})), {0, 2, 1, 3});
    auto v = mx::transpose(mx::reshape(v_(x), {B, L, kv_heads_, -1}), {0, 2, 1, 3});
    q = rope_.apply(q, cache);
    k = rope_.apply(k, cache);
    auto out = cached_attention(q, k, v, cache, scale_, mask, fast_);
    out = mx::reshape(mx::transpose(out, {0, 2, 1, 3}), {B, L, -1});
    return o_(mx::multiply(out, mx::sigmoid(gate)));
  }

  void collect(std::vector<mx::array>& out) const {
    for (const auto* l : {&q_, &k_, &v_, &o_}) l->collect(out);
    q_norm_.collect(out);
    k_norm_.collect(out);
  }

 private:
  Linear q_, k_, v_, o_;
  RMSNorm q_norm_, k_norm_;
  Rope rope_;
  int heads_, kv_heads_;
  float scale_;
  kernels::FastPath fast_;
};

class Block {
 public:
  Block(const Qwen35Args& a, const LoadContext& ctx, const std::string& p, int i)
      : input_norm_(RMSNorm::load(ctx, p + ".input_layernorm", a.hidden, a.eps)),
        post_norm_(RMSNorm::load(ctx, p + ".post_attention_layernorm", a.hidden, a.eps)),
        fast_(ctx.fast) {
    if (a.is_linear(i)) delta_.emplace(GatedDeltaNet::load(ctx, p + ".linear_attn", a.delta));
    else attn_.emplace(a, ctx, p + ".self_attn");
    if (a.is_sparse(i)) moe_.emplace(SparseMoe::load(ctx, p + ".mlp", a.hidden, a.moe));
    else mlp_.emplace(SwiGLUMLP::load(ctx, p + ".mlp", a.hidden, a.intermediate, false));
  }

  bool linear() const { return delta_.has_value(); }

  mx::array operator()(const mx::array& x, const AttentionMask& fa_mask, const std::optional<mx::array>& ssm_mask,
                       KVCacheBase* cache) const {
    auto r = delta_ ? (*delta_)(input_norm_(x), ssm_mask, cache) : (*attn_)(input_norm_(x), fa_mask, cache);
    auto h = mx::add(x, r);
    return moe_ ? moe_->residual(h, post_norm_) : mlp_->residual(h, post_norm_, fast_);
  }

  void collect(std::vector<mx::array>& out) const {
    if (delta_) delta_->collect(out);
    if (attn_) attn_->collect(out);
    if (moe_) moe_->collect(out);
    if (mlp_) mlp_->collect(out);
    input_norm_.collect(out);
    post_norm_.collect(out);
  }

 private:
  std::optional<GatedDeltaNet> delta_;
  std::optional<GatedAttention> attn_;
  std::optional<SparseMoe> moe_;
  std::optional<SwiGLUMLP> mlp_;
  RMSNorm input_norm_, post_norm_;
  kernels::FastPath fast_;
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(Qwen35Args a, const LoadContext& ctx)
      : args_(std::move(a)),
        embed_(Embedding::load(ctx, args_.prefix + "model.embed_tokens", args_.vocab, args_.hidden)),
        norm_(RMSNorm::load(ctx, args_.prefix + "model.norm", args_.hidden, args_.eps)) {
    drop_unused(ctx);
    for (int i = 0; i < args_.layers; ++i) {
      blocks_.emplace_back(args_, ctx, fmt::format("{}model.layers.{}", args_.prefix, i), i);
    }
    if (!args_.tie) lm_head_ = Linear::load(ctx, args_.prefix + "lm_head", args_.hidden, args_.vocab, false);
  }

  mx::array operator()(const mx::array& ids, LayerCaches* caches) const override {
    auto h = hidden_states(ids, caches);
    return lm_head_ ? (*lm_head_)(h) : embed_.as_linear(h);
  }

  mx::array hidden_states(const mx::array& ids, LayerCaches* caches) const override {
    auto h = embed_(ids);
    const int n = h.shape(1);
    auto cache_at = [&](int i) -> KVCacheBase* { return caches ? (*caches)[i].get() : nullptr; };
    // The masks come from the first linear layer's cache and the first full layer's.
    AttentionMask fa_mask = create_attention_mask(n, args_.interval <= args_.layers ? cache_at(args_.interval - 1)
                                                                                    : nullptr);
    std::optional<mx::array> ssm_mask;
    if (auto* rs = recurrent_state(cache_at(0))) ssm_mask = rs->ssm_mask(n);
    for (int i = 0; i < args_.layers; ++i) h = blocks_[i](h, fa_mask, ssm_mask, cache_at(i));
    return norm_(h);
  }

  LayerCaches make_cache() const override {
    LayerCaches c;
    for (const auto& b : blocks_) {
      if (b.linear()) c.push_back(std::make_unique<ArraysCache>(2));
      else c.push_back(std::make_unique<KVCache>());
    }
    return c;
  }

  int vocab_size() const override { return args_.vocab; }
  int hidden_size() const override { return args_.hidden; }
  int num_layers() const override { return args_.layers; }

  std::vector<mx::array> parameters() const override {
    std::vector<mx::array> out;
    embed_.collect(out);
    for (const auto& b : blocks_) b.collect(out);
    norm_.collect(out);
    if (lm_head_) lm_head_->collect(out);
    return out;
  }

 private:
  // sanitize(): the multi-token-prediction head, the vision tower, a tied head's lm_head. A
  // Hugging Face layout (unstacked experts, [C, 1, K] conv kernels, norms stored as w - 1) is
  // what `mlxcpp convert --hf` turns into an MLX snapshot; loading it here would misread norms.
  void drop_unused(const LoadContext& ctx) const {
    for (const auto& name : ctx.weights.names()) {
      if (name.find("mtp.") != std::string::npos || name.starts_with("vision_tower") ||
          name.starts_with("model.visual") || (args_.tie && name == args_.prefix + "lm_head.weight")) {
        ctx.weights.drop(name);
      } else if (name.ends_with(".experts.0.up_proj.weight") || name.starts_with("model.language_model") ||
                 (name.ends_with("conv1d.weight") && ctx.weights.peek(name).ndim() == 3 &&
                  ctx.weights.peek(name).shape(-1) != 1)) {
        throw ConfigError(fmt::format("{}: tensor '{}' is in the Hugging Face layout; convert the checkpoint first "
                                      "(mlxcpp convert --hf DIR --out DIR)",
                                      ctx.weights.file_of(name), name));
      }
    }
  }

  Qwen35Args args_;
  Embedding embed_;
  RMSNorm norm_;
  std::vector<Block> blocks_;
  std::optional<Linear> lm_head_;
};

}  // namespace

std::unique_ptr<Model> load_qwen3_5(const Checkpoint& ckpt, const LoadContext& ctx) {
  return std::make_unique<Qwen35Model>(Qwen35Args::parse(ckpt.config()), ctx);
}

}  // namespace mlxcpp
