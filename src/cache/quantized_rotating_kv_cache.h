// A RotatingKVCache (sliding-window layers, --max-kv-size) whose keys and values are stored
// quantized, which mlx-lm lacks (its RotatingKVCache.to_quantized raises): the ring of
// RotatingKVCache applied to each of mx.quantize's three tensors (packed rows, scales, biases),
// three rotating caches kept in step — new rows quantized, then written, trimmed and put in
// temporal order exactly as RotatingKVCache does with float rows.
#pragma once

#include <array>
#include <memory>

#include "cache/quantized_kv_cache.h"
#include "cache/rotating_kv_cache.h"

namespace mlxcpp {

class QuantizedRotatingKVCache final : public QuantizedCache {
 public:
  QuantizedRotatingKVCache(int max_size, int keep, int group_size, int bits);
  // The rotating cache's buffers (rows past its offset included) quantized; same offset, keep,
  // max_size and ring position. RequestError where group_size does not divide head_dim.
  static std::unique_ptr<QuantizedRotatingKVCache> from(const RotatingKVCache& cache, int group_size, int bits);
  // A cache of these three rings (component i of the quantized keys and values: 0 packed rows,
  // 1 scales, 2 biases), kept in step (BatchQuantizedRotatingKVCache's extract).
  static std::unique_ptr<QuantizedRotatingKVCache> from_lanes(std::array<RotatingKVCache, 3> lanes, int group_size,
                                                              int bits);
  // Ring i (what BatchQuantizedRotatingKVCache::merge batches).
  const RotatingKVCache& lane(int i) const { return lanes_.at(i); }

  std::pair<QuantizedRows, QuantizedRows> update_and_fetch_quantized(const mlx::core::array& keys,
                                                                     const mlx::core::array& values) override;
  int offset() const override { return lanes_[0].offset(); }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override {
    return lanes_[0].make_mask(n, window_size, return_array);
  }
  bool is_trimmable() const override { return lanes_[0].is_trimmable(); }
  int trim(int n) override;
  int size() const override { return lanes_[0].size(); }
  bool empty() const override { return lanes_[0].empty(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::unique_ptr<KVCacheBase> clone() const override { return std::make_unique<QuantizedRotatingKVCache>(*this); }

 private:
  // Lane i's keys/values: component i of the quantized keys/values (0 packed, 1 scales, 2 biases).
  std::array<RotatingKVCache, 3> lanes_;
};

}  // namespace mlxcpp
