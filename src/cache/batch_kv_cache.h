// Batched caches, ported from mlx_lm/models/cache.py (BatchKVCache; BatchRotatingKVCache lives
// in batch_rotating_kv_cache.h). A batch cache holds B sequences of different lengths in one
// (B, H, S, D) buffer: each row's tokens are right-aligned at the write position, the rows'
// left padding is masked. Padding and offsets are kept on the host (mlx-lm keeps them as
// arrays and reads them back with tolist(); the values are the same).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cache/kv_cache.h"

namespace mlxcpp {

// What the batch generator does with any batched layer cache.
class BatchCacheBase : public KVCacheBase {
 public:
  int batch_size() const { return static_cast<int>(offsets_.size()); }
  const std::vector<int>& left_padding() const { return left_padding_; }
  const std::vector<int>& offsets() const { return offsets_; }
  std::optional<mlx::core::array> row_offsets() const override;

  // cache.py prepare(left_padding=, lengths=, right_padding=): more left padding (only while
  // empty; Error otherwise), or right-padded prompts of `lengths` about to be prefilled (rolled
  // into left padding by finalize()). Empty vectors mean "not given".
  virtual void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
                       const std::vector<int>& right_padding) = 0;
  virtual void finalize() = 0;
  // Keeps rows `keep` (in that order). Empty keep is allowed (an empty batch).
  virtual void filter(const std::vector<int>& keep) = 0;
  // Appends other's rows (the same kind of cache; Error otherwise).
  virtual void extend(BatchCacheBase& other) = 0;
  // Row `row` as a single sequence's cache that continues exactly as the row would.
  virtual std::unique_ptr<KVCacheBase> extract(int row) const = 0;
  // A batch of rows `rows` (in that order), for a caller that then filters them out of this
  // one (PromptProcessingBatch.split): a filtered clone here.
  virtual std::unique_ptr<BatchCacheBase> split_off(const std::vector<int>& rows) const;

 protected:
  BatchCacheBase(std::vector<int> left_padding);
  BatchCacheBase(const BatchCacheBase&) = default;
  void check_row(const char* op, int row) const;

  // One side of an extend: a batch's buffers (absent while empty), write position and padding.
  struct Side {
    const std::optional<mlx::core::array>& keys;
    const std::optional<mlx::core::array>& values;
    int idx;
    const std::vector<int>& left_padding;
    int rows;
  };
  struct Joined {
    mlx::core::array keys, values;
    std::vector<int> left_padding;
    int idx;
  };
  // cache.py extend's padding: both sides right-justified at the larger write position, padded
  // to one length and stacked (a's rows first). At least one side has buffers.
  static Joined join(const Side& a, const Side& b);
  // cache.py merge's buffers: each row's tokens ([1, H, len, D] keys and values in temporal
  // order; absent for an empty cache) right-aligned at the longest row's length, zeros to their
  // left (each row's left padding). nullopt where no row holds a token.
  using RowKV = std::optional<std::pair<mlx::core::array, mlx::core::array>>;
  struct Stacked {
    mlx::core::array keys, values;
    std::vector<int> left_padding;
    int length;
  };
  static std::optional<Stacked> stack_rows(const std::vector<RowKV>& rows);
  std::vector<int> left_padding_;
  std::vector<int> offsets_;
};

class BatchKVCache final : public BatchCacheBase {
 public:
  static constexpr int kStep = 256;

  explicit BatchKVCache(std::vector<int> left_padding);

  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  std::pair<mlx::core::array, mlx::core::array> keys_and_values() const;
  int offset() const override { return idx_; }
  // Always an array (B, 1, n, idx + n): causal (within window_size if given), left padding masked.
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return true; }
  int trim(int n) override;
  int size() const override { return idx_; }
  bool empty() const override { return !keys_.has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  // As KVCache's: the buffers to evaluate, not handed out (the fused kernels keep writing them
  // in place).
  std::vector<mlx::core::array> state_to_eval() const override {
    if (!keys_) return {};
    return {*keys_, *values_};
  }
  std::unique_ptr<KVCacheBase> clone() const override;

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override;
  void finalize() override;
  void filter(const std::vector<int>& keep) override;
  void extend(BatchCacheBase& other) override;
  std::unique_ptr<KVCacheBase> extract(int row) const override;
  // Solo KVCaches (any may be empty) as one batch, shorter rows left-padded.
  static std::unique_ptr<BatchKVCache> merge(const std::vector<const KVCache*>& caches);

  // As KVCache's: for fused kernels that write the n new rows of every batch row themselves
  // (at write position offset(), row b's positions offsets()[b]..); exclusive() tells whether
  // the buffers may be updated in place. Throws Error while right padding awaits finalize().
  bool exclusive() const { return !shared_; }
  std::pair<mlx::core::array, mlx::core::array> take_for_update(int heads, int n, int k_dim, int v_dim,
                                                                mlx::core::Dtype dtype);
  void commit_update(mlx::core::array keys, mlx::core::array values, int n, bool exclusive);
  bool pending_right_padding() const { return !right_padding_.empty(); }

 private:
  void grow_for(int heads, int n, int k_dim, int v_dim, mlx::core::Dtype dtype);

  std::optional<mlx::core::array> keys_, values_;
  int idx_ = 0;
  std::vector<int> right_padding_;  // set by prepare, consumed by finalize
  mutable bool shared_ = false;     // the buffers were handed out (see KVCache::exclusive)
};

// x rolled along `axis` by a per-row shift (row b of axis 0 by shifts[b]): cache.py dynamic_roll.
mlx::core::array dynamic_roll(const mlx::core::array& x, const std::vector<int>& shifts, int axis);

// One layer's solo caches (one per sequence; KVCache or RotatingKVCache, all the same kind) as
// a batch cache: cache.py's merge of that kind. Throws Error for other kinds or mixed kinds.
std::unique_ptr<BatchCacheBase> merge_layer_caches(const std::vector<const KVCacheBase*>& caches);

}  // namespace mlxcpp
