// Port of mlx_lm/models/cache.py RotatingKVCache.
#include "cache/rotating_kv_cache.h"

#include <algorithm>
#include <string>

#include <mlx/ops.h>

#include "cache/cache_ops.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using cache_detail::seq_assign;
using cache_detail::seq_slice;

namespace {

void check_sizes(const char* op, int max_size, int keep) {
  if (max_size < 1) {
    throw ConfigError(std::string("[") + op + "] max_size must be >= 1, got " + std::to_string(max_size));
  }
  if (keep < 0 || keep >= max_size) {
    throw ConfigError(std::string("[") + op + "] keep must be in [0, max_size - 1] = [0, " +
                      std::to_string(max_size - 1) + "], got " + std::to_string(keep));
  }
}

}  // namespace

RotatingKVCache::RotatingKVCache(int max_size, int keep) : keep_(keep), max_size_(max_size) {
  check_sizes("RotatingKVCache", max_size, keep);
}

// cache.py _trim: drop rows [keep, keep + trim_size), then append.
mx::array RotatingKVCache::trim_rows(int trim_size, const mx::array& v) const {
  if (trim_size <= 0) return v;
  return mx::concatenate({seq_slice(v, 0, keep_), seq_slice(v, trim_size + keep_, v.shape(2))}, 2);
}

mx::array RotatingKVCache::trim_rows(int trim_size, const mx::array& v, const mx::array& append) const {
  if (trim_size <= 0) return mx::concatenate({v, append}, 2);
  return mx::concatenate(
      {seq_slice(v, 0, keep_), seq_slice(v, trim_size + keep_, v.shape(2)), append}, 2);
}

// cache.py _temporal_order: un-rotate the ring, slicing off unused rows.
mx::array RotatingKVCache::temporal_order(const mx::array& v) const {
  const int len = v.shape(2);
  if (idx_ == len) return v;
  if (idx_ < offset_) {
    return mx::concatenate(
        {seq_slice(v, 0, keep_), seq_slice(v, idx_, len), seq_slice(v, keep_, idx_)}, 2);
  }
  return seq_slice(v, 0, idx_);
}

std::pair<mx::array, mx::array> RotatingKVCache::update_concat(
    const mx::array& keys, const mx::array& values) {
  if (!keys_) {
    keys_ = keys;
    values_ = values;
  } else {
    // Temporal order preserves context; the buffer may reach max_size + S - 1 rows so that
    // every new token still sees max_size keys.
    keys_ = temporal_order(*keys_);
    values_ = temporal_order(*values_);
    idx_ = keys_->shape(2);
    const int trim_size = idx_ - max_size_ + 1;
    keys_ = trim_rows(trim_size, *keys_, keys);
    values_ = trim_rows(trim_size, *values_, values);
  }
  offset_ += keys.shape(2);
  idx_ = keys_->shape(2);
  return {*keys_, *values_};
}

std::pair<mx::array, mx::array> RotatingKVCache::update_in_place(
    const mx::array& keys, const mx::array& values) {
  const int b = keys.shape(0), heads = keys.shape(1), s = keys.shape(2);
  const int prev = offset_;
  // Not at max_size yet: keep growing the buffer.
  if (!keys_ || (prev >= keys_->shape(2) && keys_->shape(2) < max_size_)) {
    cache_detail::append_zeros(keys_, values_, std::min(kStep, max_size_ - prev), b, heads, keys.shape(3),
                               values.shape(3), keys.dtype());
    idx_ = prev;
  }

  // Shrink a buffer a multi-token update left longer than max_size.
  const int trim_size = keys_->shape(2) - max_size_;
  if (trim_size > 0) {
    keys_ = trim_rows(trim_size, *keys_);
    values_ = trim_rows(trim_size, *values_);
    idx_ = max_size_;
  }

  // Rotate.
  if (idx_ == max_size_) idx_ = keep_;

  keys_ = seq_assign(*keys_, keys, idx_);
  values_ = seq_assign(*values_, values, idx_);
  offset_ += s;
  idx_ += s;
  return keys_and_values();
}

std::pair<mx::array, mx::array> RotatingKVCache::update_and_fetch(
    const mx::array& keys, const mx::array& values) {
  cache_detail::check_update("RotatingKVCache::update_and_fetch", keys, values);
  if (keys.shape(2) == 1) return update_in_place(keys, values);
  return update_concat(keys, values);
}

std::pair<mx::array, mx::array> RotatingKVCache::keys_and_values() const {
  if (!keys_) throw Error("[RotatingKVCache::keys_and_values] the cache is empty");
  if (offset_ < keys_->shape(2)) {
    return {seq_slice(*keys_, 0, offset_), seq_slice(*values_, 0, offset_)};
  }
  return {*keys_, *values_};
}

std::pair<mx::array, mx::array> RotatingKVCache::temporal_keys_values() const {
  if (!keys_) throw Error("[RotatingKVCache::temporal_keys_values] the cache is empty");
  return {temporal_order(*keys_), temporal_order(*values_)};
}

int RotatingKVCache::size() const { return std::min(offset_, max_size_); }

int RotatingKVCache::trim(int n) {
  cache_detail::check_trim("RotatingKVCache::trim", n);
  n = std::min(offset_, n);
  offset_ -= n;
  idx_ -= n;
  return n;
}

AttentionMask RotatingKVCache::make_mask(
    int n, std::optional<int> window_size, bool return_array) const {
  if (n > 1) {
    // Python's `window_size or self.max_size`: a window of 0 counts as none.
    const int window = (window_size && *window_size != 0) ? *window_size : max_size_;
    const int offset = std::min(max_size_ - 1, offset_);
    if (offset + n > window || return_array) {
      return AttentionMask::of(create_causal_mask(n, offset, window));
    }
    return AttentionMask::causal();
  }
  if (!window_size) return AttentionMask::none();
  // A single query needs a mask when the window is shorter than the ring.
  const int window = *window_size;
  if (offset_ >= window && max_size_ > window) {
    const int idx = idx_ >= max_size_ ? 0 : idx_;
    const int mask_size = offset_ < max_size_ ? offset_ + 1 : max_size_;
    auto mask = mx::greater_equal(mx::arange(mask_size), mx::array(mask_size - window));
    return AttentionMask::of(mx::roll(mask, idx + 1));
  }
  return AttentionMask::none();
}

int64_t RotatingKVCache::nbytes() const { return cache_detail::buffer_bytes(keys_, values_); }

std::vector<mx::array> RotatingKVCache::state() const {
  if (!keys_) return {};
  return {*keys_, *values_};
}

std::unique_ptr<KVCacheBase> RotatingKVCache::clone() const {
  return std::make_unique<RotatingKVCache>(*this);
}

void RotatingKVCache::set_state(
    mx::array keys, mx::array values, int offset, int keep, int max_size, int idx) {
  cache_detail::check_state("RotatingKVCache::set_state", keys, values);
  check_sizes("RotatingKVCache::set_state", max_size, keep);
  if (offset < 0 || idx < 0 || idx > keys.shape(2)) {
    throw Error("[RotatingKVCache::set_state] need offset >= 0 and 0 <= idx <= " +
                std::to_string(keys.shape(2)) + " (the buffers' length), got offset " +
                std::to_string(offset) + ", idx " + std::to_string(idx));
  }
  keys_ = std::move(keys);
  values_ = std::move(values);
  offset_ = offset;
  keep_ = keep;
  max_size_ = max_size;
  idx_ = idx;
}

}  // namespace mlxcpp
