// Dense llama family. Ports mlx_lm/models/llama.py (also mistral, which mlx-lm remaps to
// llama), qwen2.py (q/k/v bias, head_dim = hidden/heads), qwen3.py (per-head q/k RMSNorm
// before RoPE, head_dim required, no biases, no sliding layers), smollm3.py (NoPE layers),
// phi3.py (fused qkv_proj / gate_up_proj split at load, SuScaledRoPE, partial rotary) and
// minicpm.py (scaled embeddings, residuals and logits; see family_args.cpp), olmo2.py (q/k
// RMSNorm over the whole projection, no input norms: the branches' outputs normed before the
// residual add) and granite.py (multiplied embeddings/residuals, attention_multiplier as the
// scale, logits / logits_scaling), ministral3.py (queries * llama-4 attention temperature),
// mistral3.py's text model, qwen3_moe.py (qwen3 with sparse MLPs, nn/moe.h), glm4.py (q/k/v
// biases, fused gate_up_proj, input and output norms on both branches, partial traditional RoPE)
// and glm4_moe.py (q/k norms, partial RoPE, dense first layers then sparse MLPs).
// Reads: hidden_size, num_hidden_layers, intermediate_size, num_attention_heads,
// num_key_value_heads, head_dim, rms_norm_eps, vocab_size, rope_theta, rope_traditional,
// rope_scaling, max_position_embeddings, attention_bias, mlp_bias, tie_word_embeddings,
// layer_types, sliding_window, no_rope_layers, no_rope_layer_interval (+ family_args.cpp's).
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "cache/rotating_kv_cache.h"
#include "models/family_args.h"
#include "models/registry.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/fused_attention.h"
#include "nn/mlp.h"
#include "nn/moe.h"
#include "nn/norm.h"
#include "nn/rope.h"

namespace mx = mlx::core;

namespace mlxcpp {

LlamaArgs LlamaArgs::parse(const JsonView& c) {
  LlamaArgs a;
  a.model_type = c.req_string("model_type");
  const bool qwen2 = a.model_type == "qwen2";
  const bool qwen3_moe = a.model_type == "qwen3_moe";
  const bool qwen3 = a.model_type == "qwen3" || qwen3_moe;  // qwen3_moe: qwen3's attention
  const bool phi3 = a.model_type == "phi3", minicpm = a.model_type == "minicpm";
  const bool olmo2 = a.model_type == "olmo2", granite = a.model_type == "granite";
  const bool ministral3 = a.model_type == "ministral3";
  const bool glm4 = a.model_type == "glm4" || a.model_type == "glm4_moe";
  // Families whose mlx-lm file has no biases (ministral3 also head_dim or hidden / heads, and
  // sliding layers; the others head_dim = hidden / heads and no sliding layers).
  const bool plain = phi3 || minicpm || ministral3;
  a.qk_norm = qwen3;
  a.qk_norm_full = olmo2;
  if (olmo2) a.norms = {"", "", "post_attention_layernorm", "post_feedforward_layernorm"};
  a.hidden = c.req_int32("hidden_size");
  a.layers = c.req_int32("num_hidden_layers");
  a.intermediate = c.req_int32("intermediate_size");
  a.heads = c.req_int32("num_attention_heads");
  a.eps = static_cast<float>(c.req_number("rms_norm_eps"));
  a.vocab = c.req_int32("vocab_size");
  if (qwen2 || qwen3 || minicpm || granite || glm4) a.kv_heads = c.req_int32("num_key_value_heads");
  else a.kv_heads = c.int32_or("num_key_value_heads", a.heads);
  if (a.hidden <= 0 || a.layers <= 0 || a.heads <= 0 || a.vocab <= 0 || a.intermediate <= 0) {
    c.fail("hidden_size", "hidden_size, num_hidden_layers, num_attention_heads, intermediate_size and vocab_size must be positive");
  }
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) {
    c.fail("num_key_value_heads", fmt::format("{} must divide num_attention_heads ({})", a.kv_heads, a.heads));
  }
  a.head_dim = (qwen2 || phi3 || minicpm || granite) ? a.hidden / a.heads : (qwen3 || glm4) ? c.req_int32("head_dim") : c.int32_or("head_dim", a.hidden / a.heads);
  if (a.head_dim <= 0) c.fail("head_dim", "must be positive");
  a.qkv_bias = qwen2 ? true : (qwen3 || plain) ? false : c.bool_or("attention_bias", false);
  a.o_bias = (qwen2 || qwen3 || plain) ? false : a.qkv_bias;
  a.mlp_bias = (qwen2 || qwen3 || plain) ? false : c.bool_or("mlp_bias", false);
  a.tie = c.bool_or("tie_word_embeddings", !(phi3 || minicpm));  // phi3.py, minicpm.py: untied by default
  a.rope.dims = a.head_dim;
  a.rope.traditional = (qwen3 || granite) ? false : c.bool_or("rope_traditional", false);
  a.rope.max_position_embeddings = c.opt_int("max_position_embeddings");
  if (qwen2 && !a.rope.max_position_embeddings) a.rope.max_position_embeddings = 32768;
  a.rope_scaling = c.get("rope_scaling");
  if (qwen3) {
    // transformers >= 5 nests rope_theta and the scaling under rope_parameters.
    auto params = c.get("rope_parameters");
    const bool nested = params && params->node().is_object() && !params->node().empty();
    if (nested && !a.rope_scaling) a.rope_scaling = params;
    if (c.has("rope_theta")) a.rope.base = c.req_number("rope_theta");
    else if (nested && params->has("rope_theta")) a.rope.base = params->req_number("rope_theta");
    else c.fail("rope_theta", "missing from the model config");
    if (qwen3_moe) parse_qwen3_moe(c, a);
  } else if (phi3) {
    parse_phi3(c, a);
  } else if (minicpm) {
    parse_minicpm(c, a);
  } else if (granite) {
    parse_granite(c, a);
  } else if (ministral3) {
    parse_ministral3(c, a);
  } else if (glm4) {
    parse_glm4(c, a);
  } else {
    a.rope.base = c.number_or("rope_theta", qwen2 ? 1000000.0 : 10000.0);
  }

  a.sliding.assign(a.layers, false);
  a.use_rope.assign(a.layers, true);
  // qwen3.py ignores layer_types / sliding_window (every layer attends fully).
  const bool full_only = qwen2 || qwen3 || phi3 || minicpm || olmo2 || granite || glm4;  // no sliding layers in their mlx-lm files
  if (!full_only && c.has("layer_types")) {
    const auto& lt = c.node()["layer_types"];
    if (!lt.is_array() || lt.size() != static_cast<size_t>(a.layers)) {
      c.fail("layer_types", fmt::format("expected a list of {} layer types", a.layers));
    }
    for (int i = 0; i < a.layers; ++i) {
      auto t = lt[i].is_string() ? lt[i].get<std::string>() : std::string();
      if (t != "full_attention" && t != "sliding_attention") {
        c.fail("layer_types", fmt::format("entry {}: '{}' is not full_attention or sliding_attention", i, lt[i].dump()));
      }
      a.sliding[i] = t == "sliding_attention";
    }
  }
  if (!full_only) {
    if (auto w = c.opt_int("sliding_window")) a.sliding_window = static_cast<int>(*w);
  }
  if (a.model_type == "smollm3") {
    if (c.has("no_rope_layers")) {
      auto flags = c.int_list("no_rope_layers");
      if (flags.size() != static_cast<size_t>(a.layers)) c.fail("no_rope_layers", "length mismatch with num_hidden_layers");
      for (int i = 0; i < a.layers; ++i) a.use_rope[i] = flags[i] != 0;
    } else {
      int interval = c.int32_or("no_rope_layer_interval", 4);
      if (interval <= 0) c.fail("no_rope_layer_interval", "must be positive");
      for (int i = 0; i < a.layers; ++i) a.use_rope[i] = ((i + 1) % interval) != 0;
    }
  }
  return a;
}

namespace {

class Attention {
 public:
  Attention(const LlamaArgs& a, const LoadContext& ctx, const std::string& p, bool use_rope)
      : q_(Linear::load(ctx, p + ".q_proj", a.hidden, a.heads * a.head_dim, a.qkv_bias)),
        k_(Linear::load(ctx, p + ".k_proj", a.hidden, a.kv_heads * a.head_dim, a.qkv_bias)),
        v_(Linear::load(ctx, p + ".v_proj", a.hidden, a.kv_heads * a.head_dim, a.qkv_bias)),
        o_(Linear::load(ctx, p + ".o_proj", a.heads * a.head_dim, a.hidden, a.o_bias)),
        heads_(a.heads),
        kv_heads_(a.kv_heads),
        head_dim_(a.head_dim),
        scale_(static_cast<float>(a.attn_scale ? *a.attn_scale : std::pow(static_cast<double>(a.head_dim), -0.5))),
        full_qk_norm_(a.qk_norm_full),
        llama4_beta_(a.llama4_beta),
        llama4_original_max_(a.llama4_original_max),
        fast_(ctx.fast) {
    if (use_rope) rope_ = Rope::create(a.rope, a.rope_scaling);
    if (a.qk_norm || a.qk_norm_full) {
      q_norm_ = RMSNorm::load(ctx, p + ".q_norm", a.qk_norm_full ? a.heads * a.head_dim : a.head_dim, a.eps);
      k_norm_ = RMSNorm::load(ctx, p + ".k_norm", a.qk_norm_full ? a.kv_heads * a.head_dim : a.head_dim, a.eps);
    }
  }

  mx::array operator()(const mx::array& x, const AttentionMask& mask, KVCacheBase* cache) const {
    const int B = x.shape(0), L = x.shape(1);
    auto heads = [&](const mx::array& t, int n, const std::optional<RMSNorm>& norm = std::nullopt) {
      if (full_qk_norm_ && norm) return mx::transpose(mx::reshape((*norm)(t), {B, L, n, -1}), {0, 2, 1, 3});  // olmo2
      auto r = mx::reshape(t, {B, L, n, -1});
      return mx::transpose(norm ? (*norm)(r) : r, {0, 2, 1, 3});  // qwen3: the norm before the transpose
    };
    auto q = heads(q_(x), heads_, q_norm_);
    auto k = heads(k_(x), kv_heads_, k_norm_);
    auto v = heads(v_(x), kv_heads_);
    if (rope_) {
      q = rope_->apply(q, cache);
      k = rope_->apply(k, cache);
    }
    if (llama4_beta_) q = mx::multiply(q, llama4_attn_scale(L, cache, q.dtype()));
    auto out = cached_attention(q, k, v, cache, scale_, mask, fast_);
    return o_(mx::reshape(mx::transpose(out, {0, 2, 1, 3}), {B, L, -1}));
  }

  void collect(std::vector<mx::array>& out) const {
    for (const auto* l : {&q_, &k_, &v_, &o_}) l->collect(out);
    if (q_norm_) q_norm_->collect(out);
    if (k_norm_) k_norm_->collect(out);
  }

  FusedAttentionLayer fused_layer(const RMSNorm& norm) const {
    FusedAttentionLayer f{norm.weight(), norm.eps(), q_, k_, v_, o_, rope_ ? &*rope_ : nullptr, heads_, kv_heads_,
                          head_dim_, scale_};
    if (q_norm_) {
      f.q_norm = q_norm_->weight();
      f.k_norm = k_norm_->weight();
      f.qk_norm_full = full_qk_norm_;
    }
    if (llama4_beta_) {
      f.llama4_beta = static_cast<float>(*llama4_beta_);
      f.llama4_original_max = llama4_original_max_;
    }
    return f;
  }

 private:
  Linear q_, k_, v_, o_;
  std::optional<RMSNorm> q_norm_, k_norm_;
  std::optional<Rope> rope_;
  int heads_, kv_heads_, head_dim_;
  float scale_;
  bool full_qk_norm_;  // olmo2: q_norm_/k_norm_ span every head (the fused blocks norm per head)
  std::optional<double> llama4_beta_;  // ministral3
  int llama4_original_max_;
  kernels::FastPath fast_;  // null in parity mode (a quantized cache's attention kernel)

  // ministral3.py's _get_llama_4_attn_scale(L, offset, beta, original_max).astype(dtype):
  // [L, 1], or [B, 1, L, 1] at a batch cache's per-row offsets.
  mx::array llama4_attn_scale(int L, const KVCacheBase* cache, mx::Dtype dtype) const {
    auto pos = mx::arange(L, mx::int32);
    auto rows = cache ? cache->row_offsets() : std::nullopt;
    if (rows) pos = mx::add(pos, mx::reshape(*rows, {-1, 1}));
    else pos = mx::add(pos, mx::array(cache ? cache->offset() : 0, mx::int32));
    auto f = mx::floor(mx::divide(pos, mx::array(llama4_original_max_, mx::int32)));
    auto s = mx::add(mx::array(1.0f), mx::multiply(mx::array(static_cast<float>(*llama4_beta_)),
                                                     mx::log(mx::add(mx::array(1.0f), f))));
    s = rows ? mx::expand_dims(s, {1, 3}) : mx::expand_dims(s, 1);
    return mx::astype(s, dtype);
  }
};

// A layer's attention mask, made on first use: layers that only the fused blocks attend (all of
// a ragged batch's, whose cache makes no mask) never ask for it.
class LazyMask {
 public:
  explicit LazyMask(std::function<AttentionMask()> make) : make_(std::move(make)) {}
  const AttentionMask& get() const {
    if (!mask_) mask_ = make_();
    return *mask_;
  }

 private:
  std::function<AttentionMask()> make_;
  mutable std::optional<AttentionMask> mask_;
};

// One decoder layer: attention then MLP (dense, or sparse where the config puts experts), each
// branch with its input and/or output norm as LlamaArgs::Norms names them.
class Block {
 public:
  Block(const LlamaArgs& a, const LoadContext& ctx, int i)
      : attn_(a, ctx, fmt::format("model.layers.{}.self_attn", i), a.use_rope[i]),
        attn_in_(norm(a, ctx, i, a.norms.attn_in)),
        mlp_in_(norm(a, ctx, i, a.norms.mlp_in)),
        attn_out_(norm(a, ctx, i, a.norms.attn_out)),
        mlp_out_(norm(a, ctx, i, a.norms.mlp_out)),
        fast_(ctx.fast),
        sliding_(a.sliding[i]),
        residual_scale_(static_cast<float>(a.residual_scale)) {
    const auto mlp = fmt::format("model.layers.{}.mlp", i);
    if (a.moe && a.moe_layers[i]) moe_ = SparseMoe::load(ctx, mlp, a.hidden, *a.moe);
    else mlp_ = SwiGLUMLP::load(ctx, mlp, a.hidden, a.intermediate, a.mlp_bias);
  }

  mx::array operator()(const mx::array& x, const LazyMask& mask, KVCacheBase* cache) const {
    std::optional<mx::array> h;
    if (fast_ && !sliding_) h = fused_attention_block(x, attn_layer(), cache, fast_);
    if (!h) {
      auto r = attn_(attn_in_ ? (*attn_in_)(x) : x, mask.get(), cache);
      h = mx::add(x, scaled(attn_out_ ? (*attn_out_)(r) : r));
    }
    if (moe_) return moe_->residual(*h, *mlp_in_);
    if (mlp_in_ && !mlp_out_) return mlp_->residual(*h, *mlp_in_, fast_, residual_scale_);
    auto r = (*mlp_)(mlp_in_ ? (*mlp_in_)(*h) : *h);
    return mx::add(*h, scaled(mlp_out_ ? (*mlp_out_)(r) : r));  // olmo2, glm4
  }

  // The layer as fused_decoder_stack takes it (the fused blocks skip sliding-window layers,
  // whose rotating caches they don't cover, and sparse MLPs).
  std::optional<FusedDecoderLayer> fused_layer() const {
    if (sliding_ || moe_) return std::nullopt;
    auto mlp = mlp_->fused_layer(mlp_in_ ? *mlp_in_ : *mlp_out_, residual_scale_);
    mlp.pre_norm = mlp_in_.has_value();
    if (mlp_out_) mlp.post_norm = mlp_out_->weight();
    return FusedDecoderLayer{attn_layer(), std::move(mlp)};
  }

  void collect(std::vector<mx::array>& out) const {
    attn_.collect(out);
    if (mlp_) mlp_->collect(out);
    if (moe_) moe_->collect(out);
    for (const auto* n : {&attn_in_, &mlp_in_, &attn_out_, &mlp_out_}) {
      if (*n) (*n)->collect(out);
    }
  }

 private:
  Attention attn_;
  std::optional<SwiGLUMLP> mlp_;
  std::optional<SparseMoe> moe_;
  std::optional<RMSNorm> attn_in_, mlp_in_, attn_out_, mlp_out_;
  kernels::FastPath fast_;  // null in parity mode
  bool sliding_;
  float residual_scale_;  // minicpm: x + r * (scale_depth / sqrt(layers)); 1 elsewhere

  static std::optional<RMSNorm> norm(const LlamaArgs& a, const LoadContext& ctx, int i, const std::string& name) {
    if (name.empty()) return std::nullopt;
    return RMSNorm::load(ctx, fmt::format("model.layers.{}.{}", i, name), a.hidden, a.eps);
  }
  // r * residual_scale (a Python float: weakly typed, so r keeps its dtype); r itself at 1.
  mx::array scaled(const mx::array& r) const {
    return residual_scale_ == 1.f ? r : mx::multiply(r, mx::array(residual_scale_, r.dtype()));
  }
  FusedAttentionLayer attn_layer() const {
    auto f = attn_.fused_layer(attn_in_ ? *attn_in_ : *attn_out_);
    f.residual_scale = residual_scale_;
    f.pre_norm = attn_in_.has_value();
    if (attn_out_) f.post_norm = attn_out_->weight();
    return f;
  }
};

class LlamaModel final : public Model {
 public:
  LlamaModel(LlamaArgs a, const LoadContext& ctx)
      : args_(std::move(a)),
        embed_(Embedding::load(ctx, "model.embed_tokens", args_.vocab, args_.hidden)),
        norm_(RMSNorm::load(ctx, "model.norm", args_.hidden, args_.eps)),
        fast_(ctx.fast) {
    for (int i = 0; i < args_.layers; ++i) blocks_.emplace_back(args_, ctx, i);
    if (args_.tie) {
      for (const char* s : {".weight", ".scales", ".biases"}) ctx.weights.drop(std::string("lm_head") + s);
    } else {
      lm_head_ = Linear::load(ctx, "lm_head", args_.hidden, args_.vocab, false);
    }
    for (int i = 0; i < args_.layers; ++i) {
      ctx.weights.drop(fmt::format("model.layers.{}.self_attn.rotary_emb.inv_freq", i));
    }
    for (int i = 0; i < args_.layers; ++i) {
      if (!args_.sliding[i]) { fa_idx_ = fa_idx_ < 0 ? i : fa_idx_; }
      else if (swa_idx_ < 0) swa_idx_ = i;
    }
    if (fa_idx_ < 0) fa_idx_ = 0;  // mlx-lm requires one full-attention layer; be lenient
  }

  mx::array operator()(const mx::array& ids, LayerCaches* caches) const override {
    return head(hidden_states(ids, caches));
  }

  mx::array hidden_states(const mx::array& ids, LayerCaches* caches) const override {
    auto h = embed_(ids);
    if (args_.embed_scale != 1.0) h = mx::multiply(h, mx::array(args_.embed_scale, h.dtype()));  // minicpm, granite
    if (auto stacked = fused_decoder_stack(h, blocks_, caches, fast_)) {  // fast mode: one primitive
      h = *stacked;
    } else {
      const int n = h.shape(1);
      auto cache_at = [&](int i) -> KVCacheBase* { return caches ? (*caches)[i].get() : nullptr; };
      LazyMask fa_mask([&] { return create_attention_mask(n, cache_at(fa_idx_)); });
      LazyMask swa_mask([&] { return create_attention_mask(n, cache_at(swa_idx_), args_.sliding_window); });
      for (int i = 0; i < args_.layers; ++i) {
        h = blocks_[i](h, args_.sliding[i] ? swa_mask : fa_mask, cache_at(i));
      }
    }
    return norm_(h);
  }

  LayerCaches make_cache() const override {
    LayerCaches c;
    for (int i = 0; i < args_.layers; ++i) {
      if (args_.sliding[i]) c.push_back(std::make_unique<RotatingKVCache>(args_.sliding_window.value_or(4096)));
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
  mx::array head(mx::array h) const {
    // minicpm's (untied) head divides by hidden_size / dim_model_base first.
    if (lm_head_ && args_.logit_divisor != 1.0) h = mx::divide(h, mx::array(args_.logit_divisor, h.dtype()));
    auto logits = lm_head_ ? (*lm_head_)(h) : embed_.as_linear(h);
    if (args_.logits_scaling == 1.0) return logits;
    return mx::divide(logits, mx::array(args_.logits_scaling, logits.dtype()));  // granite
  }

  LlamaArgs args_;
  Embedding embed_;
  std::vector<Block> blocks_;
  RMSNorm norm_;
  std::optional<Linear> lm_head_;
  kernels::FastPath fast_;  // null in parity mode
  int fa_idx_ = -1, swa_idx_ = -1;
};

}  // namespace

std::unique_ptr<Model> load_llama(const Checkpoint& ckpt, const LoadContext& ctx) {
  const JsonView& root = ckpt.config();
  const bool mistral3 = root.req_string("model_type") == "mistral3";
  // mistral3.py: the text model of text_config (ministral3.py's, else llama.py's; mistral4 is
  // not supported), untied unless text_config says otherwise.
  if (mistral3 && root.at("text_config").req_string("model_type") == "mistral4") {
    root.at("text_config").fail("model_type", "mistral4 is not supported");
  }
  auto args = LlamaArgs::parse(mistral3 ? root.at("text_config") : root);
  if (mistral3 && !root.at("text_config").has("tie_word_embeddings")) args.tie = false;
  if (args.fused_qkv || args.fused_gate_up) split_fused_projections(ctx.weights, args);
  stack_experts(ctx.weights, args);
  if (args.model_type == "minicpm") minicpm_default_head(ctx.weights, args);
  if (mistral3) mistral3_text_weights(ctx.weights);
  return std::make_unique<LlamaModel>(std::move(args), ctx);
}

}  // namespace mlxcpp
