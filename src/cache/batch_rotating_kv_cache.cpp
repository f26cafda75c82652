// Port of mlx_lm/models/cache.py BatchRotatingKVCache.
#include "cache/batch_rotating_kv_cache.h"

#include <algorithm>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "cache/cache_ops.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using cache_detail::int_array;
using cache_detail::seq_assign;
using cache_detail::seq_slice;

namespace {

// cache.py _trim: drop the first trim_size rows, then append.
mx::array trim_rows(int trim_size, const mx::array& v, const std::optional<mx::array>& append = std::nullopt) {
  auto out = trim_size > 0 ? seq_slice(v, trim_size, v.shape(2)) : v;
  if (append) return mx::concatenate({out, *append}, 2);
  return out;
}

}  // namespace

BatchRotatingKVCache::BatchRotatingKVCache(int max_size, std::vector<int> left_padding)
    : BatchCacheBase(std::move(left_padding)), max_size_(max_size) {
  if (max_size < 1) throw ConfigError(fmt::format("[BatchRotatingKVCache] max_size must be >= 1, got {}", max_size));
}

void BatchRotatingKVCache::temporal_order() {
  if (!rotated_) return;
  keys_ = mx::roll(*keys_, -idx_, 2);
  values_ = mx::roll(*values_, -idx_, 2);
  idx_ = keys_->shape(2);
  rotated_ = false;
}

std::pair<mx::array, mx::array> BatchRotatingKVCache::update_concat(const mx::array& keys, const mx::array& values) {
  if (!keys_) {
    keys_ = keys;
    values_ = values;
  } else {
    temporal_order();
    if (keys_->shape(2) > idx_) {
      keys_ = seq_slice(*keys_, 0, idx_);
      values_ = seq_slice(*values_, 0, idx_);
    }
    // Roll right-padded rows so their padding never evicts valid entries.
    if (!lengths_.empty()) {
      std::vector<int> roll(offsets_.size());
      for (size_t i = 0; i < roll.size(); ++i) roll[i] = std::max(0, offsets_[i] - lengths_[i]);
      keys_ = dynamic_roll(*keys_, roll, 2);
      values_ = dynamic_roll(*values_, roll, 2);
      for (size_t i = 0; i < roll.size(); ++i) {
        left_padding_[i] += roll[i];
        offsets_[i] -= roll[i];
      }
    }
    // At most max_size + S - 1 rows: every new token still sees max_size keys.
    const int trim_size = idx_ - max_size_ + 1;
    if (trim_size > 0) {
      for (int& l : left_padding_) l -= trim_size;
    }
    keys_ = trim_rows(trim_size, *keys_, keys);
    values_ = trim_rows(trim_size, *values_, values);
  }
  const int s = keys.shape(2);
  for (int& o : offsets_) o += s;
  offset_ += s;
  idx_ = keys_->shape(2);
  return {*keys_, *values_};
}

std::pair<mx::array, mx::array> BatchRotatingKVCache::update_in_place(const mx::array& keys, const mx::array& values) {
  if (!lengths_.empty()) {
    throw Error("[BatchRotatingKVCache] finalize() must be called before decoding");
  }
  const int B = keys.shape(0), H = keys.shape(1), S = keys.shape(2);
  const int prev = offset_;
  if (!keys_ || (prev >= keys_->shape(2) && keys_->shape(2) < max_size_)) {
    cache_detail::append_zeros(keys_, values_, std::min(kStep, max_size_ - prev), B, H, keys.shape(3), values.shape(3),
                               keys.dtype());
    idx_ = prev;
  }
  const int trim_size = keys_->shape(2) - max_size_;
  if (trim_size > 0) {
    keys_ = trim_rows(trim_size, *keys_);
    values_ = trim_rows(trim_size, *values_);
    idx_ = max_size_;
    for (int& l : left_padding_) l -= trim_size;
  }
  if (idx_ == max_size_) {
    rotated_ = true;
    idx_ = 0;
  }
  if (rotated_) {
    for (int& l : left_padding_) l -= S;
  }
  keys_ = seq_assign(*keys_, keys, idx_);
  values_ = seq_assign(*values_, values, idx_);
  offset_ += S;
  for (int& o : offsets_) o += S;
  idx_ += S;
  return keys_and_values();
}

std::pair<mx::array, mx::array> BatchRotatingKVCache::update_and_fetch(const mx::array& keys, const mx::array& values) {
  cache_detail::check_update("BatchRotatingKVCache::update_and_fetch", keys, values);
  if (keys.shape(0) != batch_size()) {
    throw Error(fmt::format("[BatchRotatingKVCache::update_and_fetch] {} rows for a batch of {}", keys.shape(0),
                            batch_size()));
  }
  if (keys.shape(2) == 1) return update_in_place(keys, values);
  return update_concat(keys, values);
}

std::pair<mx::array, mx::array> BatchRotatingKVCache::keys_and_values() const {
  if (!keys_) throw Error("[BatchRotatingKVCache::keys_and_values] the cache is empty");
  if (offset_ < keys_->shape(2)) return {seq_slice(*keys_, 0, offset_), seq_slice(*values_, 0, offset_)};
  return {*keys_, *values_};
}

void BatchRotatingKVCache::prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
                                   const std::vector<int>& right_padding) {
  if (!left_padding.empty()) {
    if (keys_) throw Error("[BatchRotatingKVCache::prepare] left padding can only be added to an empty cache");
    if (left_padding.size() != left_padding_.size()) {
      throw Error("[BatchRotatingKVCache::prepare] left padding: one per row");
    }
    for (size_t i = 0; i < left_padding.size(); ++i) {
      left_padding_[i] += left_padding[i];
      offsets_[i] -= left_padding[i];
    }
  }
  if (!right_padding.empty() && *std::max_element(right_padding.begin(), right_padding.end()) > 0) {
    if (lengths.size() != offsets_.size()) throw Error("[BatchRotatingKVCache::prepare] lengths: one per row");
    lengths_.resize(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i) lengths_[i] = lengths[i] + offsets_[i];
  }
}

void BatchRotatingKVCache::finalize() {
  if (lengths_.empty()) return;
  std::vector<int> roll(offsets_.size());
  for (size_t i = 0; i < roll.size(); ++i) roll[i] = std::max(0, offsets_[i] - lengths_[i]);
  if (keys_) {
    keys_ = dynamic_roll(*keys_, roll, 2);
    values_ = dynamic_roll(*values_, roll, 2);
  }
  for (size_t i = 0; i < roll.size(); ++i) {
    left_padding_[i] += roll[i];
    offsets_[i] -= roll[i];
  }
  lengths_.clear();
}

int BatchRotatingKVCache::trim(int n) {
  cache_detail::check_trim("BatchRotatingKVCache::trim", n);
  n = std::min(offset_, n);
  offset_ -= n;
  idx_ -= n;
  for (int& o : offsets_) o -= n;
  return n;
}

AttentionMask BatchRotatingKVCache::make_mask(int n, std::optional<int> window_size, bool) const {
  std::vector<int> lp = left_padding_;
  const int window = (window_size && *window_size != 0) ? *window_size : max_size_;
  const int offset = std::min(max_size_ - 1, offset_);
  auto mask = create_causal_mask(n, offset, window);
  // A multi-token update first un-rotates a wrapped ring (its write position becomes the ring's
  // length, then trims). mlx-lm takes the write position as is and so masks up to
  // max_size - idx valid keys of every row whose left padding is still positive.
  const int idx = (n > 1 && rotated_) ? keys_->shape(2) : idx_;
  const int trim_size = idx - max_size_ + (n > 1 ? 1 : 0);
  if (trim_size > 0) {
    for (int& l : lp) l -= trim_size;
  }
  const bool rotated = n == 1 && (rotated_ || idx_ >= max_size_);
  if (rotated) {
    for (int& l : lp) l -= 1;
  }
  auto rinds = mx::expand_dims(mx::arange(offset + n), 0);
  auto lpa = mx::reshape(int_array(lp), {static_cast<int>(lp.size()), 1, 1, 1});
  mask = mx::logical_and(mask, mx::greater_equal(rinds, lpa));
  if (rotated) {
    const int idx = idx_ >= max_size_ ? 0 : idx_;
    mask = mx::roll(mask, idx + 1, -1);
  }
  return AttentionMask::of(mask);
}

void BatchRotatingKVCache::filter(const std::vector<int>& keep) {
  for (int r : keep) check_row("BatchRotatingKVCache::filter", r);
  if (keep.empty()) {
    keys_.reset();
    values_.reset();
    left_padding_.clear();
    offsets_.clear();
    idx_ = offset_ = 0;
    rotated_ = false;
    return;
  }
  if (keys_) {
    auto rows = int_array(keep);
    keys_ = mx::take(*keys_, rows, 0);
    values_ = mx::take(*values_, rows, 0);
  }
  std::vector<int> lp, off;
  for (int r : keep) {
    lp.push_back(left_padding_[r]);
    off.push_back(offsets_[r]);
  }
  left_padding_ = std::move(lp);
  offsets_ = std::move(off);
}

void BatchRotatingKVCache::extend(BatchCacheBase& other_base) {
  auto* other = dynamic_cast<BatchRotatingKVCache*>(&other_base);
  if (other == nullptr) throw Error("[BatchRotatingKVCache::extend] the other cache is not a BatchRotatingKVCache");
  if (other->max_size_ != max_size_) {
    throw Error(fmt::format("[BatchRotatingKVCache::extend] max_size {} and {} differ", max_size_, other->max_size_));
  }
  // b by value: other may be this cache.
  auto append = [](std::vector<int>& a, std::vector<int> b) { a.insert(a.end(), b.begin(), b.end()); };
  if (!keys_ && !other->keys_) {
    append(left_padding_, other->left_padding_);
    append(offsets_, other->offsets_);
    return;
  }
  if (rotated_ != other->rotated_ || idx_ != other->idx_) {
    if (keys_) temporal_order();
    if (other->keys_) other->temporal_order();
  }
  auto j = join({keys_, values_, idx_, left_padding_, batch_size()},
                {other->keys_, other->values_, other->idx_, other->left_padding_, other->batch_size()});
  keys_ = std::move(j.keys);
  values_ = std::move(j.values);
  left_padding_ = std::move(j.left_padding);
  append(offsets_, other->offsets_);
  idx_ = j.idx;
  offset_ = std::max(offset_, other->offset_);
}

std::unique_ptr<KVCacheBase> BatchRotatingKVCache::extract(int row) const {
  check_row("BatchRotatingKVCache::extract", row);
  auto cache = std::make_unique<RotatingKVCache>(max_size_);
  if (!keys_) return cache;
  const int padding = std::max(0, left_padding_[row]);
  const int offset = offsets_[row];
  auto k = mx::slice(*keys_, mx::Shape{row, 0, 0, 0}, mx::Shape{row + 1, keys_->shape(1), keys_->shape(2), keys_->shape(3)});
  auto v = mx::slice(*values_, mx::Shape{row, 0, 0, 0}, mx::Shape{row + 1, values_->shape(1), values_->shape(2), values_->shape(3)});
  int idx = idx_;
  if (rotated_) {
    k = mx::roll(k, -idx_, 2);
    v = mx::roll(v, -idx_, 2);
    idx = max_size_;
  }
  k = mx::contiguous(seq_slice(k, padding, idx));
  v = mx::contiguous(seq_slice(v, padding, idx));
  const int len = k.shape(2);
  cache->set_state(std::move(k), std::move(v), offset, 0, max_size_, len);
  return cache;
}

std::unique_ptr<BatchRotatingKVCache> BatchRotatingKVCache::merge(const std::vector<const RotatingKVCache*>& caches) {
  if (caches.empty()) throw Error("[BatchRotatingKVCache::merge] no caches to merge");
  const int max_size = caches[0]->max_size();
  std::vector<int> offsets;
  std::vector<RowKV> rows;
  for (const auto* c : caches) {
    if (c->max_size() != max_size) throw Error("[BatchRotatingKVCache::merge] the caches' max_size differ");
    offsets.push_back(c->offset());
    if (c->empty()) {
      rows.emplace_back();
      continue;
    }
    const int l = c->size();
    auto [tk, tv] = c->temporal_keys_values();  // its last l rows are the ones kept
    rows.emplace_back(std::pair{seq_slice(tk, tk.shape(2) - l, tk.shape(2)), seq_slice(tv, tv.shape(2) - l, tv.shape(2))});
  }
  auto st = stack_rows(rows);
  if (!st) return std::make_unique<BatchRotatingKVCache>(max_size, std::vector<int>(caches.size(), 0));
  auto cache = std::make_unique<BatchRotatingKVCache>(max_size, std::move(st->left_padding));
  cache->keys_ = std::move(st->keys);
  cache->values_ = std::move(st->values);
  cache->offsets_ = std::move(offsets);
  cache->idx_ = st->length;
  cache->offset_ = st->length;
  return cache;
}

int64_t BatchRotatingKVCache::nbytes() const { return cache_detail::buffer_bytes(keys_, values_); }

std::vector<mx::array> BatchRotatingKVCache::state() const {
  if (!keys_) return {};
  return {*keys_, *values_};
}

std::unique_ptr<KVCacheBase> BatchRotatingKVCache::clone() const {
  return std::make_unique<BatchRotatingKVCache>(*this);
}

}  // namespace mlxcpp
