// A ragged batch cache for the CPU fast path: each row's keys and values in a buffer of its own
// (kernels::KVRowBuffer, written and grown by the fused blocks), so rows of any lengths batch
// without left padding. Joining (extend) and leaving (filter) move row pointers and copy no
// keys; merge copies each joining row's own cache once, extract copies one row out. The same
// steps as a BatchKVCache's on the fast path, row for row (each row attends exactly its own
// keys, as alone); parity mode keeps BatchKVCache (mlx-lm's layout and ops).
#pragma once

#include <memory>
#include <vector>

#include "cache/batch_kv_cache.h"
#include "kernels/kv_rows.h"

namespace mlxcpp {

class RaggedKVCache final : public BatchCacheBase {
 public:
  // `rows` empty rows; `f16`: the rows hold float16 (the fast path's kv_f16), else float32.
  RaggedKVCache(int rows, bool f16);

  // Only the fused blocks write a ragged batch: Error (the caller must not fall back to stock ops).
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  int offset() const override;  // the longest row's
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return true; }
  int trim(int n) override;
  int size() const override { return offset(); }
  bool empty() const override { return offset() == 0; }
  int64_t nbytes() const override;
  // The computation that last wrote the rows while pending (the rows themselves are no arrays).
  std::vector<mlx::core::array> state() const override { return pending_; }
  std::unique_ptr<KVCacheBase> clone() const override;

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override;
  void finalize() override;
  void filter(const std::vector<int>& keep) override;
  // Moves other's rows over (other, a RaggedKVCache of the same dtype, is left empty).
  void extend(BatchCacheBase& other) override;
  std::unique_ptr<KVCacheBase> extract(int row) const override;
  // Shares the rows (see BatchCacheBase::split_off).
  std::unique_ptr<BatchCacheBase> split_off(const std::vector<int>& rows) const override;
  // Solo KVCaches (any may be empty; one sequence each) as a ragged batch: each row's keys
  // copied once (converted to the batch's dtype).
  static std::unique_ptr<RaggedKVCache> merge(const std::vector<const KVCache*>& caches, bool f16);

  bool f16() const { return f16_; }
  // For the fused blocks: the rows and their write positions for the next call, the arrays it
  // must run after, and the commit of its n tokens per row (`writer`: an output of that call).
  std::shared_ptr<const kernels::RaggedRows> rows_for_update() const;
  const std::vector<mlx::core::array>& pending() const { return pending_; }
  void commit_update(int n, mlx::core::array writer);

 private:
  void wait() const;  // the pending writes done (before reading rows on the host)

  bool f16_;
  std::vector<std::shared_ptr<kernels::KVRowBuffer>> rows_;
  std::vector<int> right_padding_;  // set by prepare, consumed by finalize
  std::vector<mlx::core::array> pending_;
};

}  // namespace mlxcpp
