// Port of mlx_lm/models/cache.py ArraysCache (single sequence and batched).
#include "cache/arrays_cache.h"

#include <algorithm>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "cache/cache_ops.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using cache_detail::int_array;

namespace {

[[noreturn]] void no_keys(const char* op) {
  throw Error(fmt::format("[{}] a recurrent cache holds state slots, not keys and values", op));
}

}  // namespace

RecurrentState* recurrent_state(KVCacheBase* cache) { return dynamic_cast<RecurrentState*>(cache); }

const std::optional<mx::array>& RecurrentState::slot(int i) const {
  if (i < 0 || i >= num_slots()) throw Error(fmt::format("[recurrent cache] slot {} is outside 0..{}", i, num_slots() - 1));
  return slots_[i];
}

void RecurrentState::set_slot(int i, mx::array value) {
  (void)slot(i);  // the range check
  slots_[i] = std::move(value);
}

int64_t RecurrentState::slots_bytes() const {
  int64_t n = 0;
  for (const auto& s : slots_) n += s ? static_cast<int64_t>(s->nbytes()) : 0;
  return n;
}

std::vector<mx::array> RecurrentState::present_slots() const {
  std::vector<mx::array> out;
  for (const auto& s : slots_) {
    if (s) out.push_back(*s);
  }
  return out;
}

// --- ArraysCache ------------------------------------------------------------------------------

std::pair<mx::array, mx::array> ArraysCache::update_and_fetch(const mx::array&, const mx::array&) {
  no_keys("ArraysCache::update_and_fetch");
}

AttentionMask ArraysCache::make_mask(int, std::optional<int>, bool) const { return AttentionMask::none(); }

int64_t ArraysCache::nbytes() const { return slots_bytes(); }

std::vector<mx::array> ArraysCache::state() const { return present_slots(); }


// --- BatchArraysCache -------------------------------------------------------------------------

BatchArraysCache::BatchArraysCache(int slots, std::vector<int> left_padding)
    : BatchCacheBase(std::move(left_padding)), RecurrentState(slots) {}

std::unique_ptr<BatchArraysCache> BatchArraysCache::merge(const std::vector<const ArraysCache*>& caches) {
  if (caches.empty()) throw Error("[BatchArraysCache::merge] no caches to merge");
  const int n = caches.front()->num_slots();
  const int B = static_cast<int>(caches.size());
  auto out = std::make_unique<BatchArraysCache>(n, std::vector<int>(B, 0));
  for (int i = 0; i < B; ++i) out->offsets_[i] = caches[i]->offset();
  for (int e = 0; e < n; ++e) {
    const ArraysCache* init = nullptr;
    for (const auto* c : caches) {
      if (c->num_slots() != n) throw Error("[BatchArraysCache::merge] the caches hold different numbers of slots");
      if (!init && c->slot(e)) init = c;
    }
    if (!init) continue;
    auto shape = init->slot(e)->shape();
    const mx::Dtype dtype = init->slot(e)->dtype();
    shape[0] = B;
    auto merged = mx::zeros(shape, dtype);
    for (int i = 0; i < B; ++i) {
      const auto& s = caches[i]->slot(e);
      if (!s) continue;
      auto start = mx::Shape(shape.size(), 0), stop = shape;
      start[0] = i;
      stop[0] = i + 1;
      merged = mx::slice_update(merged, mx::astype(*s, dtype), start, stop);
    }
    out->slots_[e] = merged;
  }
  return out;
}

std::pair<mx::array, mx::array> BatchArraysCache::update_and_fetch(const mx::array&, const mx::array&) {
  no_keys("BatchArraysCache::update_and_fetch");
}

int BatchArraysCache::offset() const { return offsets_.empty() ? 0 : *std::max_element(offsets_.begin(), offsets_.end()); }

AttentionMask BatchArraysCache::make_mask(int n, std::optional<int>, bool) const {
  auto m = ssm_mask(n);
  return m ? AttentionMask::of(*m) : AttentionMask::none();
}

int64_t BatchArraysCache::nbytes() const { return slots_bytes(); }

std::vector<mx::array> BatchArraysCache::state() const { return present_slots(); }

void BatchArraysCache::prepare(const std::vector<int>&, const std::vector<int>& lengths,
                               const std::vector<int>& right_padding) {
  // ArraysCache.prepare(lengths=...) takes only the lengths (the state skips padded tokens).
  if (lengths.empty()) return;
  if (static_cast<int>(lengths.size()) != batch_size() ||
      (!right_padding.empty() && static_cast<int>(right_padding.size()) != batch_size())) {
    throw Error(fmt::format("[BatchArraysCache::prepare] {} lengths for a batch of {}", lengths.size(), batch_size()));
  }
  lengths_ = lengths;
  lengths_arr_ = int_array(lengths_);
  right_padding_ = right_padding;
}

void BatchArraysCache::finalize() {
  // Each row has seen its own tokens: the padding counted by advance() comes off its offset.
  for (size_t i = 0; i < right_padding_.size(); ++i) offsets_[i] -= right_padding_[i];
  right_padding_.clear();
  lengths_.clear();
  lengths_arr_.reset();
  std::fill(left_padding_.begin(), left_padding_.end(), 0);
}

void BatchArraysCache::filter(const std::vector<int>& keep) {
  for (int r : keep) check_row("BatchArraysCache::filter", r);
  auto idx = int_array(keep);
  for (auto& s : slots_) {
    if (s) s = mx::take(*s, idx, 0);
  }
  auto pick = [&](std::vector<int>& v) {
    if (v.empty()) return;
    std::vector<int> out;
    for (int r : keep) out.push_back(v[r]);
    v = std::move(out);
  };
  pick(left_padding_);
  pick(offsets_);
  pick(lengths_);
  pick(right_padding_);
  lengths_arr_ = lengths_.empty() ? std::nullopt : std::optional<mx::array>(int_array(lengths_));
}

void BatchArraysCache::extend(BatchCacheBase& other_base) {
  auto* other = dynamic_cast<BatchArraysCache*>(&other_base);
  if (other == nullptr || other->slots_.size() != slots_.size()) {
    throw Error("[BatchArraysCache::extend] the other cache is not a recurrent cache with the same slots");
  }
  const int a = batch_size(), b = other->batch_size();
  for (size_t e = 0; e < slots_.size(); ++e) {
    const auto& x = slots_[e];
    const auto& y = other->slots_[e];
    if (!x && !y) continue;
    const auto& ref = x ? *x : *y;
    auto zeros = [&](int rows) {
      auto shape = ref.shape();
      shape[0] = rows;
      return mx::zeros(shape, ref.dtype());
    };
    slots_[e] = mx::concatenate({x ? *x : zeros(a), y ? *y : zeros(b)}, 0);
  }
  left_padding_.insert(left_padding_.end(), other->left_padding_.begin(), other->left_padding_.end());
  offsets_.insert(offsets_.end(), other->offsets_.begin(), other->offsets_.end());
  if (!lengths_.empty() || !other->lengths_.empty()) {
    throw Error("[BatchArraysCache::extend] cannot extend a cache in the middle of a padded prefill");
  }
}

std::unique_ptr<KVCacheBase> BatchArraysCache::extract(int row) const {
  check_row("BatchArraysCache::extract", row);
  auto out = std::make_unique<ArraysCache>(static_cast<int>(slots_.size()));
  for (size_t e = 0; e < slots_.size(); ++e) {
    if (slots_[e]) out->set_slot(static_cast<int>(e), mx::take(*slots_[e], int_array({row}), 0));
  }
  out->advance(offsets_[row]);
  return out;
}


void BatchArraysCache::advance(int n) {
  for (auto& l : lengths_) l -= n;
  for (auto& l : left_padding_) l -= n;
  for (auto& o : offsets_) o += n;
  if (!lengths_.empty()) lengths_arr_ = int_array(lengths_);
}

std::optional<mx::array> BatchArraysCache::ssm_mask(int n) const {
  auto pos = mx::arange(n);
  std::optional<mx::array> mask;
  const bool padded = std::any_of(left_padding_.begin(), left_padding_.end(), [](int l) { return l > 0; });
  if (padded) mask = mx::greater_equal(pos, mx::expand_dims(int_array(left_padding_), 1));
  if (lengths_arr_) {
    auto in_length = mx::less(pos, mx::expand_dims(*lengths_arr_, 1));
    mask = mask ? mx::logical_and(*mask, in_length) : in_length;
  }
  return mask;
}

}  // namespace mlxcpp
