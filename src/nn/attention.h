// Attention helpers shared by the families: mlx-lm's base.scaled_dot_product_attention.
#pragma once

#include <optional>

#include <mlx/array.h>

#include "cache/kv_cache.h"
#include "cache/mask.h"
#include "kernels/ops.h"

namespace mlxcpp {

mlx::core::array scaled_dot_product_attention(const mlx::core::array& queries, const mlx::core::array& keys,
                                              const mlx::core::array& values, float scale,
                                              const AttentionMask& mask,
                                              const std::optional<mlx::core::array>& sinks = std::nullopt);

// mlx-lm's base.quantized_scaled_dot_product_attention: queries [B, Hq, L, D] against keys and
// values held quantized ([B, Hkv, S, ...] each, mx.quantize's triples) with quantized_matmul,
// group_size and bits as stored; the queries are cast to the scales' dtype (and the output back).
mlx::core::array quantized_attention(const mlx::core::array& queries, const mlx::core::array (&keys)[3],
                                     const mlx::core::array (&values)[3], float scale, const AttentionMask& mask,
                                     int group_size, int bits);

// The attention of a layer's queries over its cache after writing the new keys/values into it
// (update_and_fetch, then scaled_dot_product_attention, or the quantized pair for a
// QuantizedKVCache: on the fast path our kernel over the packed rows, `window` telling it a
// sliding-window layer's mask); without a cache, over the new keys/values alone.
mlx::core::array cached_attention(const mlx::core::array& queries, const mlx::core::array& keys,
                                  const mlx::core::array& values, KVCacheBase* cache, float scale,
                                  const AttentionMask& mask, const kernels::FastPath& fast = {},
                                  std::optional<int> window = std::nullopt);

}  // namespace mlxcpp

