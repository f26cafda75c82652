// Port of mlx_lm/models/cache.py BatchRotatingKVCache: a sliding-window ring shared by B rows,
// each with its own left padding. Single-token updates write into the ring in place (the mask
// is rolled to the ring's physical layout); multi-token updates put the ring in temporal order
// and keep max_size + S - 1 rows so every new query sees its window.
#pragma once

#include "cache/batch_kv_cache.h"

namespace mlxcpp {

class RotatingKVCache;

class BatchRotatingKVCache final : public BatchCacheBase {
 public:
  static constexpr int kStep = 256;

  BatchRotatingKVCache(int max_size, std::vector<int> left_padding);

  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  std::pair<mlx::core::array, mlx::core::array> keys_and_values() const;
  int offset() const override { return idx_; }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return offset_ < max_size_; }
  int trim(int n) override;
  int size() const override { return std::min(offset_, max_size_); }
  bool empty() const override { return !keys_.has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::unique_ptr<KVCacheBase> clone() const override;

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override;
  void finalize() override;
  void filter(const std::vector<int>& keep) override;
  void extend(BatchCacheBase& other) override;
  // A RotatingKVCache(max_size) holding the row's tokens in temporal order (also after the
  // ring has wrapped).
  std::unique_ptr<KVCacheBase> extract(int row) const override;
  // Solo rotating caches of one max_size (Error otherwise) as one batch.
  static std::unique_ptr<BatchRotatingKVCache> merge(const std::vector<const RotatingKVCache*>& caches);

  int max_size() const { return max_size_; }
  int idx() const { return idx_; }
  bool rotated() const { return rotated_; }
  int tokens_seen() const { return offset_; }  // cache.py's _offset

 private:
  void temporal_order();
  std::pair<mlx::core::array, mlx::core::array> update_concat(const mlx::core::array& keys,
                                                              const mlx::core::array& values);
  std::pair<mlx::core::array, mlx::core::array> update_in_place(const mlx::core::array& keys,
                                                                const mlx::core::array& values);

  int max_size_;
  std::optional<mlx::core::array> keys_, values_;
  int idx_ = 0;
  int offset_ = 0;  // cache.py's _offset (shared write count)
  bool rotated_ = false;
  std::vector<int> lengths_;  // set by prepare for right-padded prompts (empty: none)
};

}  // namespace mlxcpp
