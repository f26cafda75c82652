// Port of mlx_lm/models/cache.py KVCache.
#include "cache/kv_cache.h"

#include <algorithm>
#include <string>

#include <mlx/ops.h>

#include "cache/cache_ops.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using cache_detail::seq_assign;
using cache_detail::seq_slice;

KVCacheBase::~KVCacheBase() = default;

std::pair<mx::array, mx::array> KVCache::update_and_fetch(
    const mx::array& keys_in, const mx::array& values_in) {
  cache_detail::check_update("KVCache::update_and_fetch", keys_in, values_in);
  // New rows take the buffers' dtype (float16 where the CPU fast path created them).
  const mx::Dtype dtype = keys_ ? keys_->dtype() : keys_in.dtype();
  const auto keys = keys_in.dtype() == dtype ? keys_in : mx::astype(keys_in, dtype);
  const auto values = values_in.dtype() == dtype ? values_in : mx::astype(values_in, dtype);
  const int s = keys.shape(2);
  grow_for(keys.shape(0), keys.shape(1), s, keys.shape(3), values.shape(3), dtype);
  const int prev = offset_;
  offset_ += s;
  keys_ = seq_assign(*keys_, keys, prev);  // a new array (MLX donates the buffer when it can)
  values_ = seq_assign(*values_, values, prev);
  return keys_and_values();
}

void KVCache::grow_for(int batch, int heads, int n, int k_dim, int v_dim, mx::Dtype dtype) {
  if (cache_detail::grow_buffers(keys_, values_, offset_, n, batch, heads, k_dim, v_dim, dtype, kStep)) {
    shared_ = false;  // fresh buffers
  }
}

std::pair<mx::array, mx::array> KVCache::take_for_update(int batch, int heads, int n, int k_dim, int v_dim,
                                                         mx::Dtype dtype) {
  grow_for(batch, heads, n, k_dim, v_dim, dtype);
  std::pair<mx::array, mx::array> out{std::move(*keys_), std::move(*values_)};
  keys_.reset();
  values_.reset();
  return out;
}

void KVCache::commit_update(mx::array keys, mx::array values, int n, bool exclusive) {
  keys_ = std::move(keys);
  values_ = std::move(values);
  offset_ += n;
  shared_ = !exclusive;
}

std::pair<mx::array, mx::array> KVCache::keys_and_values() const {
  if (!keys_) throw Error("[KVCache::keys_and_values] the cache is empty");
  shared_ = true;
  if (offset_ < keys_->shape(2)) {
    return {seq_slice(*keys_, 0, offset_), seq_slice(*values_, 0, offset_)};
  }
  return {*keys_, *values_};
}

AttentionMask KVCache::make_mask(int n, std::optional<int> window_size, bool return_array) const {
  return create_attention_mask(n, offset_, return_array, window_size);
}

int KVCache::trim(int n) {
  cache_detail::check_trim("KVCache::trim", n);
  n = std::min(offset_, n);
  offset_ -= n;
  return n;
}

int64_t KVCache::nbytes() const { return cache_detail::buffer_bytes(keys_, values_); }

std::vector<mx::array> KVCache::state() const {
  if (!keys_) return {};
  shared_ = true;
  return {*keys_, *values_};
}

std::vector<mx::array> KVCache::state_to_eval() const {
  if (!keys_) return {};
  return {*keys_, *values_};
}

std::unique_ptr<KVCacheBase> KVCache::clone() const {
  shared_ = true;  // both copies now hold the same buffers
  return std::make_unique<KVCache>(*this);
}

void KVCache::set_state(mx::array keys, mx::array values, int offset) {
  cache_detail::check_state("KVCache::set_state", keys, values);
  if (offset < 0 || offset > keys.shape(2)) {
    throw Error("[KVCache::set_state] offset must be in [0, " + std::to_string(keys.shape(2)) +
                "] (the buffers' length), got " + std::to_string(offset));
  }
  keys_ = std::move(keys);
  values_ = std::move(values);
  offset_ = offset;
  shared_ = true;  // the caller may keep them
}

}  // namespace mlxcpp
