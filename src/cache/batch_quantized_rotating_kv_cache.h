// A batch of quantized rotating caches (sliding-window layers with --kv-bits in a batch; mlx-lm
// has neither the quantized ring nor a batch of quantized caches): QuantizedRotatingKVCache's three
// rings (packed rows, scales, biases) as three BatchRotatingKVCache planes moved in lockstep, so
// the ring's writes, temporal order, left padding, filter, extend, extract and merge are
// BatchRotatingKVCache's own; attention reads the rows through QuantizedFetch with the ring's mask.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "cache/batch_rotating_kv_cache.h"
#include "cache/quantized_rotating_kv_cache.h"

namespace mlxcpp {

class BatchQuantizedRotatingKVCache final : public BatchCacheBase, public QuantizedFetch {
 public:
  // Solo quantized rotating caches (any may be empty; one max_size, group size and bits) as one batch.
  static std::unique_ptr<BatchQuantizedRotatingKVCache> merge(const std::vector<const QuantizedRotatingKVCache*>& caches);

  std::pair<QuantizedRows, QuantizedRows> update_and_fetch_quantized(const mlx::core::array& keys,
                                                                     const mlx::core::array& values) override;
  // Dense keys/values cannot come out of it: throws Error.
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  int group_size() const override { return group_size_; }
  int bits() const override { return bits_; }

  int offset() const override { return planes_[0]->offset(); }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override {
    return planes_[0]->make_mask(n, window_size, return_array);
  }
  bool is_trimmable() const override { return planes_[0]->is_trimmable(); }
  int trim(int n) override;
  int size() const override { return planes_[0]->size(); }
  bool empty() const override { return planes_[0]->empty(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::unique_ptr<KVCacheBase> clone() const override;

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override;
  void finalize() override;
  void filter(const std::vector<int>& keep) override;
  void extend(BatchCacheBase& other) override;
  // A QuantizedRotatingKVCache holding the row's tokens in temporal order.
  std::unique_ptr<KVCacheBase> extract(int row) const override;

 private:
  BatchQuantizedRotatingKVCache(std::array<std::unique_ptr<BatchRotatingKVCache>, 3> planes, int group_size, int bits);
  void sync();  // the base's padding and offsets from the planes'

  std::array<std::unique_ptr<BatchRotatingKVCache>, 3> planes_;  // w, scales, biases
  int group_size_, bits_;
};

}  // namespace mlxcpp
