// Per-layer KV caches, ported from mlx_lm/models/cache.py (_BaseCache, KVCache).
// A cache belongs to one sequence (or request), never to the model. Keys and values are
// (B, n_kv_heads, S, head_dim) arrays; the sequence axis is 2.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "cache/mask.h"

namespace mlxcpp {

class KVCacheBase {
 public:
  virtual ~KVCacheBase();

  // Appends (B, H, S, D) keys/values and returns all keys/values the new queries attend to.
  // The returned arrays are snapshots: later updates never change them.
  virtual std::pair<mlx::core::array, mlx::core::array> update_and_fetch(
      const mlx::core::array& keys, const mlx::core::array& values) = 0;
  // Absolute position of the next token (tokens seen minus tokens trimmed). A batch cache
  // answers its buffers' write position; each row's own offset is in row_offsets().
  virtual int offset() const = 0;
  // A batch cache's per-row offsets ([B] int32: the position of each row's next token), what
  // the families pass to RoPE; nullopt for a single sequence's cache.
  virtual std::optional<mlx::core::array> row_offsets() const { return std::nullopt; }
  // The mask for n new queries, taken *before* update_and_fetch of those n tokens.
  virtual AttentionMask make_mask(
      int n, std::optional<int> window_size = std::nullopt, bool return_array = false) const = 0;
  virtual bool is_trimmable() const = 0;
  // Drops the last min(n, offset) tokens; returns how many were dropped. n must be >= 0.
  virtual int trim(int n) = 0;
  // Sequence length held (mlx-lm's size()).
  virtual int size() const = 0;
  virtual bool empty() const = 0;
  // Bytes of the key and value buffers, including preallocated but unused rows.
  virtual int64_t nbytes() const = 0;
  // The arrays to evaluate or persist: {keys, values} buffers, or nothing while empty.
  virtual std::vector<mlx::core::array> state() const = 0;
  // state() for a caller that only evaluates the arrays and keeps no reference to them (so a
  // cache may go on updating its buffers in place).
  virtual std::vector<mlx::core::array> state_to_eval() const { return state(); }
  // An independent copy (mlx-lm's copy.deepcopy of a cache); arrays are shared immutably.
  virtual std::unique_ptr<KVCacheBase> clone() const = 0;

 protected:
  KVCacheBase() = default;
  KVCacheBase(const KVCacheBase&) = default;
  KVCacheBase& operator=(const KVCacheBase&) = default;
};

using LayerCaches = std::vector<std::unique_ptr<KVCacheBase>>;

// cache.py KVCache: buffers grow in chunks of kStep rows (zeros + concatenate); new rows are
// written with slice_update; fetches return the first offset rows.
class KVCache final : public KVCacheBase {
 public:
  static constexpr int kStep = 256;

  KVCache() = default;

  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(
      const mlx::core::array& keys, const mlx::core::array& values) override;
  // The first offset() rows of the buffers. Throws Error while empty.
  std::pair<mlx::core::array, mlx::core::array> keys_and_values() const;

  int offset() const override { return offset_; }
  AttentionMask make_mask(
      int n, std::optional<int> window_size = std::nullopt, bool return_array = false) const override;
  bool is_trimmable() const override { return true; }
  int trim(int n) override;
  int size() const override { return offset_; }
  bool empty() const override { return !keys_.has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::vector<mlx::core::array> state_to_eval() const override;
  std::unique_ptr<KVCacheBase> clone() const override;

  // Whether no array outside this cache shares its buffers (none was handed out by state(),
  // keys_and_values(), clone() or set_state() since they were last made): a fused kernel may
  // then write new rows in place instead of copying the buffers first.
  bool exclusive() const { return !shared_; }

  // For fused kernels that write new rows themselves: grows the buffers for n more rows exactly
  // as update_and_fetch would and hands them over (the cache keeps no reference, so the kernel
  // may update them in place); commit_update takes the updated buffers back, offset += n;
  // `exclusive`: whether they are still the cache's alone (see exclusive()).
  std::pair<mlx::core::array, mlx::core::array> take_for_update(int batch, int heads, int n, int k_dim, int v_dim,
                                                                mlx::core::Dtype dtype);
  void commit_update(mlx::core::array keys, mlx::core::array values, int n, bool exclusive);

  // cache.py's state setter (keys, values, offset); validates shapes against offset.
  void set_state(mlx::core::array keys, mlx::core::array values, int offset);

 private:
  // cache.py's growth: room for n more rows in kStep chunks (zeros + concatenate).
  void grow_for(int batch, int heads, int n, int k_dim, int v_dim, mlx::core::Dtype dtype);

  std::optional<mlx::core::array> keys_;
  std::optional<mlx::core::array> values_;
  int offset_ = 0;
  // The buffers were handed out (see exclusive()); mutable: handing out is a const operation.
  mutable bool shared_ = false;
};

}  // namespace mlxcpp
