#include "cache/mask.h"

#include <mlx/ops.h>

#include "cache/kv_cache.h"

namespace mx = mlx::core;

namespace mlxcpp {

mx::array create_causal_mask(int n, int offset, std::optional<int> window_size) {
  auto rinds = mx::arange(offset + n);
  auto linds = offset ? mx::arange(offset, offset + n) : rinds;
  linds = mx::expand_dims(linds, 1);
  rinds = mx::expand_dims(rinds, 0);
  auto mask = mx::greater_equal(linds, rinds);
  if (window_size) {
    mask = mx::logical_and(mask, mx::less(linds, mx::add(rinds, mx::array(*window_size))));
  }
  return mask;
}

mx::array create_causal_mask(int n, int offset, std::optional<int> window_size, const std::vector<int>& left_padding) {
  auto mask = create_causal_mask(n, offset, window_size);
  auto rinds = mx::expand_dims(mx::arange(offset + n), 0);
  auto lp = mx::reshape(mx::array(left_padding.data(), {static_cast<int>(left_padding.size())}, mx::int32),
                        {static_cast<int>(left_padding.size()), 1, 1, 1});
  return mx::logical_and(mask, mx::less_equal(lp, rinds));
}

AttentionMask create_attention_mask(
    int n, int offset, bool return_array, std::optional<int> window_size) {
  if (window_size) return AttentionMask::of(create_causal_mask(n, offset, window_size));
  if (n == 1) return AttentionMask::none();
  if (return_array) return AttentionMask::of(create_causal_mask(n, offset, window_size));
  return AttentionMask::causal();
}

AttentionMask create_attention_mask(
    int n, const KVCacheBase* cache, std::optional<int> window_size, bool return_array) {
  if (cache != nullptr) return cache->make_mask(n, window_size, return_array);
  if (n == 1) return AttentionMask::none();
  // Python's `window_size and N > window_size`: a window of 0 counts as none.
  bool beyond_window = window_size && *window_size != 0 && n > *window_size;
  if (return_array || beyond_window) return AttentionMask::of(create_causal_mask(n, 0, window_size));
  return AttentionMask::causal();
}

}  // namespace mlxcpp
