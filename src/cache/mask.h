// Attention masks as mlx-lm builds them (mlx_lm/models/base.py create_causal_mask,
// create_attention_mask; mlx_lm/models/cache.py create_attention_mask).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp {

class KVCacheBase;

// What mlx-lm passes as `mask` to scaled_dot_product_attention: None, the string "causal"
// (SDPA builds the causal mask itself), or an explicit bool array (true = attend).
struct AttentionMask {
  enum class Kind { None, Causal, Array };
  Kind kind = Kind::None;
  std::optional<mlx::core::array> array;  // set exactly when kind == Array

  static AttentionMask none() { return {}; }
  static AttentionMask causal() { return {Kind::Causal, std::nullopt}; }
  static AttentionMask of(mlx::core::array mask) { return {Kind::Array, std::move(mask)}; }

  bool is_none() const { return kind == Kind::None; }
  bool is_causal() const { return kind == Kind::Causal; }
  bool is_array() const { return kind == Kind::Array; }
};

// base.py create_causal_mask (without the batch paddings): a bool (n, offset + n) array where
// query i (absolute position offset + i) sees key j iff j <= offset + i and, with a window,
// offset + i < j + window_size.
mlx::core::array create_causal_mask(
    int n, int offset = 0, std::optional<int> window_size = std::nullopt);

// base.py create_causal_mask with left_padding: the (n, offset + n) mask above broadcast to
// (B, 1, n, offset + n), where row b also masks its first left_padding[b] keys.
mlx::core::array create_causal_mask(int n, int offset, std::optional<int> window_size,
                                    const std::vector<int>& left_padding);

// cache.py create_attention_mask: an array whenever a window is given (even for n == 1),
// else None for n == 1, else an array if return_array, else "causal".
AttentionMask create_attention_mask(
    int n, int offset, bool return_array, std::optional<int> window_size);

// base.py create_attention_mask(h, cache, window_size, return_array) with n = h.shape[1]:
// defers to cache->make_mask when a cache is given; without one, None for n == 1, an array if
// return_array or n > window_size, else "causal".
AttentionMask create_attention_mask(
    int n,
    const KVCacheBase* cache,
    std::optional<int> window_size = std::nullopt,
    bool return_array = false);

}  // namespace mlxcpp
