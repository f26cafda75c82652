// Gemma 3 text family. Ports mlx_lm/models/gemma3_text.py, and gemma3.py (the multimodal
// checkpoint: text_config nested, weights under language_model., vision weights dropped).
// Reads: hidden_size, num_hidden_layers, intermediate_size, num_attention_heads,
// num_key_value_heads, head_dim, rms_norm_eps, vocab_size, rope_theta, rope_local_base_freq,
// rope_scaling, query_pre_attn_scalar, sliding_window, sliding_window_pattern,
// max_position_embeddings (defaults as mlx-lm's ModelArgs). Like mlx-lm 0.32.2 it ignores
// layer_types and tie_word_embeddings: the head is tied exactly when lm_head.weight is absent.
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <mlx/compile.h>
#include <mlx/ops.h>

#include "models/registry.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/fused_attention.h"
#include "nn/gemma_norm.h"
#include "nn/geglu.h"
#include "nn/rope.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

struct Gemma3Args {
  std::string prefix;  // "" for gemma3_text, "language_model." for gemma3
  int hidden = 0, layers = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  float eps = 1e-6f;
  double rope_theta = 1e6, rope_local_base = 1e4, query_pre_attn_scalar = 256;
  int sliding_window = 512, pattern = 6;
  int64_t max_position_embeddings = 32768;
  std::optional<JsonView> rope_scaling;

  bool is_global(int i) const { return i % pattern == pattern - 1; }
  static Gemma3Args parse(const JsonView& root);
};

Gemma3Args Gemma3Args::parse(const JsonView& root) {
  Gemma3Args a;
  const bool nested = root.req_string("model_type") == "gemma3";
  // gemma3.ModelArgs.__post_init__: vocab_size comes from the outer config; heads default 8/4.
  const JsonView c = nested ? root.at("text_config") : root;
  a.prefix = nested ? "language_model." : "";
  a.vocab = nested ? root.int32_or("vocab_size", 262208) : c.int32_or("vocab_size", 262144);
  a.heads = c.int32_or("num_attention_heads", nested ? 8 : 4);
  a.kv_heads = c.int32_or("num_key_value_heads", nested ? 4 : 1);
  a.hidden = c.int32_or("hidden_size", 1152);
  a.layers = c.int32_or("num_hidden_layers", 26);
  a.intermediate = c.int32_or("intermediate_size", 6912);
  a.head_dim = c.int32_or("head_dim", 256);
  a.eps = static_cast<float>(c.number_or("rms_norm_eps", 1e-6));
  a.rope_theta = c.number_or("rope_theta", 1e6);
  a.rope_local_base = c.number_or("rope_local_base_freq", 1e4);
  a.query_pre_attn_scalar = c.number_or("query_pre_attn_scalar", 256);
  a.sliding_window = c.int32_or("sliding_window", 512);
  a.pattern = c.int32_or("sliding_window_pattern", 6);
  a.max_position_embeddings = c.int_or("max_position_embeddings", 32768);
  a.rope_scaling = c.get("rope_scaling");
  if (a.hidden <= 0 || a.layers <= 0 || a.heads <= 0 || a.vocab <= 0 || a.intermediate <= 0 || a.head_dim <= 0) {
    c.fail("hidden_size", "hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, head_dim and "
                          "vocab_size must be positive");
  }
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) {
    c.fail("num_key_value_heads", fmt::format("{} must divide num_attention_heads ({})", a.kv_heads, a.heads));
  }
  // mlx-lm takes the global mask from layer pattern - 1: it must exist.
  if (a.pattern <= 0 || a.pattern > a.layers) {
    c.fail("sliding_window_pattern", fmt::format("{} must be in 1..num_hidden_layers ({})", a.pattern, a.layers));
  }
  if (a.sliding_window <= 0) c.fail("sliding_window", fmt::format("{} must be positive", a.sliding_window));
  if (a.query_pre_attn_scalar <= 0) c.fail("query_pre_attn_scalar", "must be positive");
  return a;
}

// gemma3_text.clip_residual (a shapeless compile): a plain add unless float16, where the sum is
// taken in float32 and clipped to float16's range.
std::vector<mx::array> clip_residual_impl(const std::vector<mx::array>& in) {
  const auto &x = in[0], &y = in[1];
  if (x.dtype() != mx::float16) return {mx::add(x, y)};
  const float bound = 65504.0f;
  auto s = mx::add(mx::astype(x, mx::float32), mx::astype(y, mx::float32));
  return {mx::astype(mx::clip(s, mx::array(-bound), mx::array(bound)), mx::float16)};
}

mx::array clip_residual(const mx::array& x, const mx::array& y) {
  return mx::compile(clip_residual_impl, /*shapeless=*/true)({x, y})[0];
}

class Attention {
 public:
  Attention(const Gemma3Args& a, const LoadContext& ctx, const std::string& p, bool global)
      : q_(Linear::load(ctx, p + ".q_proj", a.hidden, a.heads * a.head_dim, false)),
        k_(Linear::load(ctx, p + ".k_proj", a.hidden, a.kv_heads * a.head_dim, false)),
        v_(Linear::load(ctx, p + ".v_proj", a.hidden, a.kv_heads * a.head_dim, false)),
        o_(Linear::load(ctx, p + ".o_proj", a.heads * a.head_dim, a.hidden, false)),
        q_norm_(GemmaRMSNorm::load(ctx, p + ".q_norm", a.head_dim, a.eps)),
        k_norm_(GemmaRMSNorm::load(ctx, p + ".k_norm", a.head_dim, a.eps)),
        rope_(global ? Rope::create({a.head_dim, a.rope_theta, false, a.max_position_embeddings}, a.rope_scaling)
                     : Rope::create({a.head_dim, a.rope_local_base, false, std::nullopt}, std::nullopt)),
        heads_(a.heads),
        kv_heads_(a.kv_heads),
        scale_(static_cast<float>(std::pow(a.query_pre_attn_scalar, -0.5))),
        fast_(ctx.fast) {}

  // `window`: the layer's sliding window (its mask's; a quantized cache's kernel applies it).
  mx::array operator()(const mx::array& x, const AttentionMask& mask, KVCacheBase* cache,
                       std::optional<int> window = std::nullopt) const {
    const int B = x.shape(0), L = x.shape(1);
    auto q = mx::transpose(mx::reshape(q_(x), {B, L, heads_, -1}), {0, 2, 1, 3});
    auto k = mx::transpose(mx::reshape(k_(x), {B, L, kv_heads_, -1}), {0, 2, 1, 3});
    auto v = mx::transpose(mx::reshape(v_(x), {B, L, kv_heads_, -1}), {0, 2, 1, 3});
    q = q_norm_(q);
    k = k_norm_(k);
    q = rope_.apply(q, cache);
    k = rope_.apply(k, cache);
    auto out = cached_attention(q, k, v, cache, scale_, mask, fast_, window);
    return o_(mx::reshape(mx::transpose(out, {0, 2, 1, 3}), {B, L, -1}));
  }

  void collect(std::vector<mx::array>& out) const {
    for (const auto* l : {&q_, &k_, &v_, &o_}) l->collect(out);
    q_norm_.collect(out);
    k_norm_.collect(out);
  }

  // The whole sub-block h + post_norm(attn(in_norm(h))) for the fused primitive.
  FusedAttentionLayer fused_layer(const GemmaRMSNorm& in_norm, const GemmaRMSNorm& post_norm,
                                  std::optional<int> window) const {
    return {in_norm.weight(), in_norm.eps(), q_, k_, v_, o_, &rope_, heads_, kv_heads_,
            static_cast<int>(q_norm_.weight().shape(0)), scale_, window, q_norm_.weight(), k_norm_.weight(),
            post_norm.weight()};
  }

 private:
  Linear q_, k_, v_, o_;
  GemmaRMSNorm q_norm_, k_norm_;
  Rope rope_;
  int heads_, kv_heads_;
  float scale_;
  kernels::FastPath fast_;  // null in parity mode (a quantized cache's attention kernel)
};

class Block {
 public:
  Block(const Gemma3Args& a, const LoadContext& ctx, const std::string& p, bool global)
      : fast_(ctx.fast),
        window_(global ? std::nullopt : std::optional<int>(a.sliding_window)),
        attn_(a, ctx, p + ".self_attn", global),
        mlp_(GeGLUMLP::load(ctx, p + ".mlp", a.hidden, a.intermediate)),
        input_norm_(GemmaRMSNorm::load(ctx, p + ".input_layernorm", a.hidden, a.eps)),
        post_attn_norm_(GemmaRMSNorm::load(ctx, p + ".post_attention_layernorm", a.hidden, a.eps)),
        pre_ff_norm_(GemmaRMSNorm::load(ctx, p + ".pre_feedforward_layernorm", a.hidden, a.eps)),
        post_ff_norm_(GemmaRMSNorm::load(ctx, p + ".post_feedforward_layernorm", a.hidden, a.eps)) {}

  mx::array operator()(const mx::array& x, const AttentionMask& mask, KVCacheBase* cache) const {
    std::optional<mx::array> h;
    // The fused block (float32 only, where clip_residual is a plain add).
    if (fast_ && input_norm_.eps() == post_attn_norm_.eps()) {
      h = fused_attention_block(x, attn_.fused_layer(input_norm_, post_attn_norm_, window_), cache, fast_);
    }
    if (!h) h = clip_residual(x, post_attn_norm_(attn_(input_norm_(x), mask, cache, window_)));
    return mlp_.residual(*h, pre_ff_norm_, post_ff_norm_, fast_, clip_residual);
  }

  // The layer as fused_decoder_stack takes it (float32, where clip_residual is a plain add).
  std::optional<FusedDecoderLayer> fused_layer() const {
    auto mlp = mlp_.fused_layer(pre_ff_norm_, post_ff_norm_);
    if (!mlp || input_norm_.eps() != post_attn_norm_.eps()) return std::nullopt;
    return FusedDecoderLayer{attn_.fused_layer(input_norm_, post_attn_norm_, window_), std::move(*mlp)};
  }

  void collect(std::vector<mx::array>& out) const {
    attn_.collect(out);
    mlp_.collect(out);
    for (const auto* n : {&input_norm_, &post_attn_norm_, &pre_ff_norm_, &post_ff_norm_}) n->collect(out);
  }

 private:
  kernels::FastPath fast_;
  std::optional<int> window_;  // sliding-window layers
  Attention attn_;
  GeGLUMLP mlp_;
  GemmaRMSNorm input_norm_, post_attn_norm_, pre_ff_norm_, post_ff_norm_;
};

class Gemma3Model final : public Model {
 public:
  Gemma3Model(Gemma3Args a, const LoadContext& ctx)
      : args_(std::move(a)),
        embed_(Embedding::load(ctx, args_.prefix + "model.embed_tokens", args_.vocab, args_.hidden)),
        norm_(GemmaRMSNorm::load(ctx, args_.prefix + "model.norm", args_.hidden, args_.eps)),
        fast_(ctx.fast) {
    for (int i = 0; i < args_.layers; ++i) {
      blocks_.emplace_back(args_, ctx, fmt::format("{}model.layers.{}", args_.prefix, i), args_.is_global(i));
    }
    // sanitize(): tied exactly when lm_head.weight is absent.
    if (ctx.weights.has(args_.prefix + "lm_head.weight")) {
      lm_head_ = Linear::load(ctx, args_.prefix + "lm_head", args_.hidden, args_.vocab, false);
    }
    if (!args_.prefix.empty()) {  // gemma3.sanitize pops the vision tower and projector
      for (const auto& name : ctx.weights.names()) {
        if (name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector.")) ctx.weights.drop(name);
      }
    }
    // h *= mx.array(hidden_size**0.5, mx.bfloat16).astype(h.dtype)
    embed_scale_ = mx::array(static_cast<float>(std::sqrt(static_cast<double>(args_.hidden))), mx::bfloat16);
  }

  mx::array operator()(const mx::array& ids, LayerCaches* caches) const override {
    auto h = hidden_states(ids, caches);
    return lm_head_ ? (*lm_head_)(h) : embed_.as_linear(h);
  }

  mx::array hidden_states(const mx::array& ids, LayerCaches* caches) const override {
    auto h = embed_(ids);
    h = mx::multiply(h, mx::astype(embed_scale_, h.dtype()));
    if (auto stacked = fused_decoder_stack(h, blocks_, caches, fast_)) {  // fast mode: one primitive
      h = *stacked;
    } else {
      const int n = h.shape(1);
      auto cache_at = [&](int i) -> KVCacheBase* { return caches ? (*caches)[i].get() : nullptr; };
      AttentionMask global_mask = create_attention_mask(n, cache_at(args_.pattern - 1));
      AttentionMask sliding_mask;
      if (args_.pattern > 1) sliding_mask = create_attention_mask(n, cache_at(0), args_.sliding_window);
      for (int i = 0; i < args_.layers; ++i) {
        h = blocks_[i](h, args_.is_global(i) ? global_mask : sliding_mask, cache_at(i));
      }
    }
    return norm_(h);
  }

  LayerCaches make_cache() const override {
    LayerCaches c;
    for (int i = 0; i < args_.layers; ++i) {
      c.push_back(layer_cache(args_.is_global(i) ? std::nullopt : std::optional(args_.sliding_window), fast_));
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
  Gemma3Args args_;
  Embedding embed_;
  std::vector<Block> blocks_;
  GemmaRMSNorm norm_;
  std::optional<Linear> lm_head_;
  kernels::FastPath fast_;
  mx::array embed_scale_ = mx::array(1.0f);
};

}  // namespace

std::unique_ptr<Model> load_gemma3(const Checkpoint& ckpt, const LoadContext& ctx) {
  return std::make_unique<Gemma3Model>(Gemma3Args::parse(ckpt.config()), ctx);
}

}  // namespace mlxcpp
