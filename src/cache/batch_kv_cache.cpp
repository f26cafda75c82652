// Port of mlx_lm/models/cache.py BatchKVCache (and dynamic_roll).
#include "cache/batch_kv_cache.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "cache/arrays_cache.h"
#include "cache/batch_quantized_kv_cache.h"
#include "cache/batch_quantized_rotating_kv_cache.h"
#include "cache/batch_rotating_kv_cache.h"
#include "cache/cache_ops.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using cache_detail::int_array;
using cache_detail::seq_assign;
using cache_detail::seq_slice;

namespace {

// x[indices] along axis 0.
mx::array take_rows(const mx::array& x, const std::vector<int>& rows) { return mx::take(x, int_array(rows), 0); }

}  // namespace

mx::array dynamic_roll(const mx::array& x, const std::vector<int>& shifts, int axis) {
  // idx = (arange(n)[..., None...] - shifts[..., None...]) % n, shifts [B] -> [B, 1, ..., 1].
  const int n = x.shape(axis);
  mx::Shape sshape(x.ndim(), 1);
  sshape[0] = static_cast<int>(shifts.size());
  mx::Shape ishape(x.ndim() - axis, 1);
  ishape[0] = n;
  auto idx = mx::remainder(mx::subtract(mx::reshape(mx::arange(n), ishape), mx::reshape(int_array(shifts), sshape)),
                           mx::array(n));
  return mx::take_along_axis(x, idx, axis);
}

BatchCacheBase::BatchCacheBase(std::vector<int> left_padding) : left_padding_(std::move(left_padding)) {
  offsets_.reserve(left_padding_.size());
  for (int l : left_padding_) offsets_.push_back(-l);
}

std::optional<mx::array> BatchCacheBase::row_offsets() const { return int_array(offsets_); }

std::unique_ptr<BatchCacheBase> BatchCacheBase::split_off(const std::vector<int>& rows) const {
  std::unique_ptr<BatchCacheBase> c(static_cast<BatchCacheBase*>(clone().release()));
  c->filter(rows);
  return c;
}

void BatchCacheBase::check_row(const char* op, int row) const {
  if (row < 0 || row >= batch_size()) {
    throw Error(fmt::format("[{}] row {} is outside the batch of {}", op, row, batch_size()));
  }
}

BatchCacheBase::Joined BatchCacheBase::join(const Side& a, const Side& b) {
  const int max_idx = std::max(a.idx, b.idx);
  const auto& ref = a.keys ? a : b;
  const int H = ref.keys->shape(1), D = ref.keys->shape(3), M = ref.values->shape(3);
  const mx::Dtype dtype = ref.keys->dtype();
  const int max_len = std::max(a.keys ? a.keys->shape(2) : 0, b.keys ? b.keys->shape(2) : 0);
  auto pad = [&](const Side& c, std::vector<int>& lp) {
    auto k = c.keys ? *c.keys : mx::zeros({c.rows, H, 0, D}, dtype);
    auto v = c.values ? *c.values : mx::zeros({c.rows, H, 0, M}, dtype);
    const int left = max_idx - c.idx;
    int right = max_len - k.shape(2) - left;
    if (right < 0) {
      k = seq_slice(k, 0, k.shape(2) + right);
      v = seq_slice(v, 0, v.shape(2) + right);
      right = 0;
    }
    if (left != 0 || right != 0) {
      std::vector<std::pair<int, int>> widths{{0, 0}, {0, 0}, {left, right}, {0, 0}};
      k = mx::pad(k, widths);
      v = mx::pad(v, widths);
    }
    for (int l : c.left_padding) lp.push_back(l + left);
    return std::pair{k, v};
  };
  std::vector<int> lp;
  auto [k1, v1] = pad(a, lp);
  auto [k2, v2] = pad(b, lp);
  return {mx::concatenate({k1, k2}, 0), mx::concatenate({v1, v2}, 0), std::move(lp), max_idx};
}

std::optional<BatchCacheBase::Stacked> BatchCacheBase::stack_rows(const std::vector<RowKV>& rows) {
  int H = 0, Dk = 0, Dv = 0, max_length = 0;
  std::optional<mx::Dtype> dt;
  for (const auto& r : rows) {
    if (!r) continue;
    H = std::max(H, r->first.shape(1));
    Dk = std::max(Dk, r->first.shape(3));
    Dv = std::max(Dv, r->second.shape(3));
    max_length = std::max(max_length, r->first.shape(2));
    if (!dt) dt = r->first.dtype();
  }
  if (max_length == 0) return std::nullopt;
  const int B = static_cast<int>(rows.size());
  std::vector<int> padding;
  for (const auto& r : rows) padding.push_back(max_length - (r ? r->first.shape(2) : 0));
  auto keys = mx::zeros({B, H, max_length, Dk}, *dt);
  auto values = mx::zeros({B, H, max_length, Dv}, *dt);
  for (int i = 0; i < B; ++i) {
    if (!rows[i]) continue;
    const auto& [k, v] = *rows[i];
    const int l = k.shape(2), p = max_length - l;
    keys = mx::slice_update(keys, mx::astype(k, *dt), mx::Shape{i, 0, p, 0}, mx::Shape{i + 1, H, p + l, Dk});
    values = mx::slice_update(values, mx::astype(v, *dt), mx::Shape{i, 0, p, 0}, mx::Shape{i + 1, H, p + l, Dv});
  }
  return Stacked{std::move(keys), std::move(values), std::move(padding), max_length};
}

BatchKVCache::BatchKVCache(std::vector<int> left_padding) : BatchCacheBase(std::move(left_padding)) {}

std::pair<mx::array, mx::array> BatchKVCache::update_and_fetch(const mx::array& keys_in, const mx::array& values_in) {
  cache_detail::check_update("BatchKVCache::update_and_fetch", keys_in, values_in);
  if (keys_in.shape(0) != batch_size()) {
    throw Error(fmt::format("[BatchKVCache::update_and_fetch] {} rows for a batch of {}", keys_in.shape(0), batch_size()));
  }
  const int prev = idx_;
  const int s = keys_in.shape(2);
  grow_for(keys_in.shape(1), s, keys_in.shape(3), values_in.shape(3), keys_ ? keys_->dtype() : keys_in.dtype());
  for (int& o : offsets_) o += s;
  idx_ += s;
  keys_ = seq_assign(*keys_, keys_in, prev);
  values_ = seq_assign(*values_, values_in, prev);
  return keys_and_values();
}

void BatchKVCache::grow_for(int heads, int n, int k_dim, int v_dim, mx::Dtype dtype) {
  if (cache_detail::grow_buffers(keys_, values_, idx_, n, batch_size(), heads, k_dim, v_dim, dtype, kStep)) {
    shared_ = false;
  }
}

std::pair<mx::array, mx::array> BatchKVCache::take_for_update(int heads, int n, int k_dim, int v_dim, mx::Dtype dtype) {
  if (!right_padding_.empty()) throw Error("[BatchKVCache::take_for_update] right padding awaits finalize()");
  grow_for(heads, n, k_dim, v_dim, keys_ ? keys_->dtype() : dtype);
  std::pair<mx::array, mx::array> out{std::move(*keys_), std::move(*values_)};
  keys_.reset();
  values_.reset();
  return out;
}

void BatchKVCache::commit_update(mx::array keys, mx::array values, int n, bool exclusive) {
  keys_ = std::move(keys);
  values_ = std::move(values);
  idx_ += n;
  for (int& o : offsets_) o += n;
  shared_ = !exclusive;
}

std::pair<mx::array, mx::array> BatchKVCache::keys_and_values() const {
  if (!keys_) throw Error("[BatchKVCache::keys_and_values] the cache is empty");
  shared_ = true;
  return {seq_slice(*keys_, 0, idx_), seq_slice(*values_, 0, idx_)};
}

void BatchKVCache::prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
                           const std::vector<int>& right_padding) {
  (void)lengths;
  if (!left_padding.empty()) {
    if (keys_) throw Error("[BatchKVCache::prepare] left padding can only be added to an empty cache");
    if (left_padding.size() != left_padding_.size()) throw Error("[BatchKVCache::prepare] left padding: one per row");
    for (size_t i = 0; i < left_padding.size(); ++i) {
      left_padding_[i] += left_padding[i];
      offsets_[i] -= left_padding[i];
    }
  }
  if (!right_padding.empty() && *std::max_element(right_padding.begin(), right_padding.end()) > 0) {
    if (right_padding.size() != offsets_.size()) throw Error("[BatchKVCache::prepare] right padding: one per row");
    right_padding_ = right_padding;
  }
}

void BatchKVCache::finalize() {
  if (right_padding_.empty()) return;
  if (keys_) {
    keys_ = dynamic_roll(*keys_, right_padding_, 2);
    values_ = dynamic_roll(*values_, right_padding_, 2);
  }
  for (size_t i = 0; i < offsets_.size(); ++i) {
    offsets_[i] -= right_padding_[i];
    left_padding_[i] += right_padding_[i];
  }
  right_padding_.clear();
}

int BatchKVCache::trim(int n) {
  cache_detail::check_trim("BatchKVCache::trim", n);
  n = std::min(idx_, n);
  idx_ -= n;
  for (int& o : offsets_) o -= n;
  return n;
}

AttentionMask BatchKVCache::make_mask(int n, std::optional<int> window_size, bool) const {
  return AttentionMask::of(create_causal_mask(n, idx_, window_size, left_padding_));
}

void BatchKVCache::filter(const std::vector<int>& keep) {
  for (int r : keep) check_row("BatchKVCache::filter", r);
  if (keep.empty()) {
    keys_.reset();
    values_.reset();
    left_padding_.clear();
    offsets_.clear();
    idx_ = 0;
    return;
  }
  if (keys_) {
    keys_ = take_rows(*keys_, keep);
    values_ = take_rows(*values_, keep);
  }
  std::vector<int> lp, off;
  for (int r : keep) {
    lp.push_back(left_padding_[r]);
    off.push_back(offsets_[r]);
  }
  left_padding_ = std::move(lp);
  offsets_ = std::move(off);
  // Shift left to drop the padding every row shares.
  const int min_pad = *std::min_element(left_padding_.begin(), left_padding_.end());
  if (min_pad > 0) {
    if (keys_) {
      keys_ = seq_slice(*keys_, min_pad, keys_->shape(2));
      values_ = seq_slice(*values_, min_pad, values_->shape(2));
    }
    idx_ -= min_pad;
    for (int& l : left_padding_) l -= min_pad;
  }
}

void BatchKVCache::extend(BatchCacheBase& other_base) {
  auto* other = dynamic_cast<BatchKVCache*>(&other_base);
  if (other == nullptr) throw Error("[BatchKVCache::extend] the other cache is not a BatchKVCache");
  // b by value: other may be this cache.
  auto append = [](std::vector<int>& a, std::vector<int> b) { a.insert(a.end(), b.begin(), b.end()); };
  if (!keys_ && !other->keys_) {
    append(left_padding_, other->left_padding_);
    append(offsets_, other->offsets_);
    return;
  }
  auto j = join({keys_, values_, idx_, left_padding_, batch_size()},
                {other->keys_, other->values_, other->idx_, other->left_padding_, other->batch_size()});
  keys_ = std::move(j.keys);
  values_ = std::move(j.values);
  left_padding_ = std::move(j.left_padding);
  append(offsets_, other->offsets_);
  idx_ = j.idx;
}

std::unique_ptr<KVCacheBase> BatchKVCache::extract(int row) const {
  check_row("BatchKVCache::extract", row);
  auto cache = std::make_unique<KVCache>();
  if (!keys_) return cache;
  // contiguous() of an already contiguous slice is a view of our buffers: they are shared now.
  shared_ = true;
  const int pad = left_padding_[row];
  auto k = mx::contiguous(mx::slice(*keys_, mx::Shape{row, 0, pad, 0}, mx::Shape{row + 1, keys_->shape(1), idx_, keys_->shape(3)}));
  auto v = mx::contiguous(mx::slice(*values_, mx::Shape{row, 0, pad, 0}, mx::Shape{row + 1, values_->shape(1), idx_, values_->shape(3)}));
  const int len = k.shape(2);
  cache->set_state(std::move(k), std::move(v), len);
  return cache;
}

std::unique_ptr<BatchKVCache> BatchKVCache::merge(const std::vector<const KVCache*>& caches) {
  std::vector<RowKV> rows;
  for (const auto* c : caches) {
    if (c->empty()) rows.emplace_back();
    else rows.emplace_back(c->keys_and_values());  // the first offset rows
  }
  auto st = stack_rows(rows);
  if (!st) return std::make_unique<BatchKVCache>(std::vector<int>(caches.size(), 0));
  auto cache = std::make_unique<BatchKVCache>(std::move(st->left_padding));
  cache->keys_ = std::move(st->keys);
  cache->values_ = std::move(st->values);
  for (int& o : cache->offsets_) o += st->length;
  cache->idx_ = st->length;
  return cache;
}

int64_t BatchKVCache::nbytes() const { return cache_detail::buffer_bytes(keys_, values_); }

std::vector<mx::array> BatchKVCache::state() const {
  if (!keys_) return {};
  shared_ = true;
  return {*keys_, *values_};
}

std::unique_ptr<KVCacheBase> BatchKVCache::clone() const {
  shared_ = true;
  return std::make_unique<BatchKVCache>(*this); }

std::unique_ptr<BatchCacheBase> merge_layer_caches(const std::vector<const KVCacheBase*>& caches) {
  if (caches.empty()) throw Error("[merge_layer_caches] no caches to merge");
  std::vector<const KVCache*> kv;
  std::vector<const RotatingKVCache*> rot;
  std::vector<const ArraysCache*> arrays;
  std::vector<const QuantizedKVCache*> quantized;
  std::vector<const QuantizedRotatingKVCache*> quantized_rot;
  for (const auto* c : caches) {
    if (const auto* q = dynamic_cast<const QuantizedRotatingKVCache*>(c)) {
      quantized_rot.push_back(q);
      continue;
    }
    if (const auto* a = dynamic_cast<const ArraysCache*>(c)) {
      arrays.push_back(a);
      continue;
    }
    if (const auto* q = dynamic_cast<const QuantizedKVCache*>(c)) {
      quantized.push_back(q);
      continue;
    }
    if (const auto* k = dynamic_cast<const KVCache*>(c)) kv.push_back(k);
    else if (const auto* r = dynamic_cast<const RotatingKVCache*>(c)) rot.push_back(r);
    else throw Error("[merge_layer_caches] only KVCache, RotatingKVCache, their quantized caches and ArraysCache layers can be batched");
  }
  if (!quantized_rot.empty()) {
    if (quantized_rot.size() != caches.size()) {
      throw Error("[merge_layer_caches] a layer's caches mix quantized rotating caches and others");
    }
    return BatchQuantizedRotatingKVCache::merge(quantized_rot);
  }
  if (!quantized.empty()) {
    if (quantized.size() != caches.size()) throw Error("[merge_layer_caches] a layer's caches mix quantized and plain ones");
    return BatchQuantizedKVCache::merge(quantized);
  }
  if (!arrays.empty()) {
    if (arrays.size() != caches.size()) throw Error("[merge_layer_caches] a layer's caches mix recurrent and KV caches");
    return BatchArraysCache::merge(arrays);
  }
  if (!kv.empty() && !rot.empty()) throw Error("[merge_layer_caches] a layer's caches mix KVCache and RotatingKVCache");
  if (!kv.empty()) return BatchKVCache::merge(kv);
  return BatchRotatingKVCache::merge(rot);
}

}  // namespace mlxcpp
