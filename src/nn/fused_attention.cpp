#include "nn/fused_attention.h"

#include <algorithm>

#include "cache/batch_kv_cache.h"
#include "cache/batch_quantized_kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "cache/ragged_kv_cache.h"
#include "cache/rotating_kv_cache.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// The caches the block kernels write: a plain KVCache (its mask is causal, or none for one
// token, or for a sliding-window layer causal within the window: the kernel applies either), a
// BatchKVCache (the same per row, its left padding skipped), a RaggedKVCache (each row its
// own buffer), or a quantized cache (QuantizedKVCache, BatchQuantizedKVCache: six buffers).
class CacheRef {
 public:
  // For x [batch, n, d].
  static std::optional<CacheRef> of(KVCacheBase* cache, int batch, int n) {
    if (auto* kv = dynamic_cast<KVCache*>(cache)) return CacheRef(kv, nullptr, nullptr, nullptr, nullptr);
    if (auto* rc = dynamic_cast<RaggedKVCache*>(cache)) {
      if (rc->batch_size() != batch) return std::nullopt;
      return CacheRef(nullptr, nullptr, rc, nullptr, nullptr);
    }
    if (auto* qc = dynamic_cast<QuantizedKVCache*>(cache)) return CacheRef(nullptr, nullptr, nullptr, qc, qc);
    BatchCacheBase* bc = dynamic_cast<BatchKVCache*>(cache);
    auto* bq = dynamic_cast<BatchQuantizedKVCache*>(cache);
    if (bq) bc = bq;
    if (bc == nullptr || bc->batch_size() != batch) return std::nullopt;
    if (bq ? bq->pending_right_padding() : static_cast<BatchKVCache*>(bc)->pending_right_padding()) return std::nullopt;
    // Row b's tokens are cache rows left_padding[b].. (a padded prompt's padding may still be
    // among the n rows to write); its next position is offsets()[b].
    for (int b = 0; b < batch; ++b) {
      const int pad = bc->left_padding()[b];
      if (pad < 0 || pad > bc->offset() + n || bc->offsets()[b] != bc->offset() - pad) return std::nullopt;
    }
    if (bq) return CacheRef(nullptr, nullptr, nullptr, bq, bq);
    return CacheRef(nullptr, static_cast<BatchKVCache*>(bc), nullptr, nullptr, nullptr);
  }
  KVCacheBase* base() const {
    if (kv_) return kv_;
    if (batch_) return batch_;
    if (ragged_) return ragged_;
    return quant_base_;
  }
  RaggedKVCache* ragged() const { return ragged_; }
  QuantizedBlockCache* quantized() const { return quant_; }
  // The rows' left padding; empty where there is none.
  std::vector<int> left_padding() const {
    const auto* bc = batch_ ? static_cast<const BatchCacheBase*>(batch_) : dynamic_cast<const BatchCacheBase*>(quant_base_);
    if (!bc) return {};
    const auto& lp = bc->left_padding();
    if (std::all_of(lp.begin(), lp.end(), [](int p) { return p == 0; })) return {};
    return lp;
  }
  bool exclusive() const { return kv_ ? kv_->exclusive() : batch_ ? batch_->exclusive() : quant_->exclusive(); }
  // The buffers, grown for n more rows and handed over: keys and values, or a quantized cache's six.
  std::vector<mx::array> take(int batch, int heads, int n, int dim, mx::Dtype dtype) const {
    if (quant_) {
      auto b = quant_->take_for_update(batch, heads, n, dim, dtype);
      return {b.begin(), b.end()};
    }
    auto [k, v] = kv_ ? kv_->take_for_update(batch, heads, n, dim, dim, dtype)
                      : batch_->take_for_update(heads, n, dim, dim, dtype);
    return {std::move(k), std::move(v)};
  }
  void commit(std::vector<mx::array> b, int n, bool exclusive) const {
    if (quant_) {
      quant_->commit_update({std::move(b[0]), std::move(b[1]), std::move(b[2]), std::move(b[3]), std::move(b[4]),
                             std::move(b[5])},
                            n, exclusive);
    } else if (kv_) {
      kv_->commit_update(std::move(b[0]), std::move(b[1]), n, exclusive);
    } else {
      batch_->commit_update(std::move(b[0]), std::move(b[1]), n, exclusive);
    }
  }

 private:
  CacheRef(KVCache* kv, BatchKVCache* batch, RaggedKVCache* ragged, QuantizedBlockCache* quant, KVCacheBase* quant_base)
      : kv_(kv), batch_(batch), ragged_(ragged), quant_(quant), quant_base_(quant_base) {}
  KVCache* kv_;
  BatchKVCache* batch_;
  RaggedKVCache* ragged_;
  QuantizedBlockCache* quant_;
  KVCacheBase* quant_base_;  // the quantized cache as a KVCacheBase
};

// An attention layer the block kernels cover, with its cache; nullopt where they don't.
struct CoveredAttention {
  CacheRef cache;
  mx::Dtype kv_dtype;  // of the cache's rows: its buffers', or for a new cache the context's choice
  kernels::AttentionBlockArgs args;
  kernels::BlockLinear q, k, v, o;
};

std::optional<CoveredAttention> covered(const mx::array& x, const FusedAttentionLayer& layer, KVCacheBase* cache,
                                        const kernels::FastPath& fast) {
  if (!kernels::use_fast(fast) || x.dtype() != mx::float32 || x.ndim() != 3) return std::nullopt;
  auto ref = CacheRef::of(cache, x.shape(0), x.shape(1));
  if (!ref) return std::nullopt;
  std::shared_ptr<const kernels::RopeSpec> rope;
  if (layer.rope) {
    rope = layer.rope->kernel_spec();
    if (!rope) return std::nullopt;
  }
  auto q = layer.q.block_view(), k = layer.k.block_view(), v = layer.v.block_view(), o = layer.o.block_view();
  if (!q || !k || !v || !o) return std::nullopt;
  mx::Dtype kv_dtype = fast->kv_f16() ? mx::float16 : mx::float32;
  std::optional<kernels::KvQuantFormat> kv_quant;
  if (auto* qc = ref->quantized()) {
    // A new quantized cache's scales are float32, as mx.quantize of float32 keys makes them;
    // an existing one's are its own (AttentionBlockInputs checks the buffers).
    const auto* format = dynamic_cast<const QuantizedFetch*>(ref->base());
    kv_quant = kernels::KvQuantFormat{format->bits(), format->group_size()};
    kv_dtype = qc->scale_dtype().value_or(mx::float32);
  } else if (ref->ragged()) {
    kv_dtype = ref->ragged()->f16() ? mx::float16 : mx::float32;
  } else if (!ref->base()->empty()) {
    auto state = ref->base()->state_to_eval();  // looked at, not kept
    kv_dtype = state[0].dtype();
    if ((state[0].dtype() != mx::float32 && state[0].dtype() != mx::float16) || state[1].dtype() != state[0].dtype() ||
        state[0].shape(0) != x.shape(0) || state[0].shape(1) != layer.kv_heads ||
        state[0].shape(3) != layer.head_dim || state[1].shape(3) != layer.head_dim) {
      return std::nullopt;
    }
  }
  kernels::AttentionBlockArgs args{.heads = layer.heads,
                                   .kv_heads = layer.kv_heads,
                                   .head_dim = layer.head_dim,
                                   .offset = ref->base()->offset(),
                                   .eps = layer.eps,
                                   .scale = layer.scale,
                                   .window = layer.window,
                                   .rope = std::move(rope)};
  args.q_norm = layer.q_norm;
  args.k_norm = layer.k_norm;
  args.v_norm = layer.v_norm;
  args.post_norm = layer.post_norm;
  args.residual_scale = layer.residual_scale;
  args.pre_norm = layer.pre_norm;
  args.qk_norm_full = layer.qk_norm_full;
  args.llama4_beta = layer.llama4_beta;
  args.llama4_original_max = layer.llama4_original_max;
  args.left_padding = ref->left_padding();
  args.kv_quant = kv_quant;
  if (auto* r = ref->ragged()) {
    args.ragged = r->rows_for_update();
    args.ragged_f16 = r->f16();
    args.after = r->pending();
  }
  return CoveredAttention{*ref, kv_dtype, std::move(args), *q, *k, *v, *o};
}

// The block's inputs, with the cache's buffers grown for L more rows and handed over: the
// block writes the new rows into them itself when nobody else holds them. (MLX's
// is_donatable cannot tell: the graph and the block's sibling outputs hold them too.) A
// ragged batch hands over its rows (in args) instead.
kernels::AttentionBlockInputs take_cache(CoveredAttention& a, const mx::array& norm_w, const mx::array& x) {
  kernels::AttentionBlockInputs in{norm_w, a.q, a.k, a.v, a.o, {}, a.args};
  if (a.cache.ragged()) return in;
  in.args.exclusive = a.cache.exclusive();
  in.caches = a.cache.take(x.shape(0), a.args.kv_heads, x.shape(1), a.args.head_dim, a.kv_dtype);
  return in;
}

// After the block: its cache outputs (out[next].., then next moves past them) committed, or
// for a ragged batch its n new tokens per row (written by the block, out[0]). Without `out`
// the buffers go back untouched.
void commit_cache(const CoveredAttention& a, const kernels::AttentionBlockInputs& in,
                  const std::optional<std::vector<mx::array>>& out, int n, size_t& next) {
  if (auto* r = a.cache.ragged()) {
    if (out) r->commit_update(n, (*out)[0]);
    return;
  }
  if (!out) {
    a.cache.commit(in.caches, 0, in.args.exclusive);
    return;
  }
  const size_t count = in.caches.size();
  a.cache.commit({out->begin() + static_cast<long>(next), out->begin() + static_cast<long>(next + count)}, n, true);
  next += count;
}

}  // namespace

std::unique_ptr<KVCacheBase> layer_cache(std::optional<int> window, const kernels::FastPath& fast) {
  if (!window || fast) return std::make_unique<KVCache>();
  return std::make_unique<RotatingKVCache>(*window);
}

std::optional<mx::array> fused_attention_block(const mx::array& x, const FusedAttentionLayer& layer,
                                               KVCacheBase* cache, const kernels::FastPath& fast) {
  auto a = covered(x, layer, cache, fast);
  if (!a) return std::nullopt;
  auto in = take_cache(*a, layer.norm_w, x);
  auto out = kernels::attention_block(x, in, fast);
  size_t next = 1;
  commit_cache(*a, in, out, x.shape(1), next);
  if (!out) return std::nullopt;
  return (*out)[0];
}

std::optional<mx::array> fused_decoder_stack(const mx::array& x, const std::vector<FusedDecoderLayer>& layers,
                                             const std::vector<KVCacheBase*>& caches, const kernels::FastPath& fast) {
  if (layers.empty() || caches.size() != layers.size()) return std::nullopt;
  std::vector<CoveredAttention> attn;
  std::vector<kernels::MlpBlockInputs> mlp;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto a = covered(x, layers[i].attn, caches[i], fast);
    const auto& m = layers[i].mlp;
    auto g = m.gate.block_view(), u = m.up.block_view(), d = m.down.block_view();
    if (!a || !g || !u || !d) return std::nullopt;
    attn.push_back(std::move(*a));
    mlp.push_back({m.norm_w, m.eps, *g, *u, *d, m.act, m.post_norm, m.residual_scale, m.pre_norm});
  }
  std::vector<kernels::DecoderLayerInputs> in;
  for (size_t i = 0; i < layers.size(); ++i) in.push_back({take_cache(attn[i], layers[i].attn.norm_w, x), mlp[i]});
  auto out = kernels::decoder_stack(x, in, fast);
  size_t next = 1;
  for (size_t i = 0; i < layers.size(); ++i) commit_cache(attn[i], in[i].attn, out, x.shape(1), next);
  if (!out) return std::nullopt;
  return (*out)[0];
}

}  // namespace mlxcpp
