// Recurrent-state caches, ported from mlx_lm/models/cache.py ArraysCache: a fixed number of
// state slots (for a gated-DeltaNet layer: the causal conv's last kernel-1 inputs and the
// recurrence's float32 state). Not trimmable: a state summarizes every token it has seen.
// ArraysCache holds one sequence; BatchArraysCache holds a batch (left padding masked, right
// padded prompts prefilled with `lengths`), with merge / filter / extend / extract.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <mlx/array.h>

#include "cache/batch_kv_cache.h"
#include "cache/kv_cache.h"

namespace mlxcpp {

// What a recurrent layer reads and writes, whichever of the two caches holds it: the state slots
// (held here), and what differs between one sequence and a batch.
class RecurrentState {
 public:
  virtual ~RecurrentState() = default;
  // Slot i (absent until a layer first writes it); Error for i outside the slots.
  const std::optional<mlx::core::array>& slot(int i) const;
  void set_slot(int i, mlx::core::array value);
  int num_slots() const { return static_cast<int>(slots_.size()); }
  // cache.lengths: [B] int32, each row's valid tokens in the step being prefilled (right-padded
  // prompts); nullopt outside such a step.
  virtual const std::optional<mlx::core::array>& lengths() const = 0;
  // cache.advance(n), after a layer has consumed n tokens.
  virtual void advance(int n) = 0;
  // cache.make_mask(n) (base.create_ssm_mask): [B, n] bool, true where a token is real; nullopt
  // when every token is.
  virtual std::optional<mlx::core::array> ssm_mask(int n) const = 0;

 protected:
  explicit RecurrentState(int slots) : slots_(slots) {}
  RecurrentState(const RecurrentState&) = default;
  RecurrentState& operator=(const RecurrentState&) = default;
  int64_t slots_bytes() const;
  std::vector<mlx::core::array> present_slots() const;  // the slots written so far

  std::vector<std::optional<mlx::core::array>> slots_;
};

// The recurrent cache of the layer `cache` (null when it holds none, or for no cache).
RecurrentState* recurrent_state(KVCacheBase* cache);

class ArraysCache final : public KVCacheBase, public RecurrentState {
 public:
  explicit ArraysCache(int slots) : RecurrentState(slots) {}

  // Recurrent layers never call these.
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  // Tokens consumed (mlx-lm's ArraysCache keeps no offset; the generator's bookkeeping does).
  int offset() const override { return seen_; }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return false; }
  int trim(int) override { return 0; }
  int size() const override { return seen_; }
  bool empty() const override { return !slots_[0].has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::unique_ptr<KVCacheBase> clone() const override { return std::make_unique<ArraysCache>(*this); }

  const std::optional<mlx::core::array>& lengths() const override { return none_; }
  void advance(int n) override { seen_ += n; }
  std::optional<mlx::core::array> ssm_mask(int) const override { return std::nullopt; }

 private:
  std::optional<mlx::core::array> none_;
  int seen_ = 0;
};

class BatchArraysCache final : public BatchCacheBase, public RecurrentState {
 public:
  BatchArraysCache(int slots, std::vector<int> left_padding);
  // cache.py ArraysCache.merge: each row's slots stacked (zeros for a row that has none yet);
  // the merged cache starts with no left padding (the rows' states already summarize them).
  static std::unique_ptr<BatchArraysCache> merge(const std::vector<const ArraysCache*>& caches);

  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  int offset() const override;
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return false; }
  int trim(int) override { return 0; }
  int size() const override { return offset(); }
  bool empty() const override { return !slots_[0].has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::unique_ptr<KVCacheBase> clone() const override { return std::make_unique<BatchArraysCache>(*this); }

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override;
  void finalize() override;
  void filter(const std::vector<int>& keep) override;
  void extend(BatchCacheBase& other) override;
  std::unique_ptr<KVCacheBase> extract(int row) const override;

  const std::optional<mlx::core::array>& lengths() const override { return lengths_arr_; }
  void advance(int n) override;
  std::optional<mlx::core::array> ssm_mask(int n) const override;

 private:
  std::vector<int> lengths_;        // host copy of lengths_arr_ (empty: none)
  std::vector<int> right_padding_;  // of the padded prefill in progress (finalize() subtracts it)
  std::optional<mlx::core::array> lengths_arr_;
};

}  // namespace mlxcpp
