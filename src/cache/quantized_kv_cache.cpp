// Port of mlx_lm/models/cache.py QuantizedKVCache (and KVCache.to_quantized).
#include "cache/quantized_kv_cache.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "cache/cache_ops.h"
#include "cache/quantized_rotating_kv_cache.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using cache_detail::seq_assign;
using cache_detail::seq_slice;

QuantizedRows quantize_rows(const mx::array& x, int group_size, int bits) {
  if (x.shape(-1) % group_size != 0) {
    throw RequestError(fmt::format("[kv cache] kv_group_size {} does not divide the head dimension {}", group_size,
                                   x.shape(-1)));
  }
  auto q = mx::quantize(x, group_size, bits);
  return {q.at(0), q.at(1), q.at(2)};
}

namespace {

QuantizedRows map_rows(const QuantizedRows& r, const std::function<mx::array(const mx::array&)>& f) {
  return {f(r.w), f(r.scales), f(r.biases)};
}

int64_t rows_bytes(const std::optional<QuantizedRows>& r) {
  return r ? static_cast<int64_t>(r->w.nbytes() + r->scales.nbytes() + r->biases.nbytes()) : 0;
}

}  // namespace

void check_kv_quantization(const KvQuantization& q) {
  if (q.bits != 2 && q.bits != 4 && q.bits != 8) {
    throw RequestError(fmt::format("kv_bits must be 2, 4 or 8, got {}", q.bits));
  }
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128) {
    throw RequestError(fmt::format("kv_group_size must be 32, 64 or 128, got {}", q.group_size));
  }
  if (q.start < 0) throw RequestError(fmt::format("quantized_kv_start must be >= 0, got {}", q.start));
}

QuantizedCache::QuantizedCache(int group_size, int bits) : group_size_(group_size), bits_(bits) {
  check_kv_quantization({bits, group_size, 0});
}

std::pair<mx::array, mx::array> QuantizedCache::update_and_fetch(const mx::array&, const mx::array&) {
  throw Error("[quantized kv cache] holds quantized keys/values: attention must read them with update_and_fetch_quantized");
}

QuantizedRows QuantizedCache::quantize(const mx::array& x) const { return quantize_rows(x, group_size_, bits_); }

QuantizedKVCache::QuantizedKVCache(int group_size, int bits) : QuantizedCache(group_size, bits) {}

std::unique_ptr<QuantizedKVCache> QuantizedKVCache::from(const KVCache& cache, int group_size, int bits) {
  auto q = std::make_unique<QuantizedKVCache>(group_size, bits);
  q->offset_ = cache.offset();
  if (auto s = cache.state(); !s.empty()) {
    q->keys_ = quantize_rows(s[0], group_size, bits);
    q->values_ = quantize_rows(s[1], group_size, bits);
  }
  return q;
}

std::unique_ptr<QuantizedKVCache> QuantizedKVCache::from_rows(QuantizedRows keys, QuantizedRows values, int offset,
                                                              int group_size, int bits) {
  auto q = std::make_unique<QuantizedKVCache>(group_size, bits);
  q->offset_ = offset;
  if (offset > 0) {
    q->keys_ = std::move(keys);
    q->values_ = std::move(values);
    q->shared_ = true;  // the caller may hold them too
  }
  return q;
}

std::pair<QuantizedRows, QuantizedRows> QuantizedKVCache::rows() const {
  if (!keys_) throw Error("[QuantizedKVCache::rows] the cache is empty");
  return fetch();
}

void QuantizedKVCache::grow_for(int batch, int heads, int n, int k_dim, int v_dim, mx::Dtype dtype) {
  if (keys_ && offset_ + n <= keys_->w.shape(2)) return;
  const int rows = (kStep + n - 1) / kStep * kStep;
  auto zeros = [&](int last, mx::Dtype dt) { return mx::zeros({batch, heads, rows, last}, dt); };
  if (!keys_) {
    const int per_int = 32 / bits();
    auto init = [&](int dim) {
      return QuantizedRows{zeros(dim / per_int, mx::uint32), zeros(dim / group_size(), dtype),
                           zeros(dim / group_size(), dtype)};
    };
    keys_ = init(k_dim);
    values_ = init(v_dim);
    shared_ = false;  // fresh buffers
    return;
  }
  const int prev = offset_;
  auto expand = [&](const mx::array& a) {
    auto used = prev % kStep != 0 ? seq_slice(a, 0, prev) : a;
    return mx::concatenate({used, zeros(a.shape(3), a.dtype())}, 2);
  };
  keys_ = map_rows(*keys_, expand);
  values_ = map_rows(*values_, expand);
  shared_ = false;
}

std::array<mx::array, 6> QuantizedKVCache::take_for_update(int batch, int heads, int n, int dim, mx::Dtype scale_dtype) {
  grow_for(batch, heads, n, dim, dim, keys_ ? keys_->scales.dtype() : scale_dtype);
  std::array<mx::array, 6> out{std::move(keys_->w),   std::move(keys_->scales),   std::move(keys_->biases),
                               std::move(values_->w), std::move(values_->scales), std::move(values_->biases)};
  keys_.reset();
  values_.reset();
  return out;
}

void QuantizedKVCache::commit_update(std::array<mx::array, 6> b, int n, bool exclusive) {
  keys_ = QuantizedRows{std::move(b[0]), std::move(b[1]), std::move(b[2])};
  values_ = QuantizedRows{std::move(b[3]), std::move(b[4]), std::move(b[5])};
  offset_ += n;
  shared_ = !exclusive;
}

std::pair<QuantizedRows, QuantizedRows> QuantizedKVCache::update_and_fetch_quantized(const mx::array& keys,
                                                                                     const mx::array& values) {
  cache_detail::check_update("QuantizedKVCache::update_and_fetch", keys, values);
  const int s = keys.shape(2);
  grow_for(keys.shape(0), keys.shape(1), s, keys.shape(3), values.shape(3), keys.dtype());
  const int prev = offset_;
  offset_ += s;
  auto qk = quantize(keys), qv = quantize(values);
  keys_ = QuantizedRows{seq_assign(keys_->w, qk.w, prev), seq_assign(keys_->scales, qk.scales, prev),
                        seq_assign(keys_->biases, qk.biases, prev)};
  values_ = QuantizedRows{seq_assign(values_->w, qv.w, prev), seq_assign(values_->scales, qv.scales, prev),
                          seq_assign(values_->biases, qv.biases, prev)};
  return fetch();
}

std::pair<QuantizedRows, QuantizedRows> QuantizedKVCache::fetch() const {
  shared_ = true;
  if (offset_ == keys_->w.shape(2)) return {*keys_, *values_};
  auto head = [&](const mx::array& a) { return seq_slice(a, 0, offset_); };
  return {map_rows(*keys_, head), map_rows(*values_, head)};
}

AttentionMask QuantizedKVCache::make_mask(int n, std::optional<int> window_size, bool return_array) const {
  return create_attention_mask(n, offset_, return_array, window_size);
}

int QuantizedKVCache::trim(int n) {
  cache_detail::check_trim("QuantizedKVCache::trim", n);
  n = std::min(offset_, n);
  offset_ -= n;
  return n;
}

int64_t QuantizedKVCache::nbytes() const { return rows_bytes(keys_) + rows_bytes(values_); }

std::vector<mx::array> QuantizedKVCache::state() const {
  if (!keys_) return {};
  shared_ = true;
  return {keys_->w, keys_->scales, keys_->biases, values_->w, values_->scales, values_->biases};
}

std::vector<mx::array> QuantizedKVCache::state_to_eval() const {
  if (!keys_) return {};
  return {keys_->w, keys_->scales, keys_->biases, values_->w, values_->scales, values_->biases};
}

std::unique_ptr<KVCacheBase> QuantizedKVCache::clone() const {
  shared_ = true;  // both copies now hold the same buffers
  return std::make_unique<QuantizedKVCache>(*this);
}

void maybe_quantize_kv_cache(LayerCaches& caches, const KvQuantization& q) {
  for (auto& c : caches) {
    if (c->offset() < q.start) continue;
    if (auto* kv = dynamic_cast<KVCache*>(c.get())) {
      c = QuantizedKVCache::from(*kv, q.group_size, q.bits);
    } else if (auto* rot = dynamic_cast<RotatingKVCache*>(c.get())) {
      c = QuantizedRotatingKVCache::from(*rot, q.group_size, q.bits);
    }
  }
}

}  // namespace mlxcpp
