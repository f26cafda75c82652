// A batch of quantized KV caches (what mlx-lm lacks: its BatchGenerator cannot batch a
// QuantizedKVCache): QuantizedKVCache's packed rows, scales and biases, each held as a BatchKVCache
// plane (keys and values of one component) moved in lockstep, so left padding, growth, padded
// prefills (prepare / finalize), filter, extend, extract and merge are BatchKVCache's own.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "cache/batch_kv_cache.h"
#include "cache/quantized_kv_cache.h"

namespace mlxcpp {

class BatchQuantizedKVCache final : public BatchCacheBase, public QuantizedFetch, public QuantizedBlockCache {
 public:
  // Solo quantized caches (any may be empty; one group size and bits) as one batch.
  static std::unique_ptr<BatchQuantizedKVCache> merge(const std::vector<const QuantizedKVCache*>& caches);

  std::pair<QuantizedRows, QuantizedRows> update_and_fetch_quantized(const mlx::core::array& keys,
                                                                     const mlx::core::array& values) override;
  // Dense keys/values cannot come out of it: throws Error.
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  int group_size() const override { return group_size_; }
  int bits() const override { return bits_; }

  // The planes' take_for_update / commit_update in lockstep (a batch's rows, left padding kept).
  std::array<mlx::core::array, 6> take_for_update(int batch, int heads, int n, int dim,
                                                  mlx::core::Dtype scale_dtype) override;
  void commit_update(std::array<mlx::core::array, 6> buffers, int n, bool exclusive) override;
  bool exclusive() const override;
  std::optional<mlx::core::Dtype> scale_dtype() const override;
  bool pending_right_padding() const { return planes_[0]->pending_right_padding(); }

  int offset() const override { return planes_[0]->offset(); }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return true; }
  int trim(int n) override;
  int size() const override { return offset(); }
  bool empty() const override { return planes_[0]->empty(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::vector<mlx::core::array> state_to_eval() const override;
  std::unique_ptr<KVCacheBase> clone() const override;

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override;
  void finalize() override;
  void filter(const std::vector<int>& keep) override;
  void extend(BatchCacheBase& other) override;
  std::unique_ptr<KVCacheBase> extract(int row) const override;

 private:
  BatchQuantizedKVCache(std::array<std::unique_ptr<BatchKVCache>, 3> planes, int group_size, int bits);
  void sync();  // the base's padding and offsets from the planes'

  std::array<std::unique_ptr<BatchKVCache>, 3> planes_;  // w, scales, biases
  int group_size_, bits_;
};

}  // namespace mlxcpp
