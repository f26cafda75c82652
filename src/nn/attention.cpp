#include "nn/attention.h"

#include <mlx/fast.h>
#include <mlx/ops.h>
#include <mlx/utils.h>

#include "cache/quantized_kv_cache.h"
#include "kernels/quant_attention.h"

namespace mx = mlx::core;

namespace mlxcpp {

mx::array scaled_dot_product_attention(const mx::array& q, const mx::array& k_in, const mx::array& v_in, float scale,
                                       const AttentionMask& mask, const std::optional<mx::array>& sinks) {
  // A cache the CPU fast path filled in float16 meets float32 queries here only when a later
  // step leaves the fused blocks: attend in the queries' dtype, as the kernels do.
  const auto k = k_in.dtype() == q.dtype() ? k_in : mx::astype(k_in, q.dtype());
  const auto v = v_in.dtype() == q.dtype() ? v_in : mx::astype(v_in, q.dtype());
  // Python's binding: "causal" -> mask_mode "causal"; an array -> mode "" with the array.
  switch (mask.kind) {
    case AttentionMask::Kind::Causal:
      return mx::fast::scaled_dot_product_attention(q, k, v, scale, "causal", std::nullopt, sinks);
    case AttentionMask::Kind::Array:
      return mx::fast::scaled_dot_product_attention(q, k, v, scale, "", mask.array, sinks);
    case AttentionMask::Kind::None:
    default:
      return mx::fast::scaled_dot_product_attention(q, k, v, scale, "", std::nullopt, sinks);
  }
}

mx::array quantized_attention(const mx::array& q_in, const mx::array (&keys)[3], const mx::array (&values)[3],
                              float scale, const AttentionMask& mask, int group_size, int bits) {
  const mx::Dtype dtype = keys[1].dtype();
  auto queries = q_in.dtype() == dtype ? q_in : mx::astype(q_in, dtype);
  const int B = queries.shape(0), n_q_heads = queries.shape(1), L = queries.shape(2), D = queries.shape(3);
  const int n_kv_heads = keys[0].shape(-3), n_repeats = n_q_heads / n_kv_heads;
  queries = mx::multiply(queries, mx::array(scale, dtype));  // queries *= scale
  std::vector<mx::array> k(keys, keys + 3), v(values, values + 3);
  if (n_repeats > 1) {
    queries = mx::reshape(queries, {B, n_kv_heads, n_repeats, L, D});
    for (auto* t : {&k, &v}) {
      for (auto& a : *t) a = mx::expand_dims(a, -3);
    }
  }
  auto scores = mx::quantized_matmul(queries, k[0], k[1], k[2], /*transpose=*/true, group_size, bits);
  std::optional<mx::array> m = mask.array;
  if (mask.is_causal()) {
    const int qL = scores.shape(-2), kL = scores.shape(-1);
    auto q_idx = mx::arange(kL - qL, kL), k_idx = mx::arange(kL);
    m = mx::greater_equal(mx::expand_dims(q_idx, 1), mx::expand_dims(k_idx, 0));
  }
  if (m) {
    if (n_repeats > 1 && m->ndim() > 3) m = mx::expand_dims(*m, -3);
    scores = m->dtype() == mx::bool_
                 ? mx::where(*m, scores, mx::array(mx::finfo(scores.dtype()).min, scores.dtype()))
                 : mx::add(scores, *m);
  }
  scores = mx::softmax(scores, -1, /*precise=*/true);
  auto out = mx::quantized_matmul(scores, v[0], v[1], v[2], /*transpose=*/false, group_size, bits);
  if (n_repeats > 1) out = mx::reshape(out, {B, n_q_heads, L, -1});
  return out.dtype() == q_in.dtype() ? out : mx::astype(out, q_in.dtype());
}

mx::array cached_attention(const mx::array& queries, const mx::array& keys, const mx::array& values,
                           KVCacheBase* cache, float scale, const AttentionMask& mask, const kernels::FastPath& fast,
                           std::optional<int> window) {
  if (auto* qc = dynamic_cast<QuantizedFetch*>(cache)) {
    auto [k, v] = qc->update_and_fetch_quantized(keys, values);
    const mx::array kq[3] = {k.w, k.scales, k.biases}, vq[3] = {v.w, v.scales, v.biases};
    // The fast path: our kernel reads the packed rows. A window's mask is the kernel's own where
    // key j sits at position j (a plain cache, not a ring).
    const bool windowed = mask.is_array() && window && dynamic_cast<QuantizedKVCache*>(cache) != nullptr;
    if (!mask.is_array() || windowed) {
      if (auto out = kernels::quantized_kv_attention(queries, kq, vq, scale, mask.is_causal() || windowed,
                                                     qc->group_size(), qc->bits(), fast, windowed ? *window : 0)) {
        return *out;
      }
    }
    return quantized_attention(queries, kq, vq, scale, mask, qc->group_size(), qc->bits());
  }
  if (!cache) return scaled_dot_product_attention(queries, keys, values, scale, mask);
  auto [k, v] = cache->update_and_fetch(keys, values);
  // The fast path: our kernel over the cache's float32 rows (causal or a single query; masks with
  // padding or windows stay with MLX's attention).
  if (!mask.is_array()) {
    if (auto out = kernels::float_kv_attention(queries, k, v, scale, mask.is_causal(), fast)) return *out;
  }
  return scaled_dot_product_attention(queries, k, v, scale, mask);
}

}  // namespace mlxcpp
