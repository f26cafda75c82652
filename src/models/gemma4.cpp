// Gemma 4 text family. Ports mlx_lm/models/gemma4_text.py, and gemma4.py (the multimodal
// checkpoint: text_config nested, weights under language_model., vision/audio weights dropped).
// Reads: hidden_size, num_hidden_layers, intermediate_size, num_attention_heads,
// num_key_value_heads, num_global_key_value_heads, head_dim, global_head_dim, rms_norm_eps,
// vocab_size, vocab_size_per_layer_input, hidden_size_per_layer_input, num_kv_shared_layers,
// rope_traditional, rope_parameters, sliding_window, sliding_window_pattern, layer_types,
// max_position_embeddings, attention_k_eq_v, final_logit_softcapping, use_double_wide_mlp,
// enable_moe_block, num_experts, top_k_experts, moe_intermediate_size, tie_word_embeddings
// (defaults as mlx-lm's ModelArgs).
// KV sharing: the last num_kv_shared_layers layers keep no cache; each attends over the keys and
// values its donor (the last earlier layer of its type) fetched this step, so make_cache has one
// cache per donor layer only, as mlx-lm's.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <mlx/compile.h>
#include <mlx/fast.h>
#include <mlx/ops.h>

#include "cache/batch_kv_cache.h"
#include "cache/batch_quantized_kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "kernels/quant_attention.h"
#include "models/registry.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/fused_attention.h"
#include "nn/geglu.h"
#include "nn/gemma4_moe.h"
#include "nn/norm.h"
#include "nn/per_layer_inputs.h"
#include "nn/rope.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

struct Gemma4Args {
  std::string prefix;  // "" for gemma4_text, "language_model." for gemma4
  std::string file, rope_field;  // config.json, and rope_parameters' dotted path in it
  int hidden = 0, layers = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, global_head_dim = 0;
  std::optional<int> global_kv_heads;
  int vocab = 0, vocab_per_layer = 0, per_layer_dim = 0, kv_shared = 0, sliding_window = 512;
  float eps = 1e-6f;
  bool rope_traditional = false, k_eq_v = false, double_wide = true, tie = true, moe = false;
  int experts = 0, top_k = 0, moe_intermediate = 0;  // enable_moe_block
  std::optional<double> softcap;
  int64_t max_position_embeddings = 131072;
  std::vector<bool> full;  // layer_types: full_attention (else sliding_attention)
  std::shared_ptr<nlohmann::json> rope_parameters;  // {"full_attention": {...}, "sliding_attention": {...}}

  int first_shared() const { return layers - kv_shared; }
  // previous_kvs: the layer whose keys and values layer j attends over (j itself, or for a
  // KV-shared layer the last donor layer of its type).
  int donor(int j) const {
    int d = j;
    for (int i = 0; j >= first_shared() && i < first_shared(); ++i) {
      if (full[i] == full[j]) d = i;
    }
    return d;
  }
  bool lends(int i) const {
    for (int j = first_shared(); j < layers; ++j) {
      if (donor(j) == i) return true;
    }
    return false;
  }
  static Gemma4Args parse(const JsonView& root);
};

Gemma4Args Gemma4Args::parse(const JsonView& root) {
  Gemma4Args a;
  const bool nested = root.req_string("model_type") == "gemma4";
  // gemma4.ModelArgs.__post_init__: vocab_size from the outer config; heads default 8 / 1.
  const JsonView c = nested ? root.at("text_config") : root;
  a.prefix = nested ? "language_model." : "";
  a.file = c.file();
  a.rope_field = c.field("rope_parameters");
  a.vocab = nested ? root.int32_or("vocab_size", 262144) : c.int32_or("vocab_size", 262144);
  a.hidden = c.int32_or("hidden_size", 1536);
  a.layers = c.int32_or("num_hidden_layers", 35);
  a.intermediate = c.int32_or("intermediate_size", 6144);
  a.heads = c.int32_or("num_attention_heads", 8);
  a.kv_heads = c.int32_or("num_key_value_heads", 1);
  if (c.has("num_global_key_value_heads")) a.global_kv_heads = c.req_int32("num_global_key_value_heads");
  a.head_dim = c.int32_or("head_dim", 256);
  a.global_head_dim = c.int32_or("global_head_dim", 512);
  if (a.global_head_dim == 0) a.global_head_dim = a.head_dim;  // Python: `and config.global_head_dim`
  a.eps = static_cast<float>(c.number_or("rms_norm_eps", 1e-6));
  a.vocab_per_layer = c.int32_or("vocab_size_per_layer_input", 262144);
  a.per_layer_dim = c.int32_or("hidden_size_per_layer_input", 256);
  a.kv_shared = c.int32_or("num_kv_shared_layers", 20);
  a.rope_traditional = c.bool_or("rope_traditional", false);
  a.sliding_window = c.int32_or("sliding_window", 512);
  a.max_position_embeddings = c.int_or("max_position_embeddings", 131072);
  a.k_eq_v = c.bool_or("attention_k_eq_v", false);
  a.double_wide = c.bool_or("use_double_wide_mlp", true);
  a.tie = c.bool_or("tie_word_embeddings", true);
  // final_logit_softcapping: 30.0 by default, none when null.
  if (!c.node().contains("final_logit_softcapping")) a.softcap = 30.0;
  else if (c.has("final_logit_softcapping")) a.softcap = c.req_number("final_logit_softcapping");
  a.moe = c.bool_or("enable_moe_block", false);
  if (a.moe) {
    a.experts = c.req_int32("num_experts");
    a.top_k = c.req_int32("top_k_experts");
    a.moe_intermediate = c.req_int32("moe_intermediate_size");
    if (a.experts <= 0) c.fail("num_experts", fmt::format("{} must be positive", a.experts));
    if (a.top_k <= 0 || a.top_k > a.experts) {
      c.fail("top_k_experts", fmt::format("{} must be in 1..num_experts ({})", a.top_k, a.experts));
    }
    if (a.moe_intermediate <= 0) {
      c.fail("moe_intermediate_size", fmt::format("{} must be positive", a.moe_intermediate));
    }
  }
  if (a.hidden <= 0 || a.layers <= 0 || a.heads <= 0 || a.vocab <= 0 || a.intermediate <= 0 || a.head_dim <= 0 ||
      a.global_head_dim <= 0) {
    c.fail("hidden_size", "hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, head_dim, "
                          "global_head_dim and vocab_size must be positive");
  }
  for (auto [field, kv] : {std::pair{"num_key_value_heads", std::optional<int>(a.kv_heads)},
                           std::pair{"num_global_key_value_heads", a.global_kv_heads}}) {
    if (kv && (*kv <= 0 || a.heads % *kv != 0)) {
      c.fail(field, fmt::format("{} must divide num_attention_heads ({})", *kv, a.heads));
    }
  }
  if (a.per_layer_dim < 0) c.fail("hidden_size_per_layer_input", fmt::format("{} is negative", a.per_layer_dim));
  if (a.per_layer_dim > 0 && a.vocab_per_layer <= 0) {
    c.fail("vocab_size_per_layer_input", fmt::format("{} must be positive", a.vocab_per_layer));
  }
  if (a.sliding_window <= 0) c.fail("sliding_window", fmt::format("{} must be positive", a.sliding_window));
  if (a.softcap && *a.softcap <= 0) c.fail("final_logit_softcapping", "must be positive or null");

  if (c.has("layer_types")) {
    const auto& lt = c.node()["layer_types"];
    if (!lt.is_array() || lt.size() < static_cast<size_t>(a.layers)) {
      c.fail("layer_types", fmt::format("expected a list of at least num_hidden_layers ({}) names", a.layers));
    }
    for (int i = 0; i < a.layers; ++i) {
      const auto t = lt[i].is_string() ? lt[i].get<std::string>() : std::string();
      if (t != "full_attention" && t != "sliding_attention") {
        c.fail("layer_types", fmt::format("entry {}: '{}' is not supported (known: full_attention, "
                                          "sliding_attention)", i, t));
      }
      a.full.push_back(t == "full_attention");
    }
  } else {
    const int pattern = c.int32_or("sliding_window_pattern", 5);
    if (pattern <= 0) c.fail("sliding_window_pattern", fmt::format("{} must be positive", pattern));
    for (int i = 0; i < a.layers; ++i) a.full.push_back(i % pattern == pattern - 1);
  }

  if (a.kv_shared < 0 || a.kv_shared >= a.layers) {
    c.fail("num_kv_shared_layers",
           fmt::format("{} must be in 0..num_hidden_layers - 1 ({})", a.kv_shared, a.layers - 1));
  }
  for (int j = a.first_shared(); j < a.layers; ++j) {
    bool donor = false;
    for (int i = 0; i < a.first_shared(); ++i) donor = donor || a.full[i] == a.full[j];
    if (!donor) {
      c.fail("num_kv_shared_layers", fmt::format("shared layer {} ({}) has no earlier layer of its type to read", j,
                                                 a.full[j] ? "full_attention" : "sliding_attention"));
    }
  }

  if (c.has("rope_parameters")) {
    const auto& rp = c.node()["rope_parameters"];
    if (!rp.is_object()) c.fail("rope_parameters", "expected an object");
    a.rope_parameters = std::make_shared<nlohmann::json>(rp);
  } else {
    a.rope_parameters = std::make_shared<nlohmann::json>(nlohmann::json{
        {"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}, {"rope_type", "proportional"}}},
        {"sliding_attention", {{"partial_rotary_factor", 1.0}, {"rope_theta", 10000.0}, {"rope_type", "default"}}}});
  }
  for (const char* key : {"full_attention", "sliding_attention"}) {
    if (!a.rope_parameters->contains(key)) (*a.rope_parameters)[key] = nlohmann::json::object();
    if (!(*a.rope_parameters)[key].is_object()) c.fail(std::string("rope_parameters.") + key, "expected an object");
  }
  return a;
}

// gemma4_text.logit_softcap (a shapeless mx.compile): tanh(x / softcap) * softcap, the cap passed
// as a float32 scalar.
std::vector<mx::array> softcap_impl(const std::vector<mx::array>& in) {
  return {mx::multiply(mx::tanh(mx::divide(in[1], in[0])), in[0])};
}

// A Python float operand of an array op: a scalar of the array's dtype.
mx::array scalar(double v, mx::Dtype d) { return mx::array(static_cast<float>(v), d); }

// Where a layer's queries rotate from: the donor cache's offset before this step's write.
struct RopeOffset {
  int offset = 0;
  std::optional<mx::array> rows;  // a batch cache's per-row offsets
};

// The keys and values a donor layer attended over this step (its cache's fetch), for the
// KV-shared layers of its type.
struct SharedKV {
  std::optional<mx::array> k, v;                       // plain
  std::optional<std::pair<QuantizedRows, QuantizedRows>> quantized;  // a quantized cache's fetch
  int group_size = 0, bits = 0;
  RopeOffset offset;
  // Fast mode, a sliding layer's plain cache: the keys before this one are out of every new
  // query's window (the shared layers slice them and their mask's columns off).
  int key_start = 0;
  // The rows' left padding where the donor's mask is causal, its window and that padding (a
  // plain or quantized cache, single or batched without pending right padding): what our
  // attention kernel applies itself. nullopt: another cache (the mask as it is, stock ops).
  std::optional<std::vector<int>> padding;
};

std::optional<std::vector<int>> kernel_padding(KVCacheBase* cache) {
  if (dynamic_cast<KVCache*>(cache) || dynamic_cast<QuantizedKVCache*>(cache)) return std::vector<int>{};
  if (auto* b = dynamic_cast<BatchKVCache*>(cache); b && !b->pending_right_padding()) return b->left_padding();
  if (auto* q = dynamic_cast<BatchQuantizedKVCache*>(cache); q && !q->pending_right_padding()) return q->left_padding();
  return std::nullopt;
}

class Attention {
 public:
  Attention(const Gemma4Args& a, const LoadContext& ctx, const std::string& p, int layer)
      : full_(a.full[layer]),
        has_kv_(layer < a.first_shared()),
        k_eq_v_(a.k_eq_v && full_),
        heads_(a.heads),
        kv_heads_(k_eq_v_ && a.global_kv_heads ? *a.global_kv_heads : a.kv_heads),
        head_dim_(full_ ? a.global_head_dim : a.head_dim),
        eps_(a.eps),
        fast_(ctx.fast),
        window_(full_ ? 0 : a.sliding_window),
        q_(Linear::load(ctx, p + ".q_proj", a.hidden, heads_ * head_dim_, false)),
        o_(Linear::load(ctx, p + ".o_proj", heads_ * head_dim_, a.hidden, false)),
        q_norm_(RMSNorm::load(ctx, p + ".q_norm", head_dim_, a.eps)),
        rope_(make_rope(a)) {
    if (has_kv_) {
      k_.emplace(Linear::load(ctx, p + ".k_proj", a.hidden, kv_heads_ * head_dim_, false));
      if (!k_eq_v_) v_.emplace(Linear::load(ctx, p + ".v_proj", a.hidden, kv_heads_ * head_dim_, false));
      k_norm_.emplace(RMSNorm::load(ctx, p + ".k_norm", head_dim_, a.eps));
      if (ctx.fast) v_norm_ones_ = mx::ones({head_dim_}, mx::float32);  // the fused block's v norm
    }
  }

  // The sub-block h + post_norm(attn(in_norm(h))) for the fused primitive: donor layers only (it
  // projects, norms and caches their keys and values; values = keys with attention_k_eq_v).
  std::optional<FusedAttentionLayer> fused_layer(const RMSNorm& in_norm, const RMSNorm& post_norm,
                                                 std::optional<int> window) const {
    if (!has_kv_ || !v_norm_ones_ || in_norm.eps() != eps_ || post_norm.eps() != eps_) return std::nullopt;
    FusedAttentionLayer l{in_norm.weight(), eps_, q_, *k_, v_ ? *v_ : *k_, o_, &rope_, heads_, kv_heads_, head_dim_,
                          1.0f, window, q_norm_.weight(), k_norm_->weight(), post_norm.weight()};
    l.v_norm = v_norm_ones_;
    return l;
  }

  // `shared`: in, the donor's fetch (KV-shared layers); out, this layer's (donor layers).
  mx::array operator()(const mx::array& x, const AttentionMask& mask, KVCacheBase* cache, SharedKV& shared) const {
    const int B = x.shape(0), L = x.shape(1);
    auto q = q_norm_(mx::reshape(q_(x), {B, L, heads_, head_dim_}));
    if (has_kv_) {
      auto k = mx::reshape((*k_)(x), {B, L, kv_heads_, head_dim_});
      auto v = v_ ? mx::reshape((*v_)(x), {B, L, kv_heads_, head_dim_}) : k;
      shared = SharedKV{};
      if (cache) shared.offset = {cache->offset(), cache->row_offsets()};
      k = rope(mx::transpose((*k_norm_)(k), {0, 2, 1, 3}), shared.offset);
      v = mx::transpose(mx::fast::rms_norm(v, std::nullopt, eps_), {0, 2, 1, 3});  // v_norm: no scale
      if (auto* qc = dynamic_cast<QuantizedFetch*>(cache)) {  // single or batched
        shared.quantized = qc->update_and_fetch_quantized(k, v);
        shared.group_size = qc->group_size();
        shared.bits = qc->bits();
      } else if (cache) {
        std::tie(k, v) = cache->update_and_fetch(k, v);
      }
      if (!shared.quantized) {
        shared.k = k;
        shared.v = v;
      }
      shared.padding = kernel_padding(cache);
    }
    q = rope(mx::transpose(q, {0, 2, 1, 3}), shared.offset);
    auto out = attend(q, mask, shared);
    return o_(mx::reshape(mx::transpose(out, {0, 2, 1, 3}), {B, L, -1}));
  }

  void collect(std::vector<mx::array>& out) const {
    q_.collect(out);
    o_.collect(out);
    q_norm_.collect(out);
    for (const auto* l : {&k_, &v_}) if (*l) (*l)->collect(out);
    if (k_norm_) k_norm_->collect(out);
    if (v_norm_ones_) out.push_back(*v_norm_ones_);
  }

 private:
  // Scale 1 (the q/k norms stand in for it); a quantized donor's rows as mlx-lm's quantized SDPA.
  // Fast path, a donor mask our attention kernel knows (SharedKV::padding): the kernel over the
  // donor's float or quantized rows, the sliding window and left padding its own (the rows span
  // the whole history: key j at position j), in place of MLX's CPU attention.
  mx::array attend(const mx::array& q, const AttentionMask& mask, const SharedKV& kv) const {
    if (fast_ && kv.padding) {
      const bool causal = mask.is_causal() || mask.is_array();
      std::vector<int> start = causal ? *kv.padding : std::vector<int>{};
      if (std::all_of(start.begin(), start.end(), [](int p) { return p == 0; })) start.clear();
      std::optional<mx::array> out;
      if (kv.quantized) {
        const auto& [k, v] = *kv.quantized;
        const mx::array kq[3] = {k.w, k.scales, k.biases}, vq[3] = {v.w, v.scales, v.biases};
        out = kernels::quantized_kv_attention(q, kq, vq, 1.0f, causal, kv.group_size, kv.bits, fast_,
                                              causal ? window_ : 0, std::move(start));
      } else {
        out = kernels::float_kv_attention(q, *kv.k, *kv.v, 1.0f, causal, fast_, causal ? window_ : 0, std::move(start));
      }
      if (out) return *out;
    }
    if (!kv.quantized && kv.key_start > 0 && mask.is_array()) {
      // From key_start on along `axis` (keys/values [B, H, S, D]: -2; the mask [..., S]: -1).
      auto tail = [&](const mx::array& a, int axis) {
        auto start = mx::Shape(a.ndim(), 0), stop = a.shape();
        start[a.ndim() + axis] = kv.key_start;
        return mx::slice(a, start, stop);
      };
      return scaled_dot_product_attention(q, tail(*kv.k, -2), tail(*kv.v, -2), 1.0f,
                                          AttentionMask::of(tail(*mask.array, -1)));
    }
    if (!kv.quantized) return scaled_dot_product_attention(q, *kv.k, *kv.v, 1.0f, mask);
    const auto& [k, v] = *kv.quantized;
    const mx::array kq[3] = {k.w, k.scales, k.biases}, vq[3] = {v.w, v.scales, v.biases};
    return quantized_attention(q, kq, vq, 1.0f, mask, kv.group_size, kv.bits);
  }
  Rope make_rope(const Gemma4Args& a) const {
    const char* key = full_ ? "full_attention" : "sliding_attention";
    const JsonView params(&(*a.rope_parameters)[key], a.file, a.rope_field + "." + key);
    return Rope::create({head_dim_, params.number_or("rope_theta", 10000.0), a.rope_traditional,
                         a.max_position_embeddings}, params);
  }
  mx::array rope(const mx::array& x, const RopeOffset& o) const {
    return o.rows ? rope_(x, *o.rows) : rope_(x, o.offset);
  }

  bool full_, has_kv_, k_eq_v_;
  int heads_, kv_heads_, head_dim_;
  float eps_;
  kernels::FastPath fast_;
  int window_;  // sliding layers' window, 0 on full-attention layers
  Linear q_, o_;
  std::optional<Linear> k_, v_;
  RMSNorm q_norm_;
  std::optional<RMSNorm> k_norm_;
  std::optional<mx::array> v_norm_ones_;  // fast mode, donor layers
  Rope rope_;
};

class Block {
 public:
  Block(const Gemma4Args& a, const LoadContext& ctx, const std::string& p, int layer)
      : fast_(ctx.fast),
        window_(a.full[layer] ? std::nullopt : std::optional<int>(a.sliding_window)),
        lends_(a.lends(layer)),
        attn_(a, ctx, p + ".self_attn", layer),
        gate_(load_mlp(a, ctx, p, layer, ".gate_proj")),
        up_(load_mlp(a, ctx, p, layer, ".up_proj")),
        down_(Linear::load(ctx, p + ".mlp.down_proj", mlp_width(a, layer), a.hidden, false)),
        input_norm_(RMSNorm::load(ctx, p + ".input_layernorm", a.hidden, a.eps)),
        post_attn_norm_(RMSNorm::load(ctx, p + ".post_attention_layernorm", a.hidden, a.eps)),
        pre_ff_norm_(RMSNorm::load(ctx, p + ".pre_feedforward_layernorm", a.hidden, a.eps)),
        post_ff_norm_(RMSNorm::load(ctx, p + ".post_feedforward_layernorm", a.hidden, a.eps)),
        layer_scalar_(ctx.take(p + ".layer_scalar", {1})) {
    if (a.per_layer_dim > 0) {
      pl_gate_.emplace(Linear::load(ctx, p + ".per_layer_input_gate", a.hidden, a.per_layer_dim, false));
      pl_proj_.emplace(Linear::load(ctx, p + ".per_layer_projection", a.per_layer_dim, a.hidden, false));
      pl_norm_.emplace(RMSNorm::load(ctx, p + ".post_per_layer_input_norm", a.hidden, a.eps));
    }
    if (a.moe) moe_.emplace(Gemma4Moe::load(ctx, p, a.hidden, {a.experts, a.top_k, a.moe_intermediate}, a.eps));
  }

  mx::array operator()(const mx::array& x, const AttentionMask& mask, KVCacheBase* cache, SharedKV& shared,
                       const std::optional<mx::array>& per_layer_input) const {
    std::optional<mx::array> fused;
    if (fast_) fused = fused_attention(x, cache, shared);
    auto h = fused ? *fused : mx::add(x, post_attn_norm_(attn_(input_norm_(x), mask, cache, shared)));
    h = mlp_residual(h);
    if (pl_gate_ && per_layer_input) {
      auto g = mx::multiply(gelu_approx((*pl_gate_)(h)), *per_layer_input);
      h = mx::add(h, (*pl_norm_)((*pl_proj_)(g)));
    }
    return mx::multiply(h, layer_scalar_);
  }

  void collect(std::vector<mx::array>& out) const {
    attn_.collect(out);
    for (const auto* l : {&gate_, &up_, &down_}) l->collect(out);
    for (const auto* n : {&input_norm_, &post_attn_norm_, &pre_ff_norm_, &post_ff_norm_}) n->collect(out);
    out.push_back(layer_scalar_);
    if (moe_) moe_->collect(out);
    if (pl_gate_) {
      pl_gate_->collect(out);
      pl_proj_->collect(out);
      pl_norm_->collect(out);
    }
  }

 private:
  // Fast path, a donor layer over a KVCache or BatchKVCache: the fused block (the window its own
  // mask); a layer that lends its keys and values reads them back from the cache for the shared
  // layers (which rotate from the offsets before the write, as mlx-lm's).
  std::optional<mx::array> fused_attention(const mx::array& x, KVCacheBase* cache, SharedKV& shared) const {
    auto* kv = dynamic_cast<KVCache*>(cache);
    auto* batch = dynamic_cast<BatchKVCache*>(cache);
    auto layer = attn_.fused_layer(input_norm_, post_attn_norm_, window_);
    if ((!kv && !batch) || !layer) return std::nullopt;
    const RopeOffset offset{cache->offset(), cache->row_offsets()};
    auto h = fused_attention_block(x, *layer, cache, fast_);
    if (h && lends_) {
      auto [k, v] = kv ? kv->keys_and_values() : batch->keys_and_values();
      shared = SharedKV{};
      shared.k = std::move(k);
      shared.v = std::move(v);
      shared.offset = offset;
      if (window_) shared.key_start = std::max(0, offset.offset - *window_ + 1);
      shared.padding = kernel_padding(cache);
    }
    return h;
  }

  // MLP: twice intermediate_size wide in the KV-shared layers when use_double_wide_mlp.
  static int mlp_width(const Gemma4Args& a, int layer) {
    const bool shared = a.first_shared() > 0 && layer >= a.first_shared();
    return a.intermediate * (a.double_wide && shared ? 2 : 1);
  }
  static Linear load_mlp(const Gemma4Args& a, const LoadContext& ctx, const std::string& p, int layer,
                         const char* name) {
    return Linear::load(ctx, p + ".mlp" + name, a.hidden, mlp_width(a, layer), false);
  }

  // h + post_ff(down(geglu(gate(n), up(n)))), n = pre_ff(h): one primitive on the fast path.
  mx::array mlp_residual(const mx::array& h) const {
    if (moe_) {
      auto n = pre_ff_norm_(h);
      auto h1 = moe_->post_ff_1()(down_(geglu(gate_(n), up_(n))));
      return mx::add(h, post_ff_norm_(mx::add(h1, (*moe_)(h))));
    }
    if (fast_ && pre_ff_norm_.eps() == post_ff_norm_.eps()) {
      auto g = gate_.block_view(), u = up_.block_view(), d = down_.block_view();
      if (g && u && d) {
        if (auto out = kernels::mlp_block(h, pre_ff_norm_.weight(), pre_ff_norm_.eps(), *g, *u, *d, fast_,
                                          kernels::GluActivation::kGeluApprox, post_ff_norm_.weight())) {
          return *out;
        }
      }
    }
    auto n = pre_ff_norm_(h);
    return mx::add(h, post_ff_norm_(down_(geglu(gate_(n), up_(n)))));
  }

  kernels::FastPath fast_;
  std::optional<int> window_;  // sliding-window layers
  bool lends_;                 // KV-shared layers read this layer's keys and values
  Attention attn_;
  Linear gate_, up_, down_;
  RMSNorm input_norm_, post_attn_norm_, pre_ff_norm_, post_ff_norm_;
  mx::array layer_scalar_;
  std::optional<Linear> pl_gate_, pl_proj_;
  std::optional<RMSNorm> pl_norm_;
  std::optional<Gemma4Moe> moe_;
};

// sanitize(): drops what mlx-lm drops (rotary tables, activation ranges, a shared layer's own
// k/v projections and k norm; gemma4: the vision and audio towers). The Hugging Face layout's
// names and fused experts are what `mlxcpp convert --hf` turns into an MLX snapshot.
void drop_unused(const Gemma4Args& a, const LoadContext& ctx) {
  for (const auto& name : ctx.weights.names()) {
    if (name.starts_with("model.language_model.") || name.ends_with(".experts.gate_up_proj")) {
      throw ConfigError(fmt::format("{}: tensor '{}' is in the Hugging Face layout; convert the checkpoint first "
                                    "(mlxcpp convert --hf DIR --out DIR)", ctx.weights.file_of(name), name));
    }
    bool drop = false;
    for (const char* s : {"self_attn.rotary_emb", "input_max", "input_min", "output_max", "output_min"}) {
      drop = drop || name.find(s) != std::string::npos;
    }
    for (const char* s : {"vision_tower", "multi_modal_projector", "audio_tower", "embed_audio", "embed_vision",
                          "vision_embedder"}) {
      drop = drop || (!a.prefix.empty() && name.starts_with(s));
    }
    for (int i = a.first_shared(); i < a.layers; ++i) {
      const auto p = fmt::format("{}model.layers.{}.self_attn.", a.prefix, i);
      for (const char* s : {"k_proj.", "v_proj.", "k_norm."}) drop = drop || name.starts_with(p + s);
    }
    if (drop) ctx.weights.drop(name);
  }
}

class Gemma4Model final : public Model {
 public:
  Gemma4Model(Gemma4Args a, const LoadContext& ctx)
      : args_(std::move(a)),
        embed_(Embedding::load(ctx, args_.prefix + "model.embed_tokens", args_.vocab, args_.hidden)),
        norm_(RMSNorm::load(ctx, args_.prefix + "model.norm", args_.hidden, args_.eps)),
        fast_(ctx.fast) {
    for (int i = 0; i < args_.layers; ++i) {
      blocks_.emplace_back(args_, ctx, fmt::format("{}model.layers.{}", args_.prefix, i), i);
    }
    if (args_.per_layer_dim > 0) {
      per_layer_.emplace(PerLayerInputs::load(ctx, args_.prefix + "model", args_.vocab_per_layer, args_.layers,
                                              args_.per_layer_dim, args_.hidden, args_.eps));
    }
    if (!args_.tie) lm_head_ = Linear::load(ctx, args_.prefix + "lm_head", args_.hidden, args_.vocab, false);
    for (int j = 0; j < args_.layers; ++j) donor_.push_back(args_.donor(j));
    if (args_.softcap) softcap_ = mx::array(static_cast<float>(*args_.softcap));
  }

  mx::array operator()(const mx::array& ids, LayerCaches* caches) const override {
    auto h = hidden_states(ids, caches);
    auto out = lm_head_ ? (*lm_head_)(h) : embed_.as_linear(h);
    if (softcap_) out = mx::compile(softcap_impl, true)({mx::astype(*softcap_, out.dtype()), out})[0];
    return out;
  }

  mx::array hidden_states(const mx::array& ids, LayerCaches* caches) const override {
    auto h = embed_(ids);
    h = mx::multiply(h, scalar(std::pow(static_cast<double>(args_.hidden), 0.5), h.dtype()));
    std::optional<mx::array> pli;
    if (per_layer_) pli = (*per_layer_)(ids, h);
    // Caches past the donor layers (a caller's one-per-layer list) are not used, as mlx-lm pads
    // its list with None there.
    auto cache_at = [&](int i) -> KVCacheBase* {
      return caches && i < args_.first_shared() && i < static_cast<int>(caches->size()) ? (*caches)[i].get()
                                                                                          : nullptr;
    };
    // _make_masks: each type's mask from the first layer of that type.
    const int n = h.shape(1);
    std::optional<AttentionMask> full_mask, sliding_mask;
    std::vector<SharedKV> kvs(args_.layers);
    for (int i = 0; i < args_.layers; ++i) {
      auto& mask = args_.full[i] ? full_mask : sliding_mask;
      if (!mask) {
        mask = args_.full[i] ? create_attention_mask(n, cache_at(i))
                             : create_attention_mask(n, cache_at(i), args_.sliding_window);
      }
      std::optional<mx::array> layer_input;
      if (pli) layer_input = PerLayerInputs::layer(*pli, i);
      kvs[i] = kvs[donor_[i]];
      h = blocks_[i](h, *mask, cache_at(i), kvs[i], layer_input);
    }
    return norm_(h);
  }

  LayerCaches make_cache() const override {
    LayerCaches c;
    for (int i = 0; i < args_.first_shared(); ++i) {  // the shared layers read their donors'
      c.push_back(layer_cache(args_.full[i] ? std::nullopt : std::optional(args_.sliding_window), fast_));
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
    if (per_layer_) per_layer_->collect(out);
    if (lm_head_) lm_head_->collect(out);
    return out;
  }

 private:
  Gemma4Args args_;
  Embedding embed_;
  std::vector<Block> blocks_;
  RMSNorm norm_;
  std::optional<PerLayerInputs> per_layer_;
  std::optional<Linear> lm_head_;
  std::vector<int> donor_;  // previous_kvs
  kernels::FastPath fast_;
  std::optional<mx::array> softcap_;
};

}  // namespace

std::unique_ptr<Model> load_gemma4(const Checkpoint& ckpt, const LoadContext& ctx) {
  auto args = Gemma4Args::parse(ckpt.config());
  drop_unused(args, ctx);
  return std::make_unique<Gemma4Model>(std::move(args), ctx);
}

}  // namespace mlxcpp
