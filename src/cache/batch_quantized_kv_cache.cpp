#include "cache/batch_quantized_kv_cache.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Component c (0 w, 1 scales, 2 biases) of quantized rows.
const mx::array& part(const QuantizedRows& r, int c) { return c == 0 ? r.w : c == 1 ? r.scales : r.biases; }

}  // namespace

BatchQuantizedKVCache::BatchQuantizedKVCache(std::array<std::unique_ptr<BatchKVCache>, 3> planes, int group_size,
                                             int bits)
    : BatchCacheBase(planes[0]->left_padding()), planes_(std::move(planes)), group_size_(group_size), bits_(bits) {
  sync();
}

void BatchQuantizedKVCache::sync() {
  left_padding_ = planes_[0]->left_padding();
  offsets_ = planes_[0]->offsets();
}

std::unique_ptr<BatchQuantizedKVCache> BatchQuantizedKVCache::merge(const std::vector<const QuantizedKVCache*>& caches) {
  if (caches.empty()) throw Error("[BatchQuantizedKVCache::merge] no caches to merge");
  const int g = caches.front()->group_size(), b = caches.front()->bits();
  // Each component's rows as plain caches, merged as BatchKVCache merges them.
  std::array<std::vector<KVCache>, 3> plain;
  for (auto& p : plain) p.resize(caches.size());
  for (size_t i = 0; i < caches.size(); ++i) {
    const auto* c = caches[i];
    if (c->group_size() != g || c->bits() != b) {
      throw Error("[BatchQuantizedKVCache::merge] the caches are quantized differently");
    }
    if (c->empty()) continue;
    auto [k, v] = c->rows();
    for (int p = 0; p < 3; ++p) plain[p][i].set_state(part(k, p), part(v, p), c->offset());
  }
  std::array<std::unique_ptr<BatchKVCache>, 3> planes;
  for (int p = 0; p < 3; ++p) {
    std::vector<const KVCache*> ptrs;
    for (const auto& c : plain[p]) ptrs.push_back(&c);
    planes[p] = BatchKVCache::merge(ptrs);
  }
  return std::unique_ptr<BatchQuantizedKVCache>(new BatchQuantizedKVCache(std::move(planes), g, b));
}

std::pair<QuantizedRows, QuantizedRows> BatchQuantizedKVCache::update_and_fetch_quantized(const mx::array& keys,
                                                                                          const mx::array& values) {
  auto qk = quantize_rows(keys, group_size_, bits_), qv = quantize_rows(values, group_size_, bits_);
  std::array<std::pair<mx::array, mx::array>, 3> got{std::pair{mx::array(0), mx::array(0)},
                                                     std::pair{mx::array(0), mx::array(0)},
                                                     std::pair{mx::array(0), mx::array(0)}};
  for (int c = 0; c < 3; ++c) got[c] = planes_[c]->update_and_fetch(part(qk, c), part(qv, c));
  sync();
  return {QuantizedRows{got[0].first, got[1].first, got[2].first},
          QuantizedRows{got[0].second, got[1].second, got[2].second}};
}

std::array<mx::array, 6> BatchQuantizedKVCache::take_for_update(int batch, int heads, int n, int dim,
                                                                 mx::Dtype scale_dtype) {
  if (batch != batch_size()) throw Error("[BatchQuantizedKVCache::take_for_update] batch size differs from the cache's");
  auto [kw, vw] = planes_[0]->take_for_update(heads, n, dim * bits_ / 32, dim * bits_ / 32, mx::uint32);
  auto [ks, vs] = planes_[1]->take_for_update(heads, n, dim / group_size_, dim / group_size_, scale_dtype);
  auto [kb, vb] = planes_[2]->take_for_update(heads, n, dim / group_size_, dim / group_size_, scale_dtype);
  return {std::move(kw), std::move(ks), std::move(kb), std::move(vw), std::move(vs), std::move(vb)};
}

void BatchQuantizedKVCache::commit_update(std::array<mx::array, 6> b, int n, bool exclusive) {
  for (int c = 0; c < 3; ++c) planes_[c]->commit_update(std::move(b[c]), std::move(b[3 + c]), n, exclusive);
  sync();
}

std::optional<mx::Dtype> BatchQuantizedKVCache::scale_dtype() const {
  if (planes_[1]->empty()) return std::nullopt;
  return planes_[1]->state_to_eval()[0].dtype();
}

bool BatchQuantizedKVCache::exclusive() const {
  return planes_[0]->exclusive() && planes_[1]->exclusive() && planes_[2]->exclusive();
}

std::pair<mx::array, mx::array> BatchQuantizedKVCache::update_and_fetch(const mx::array&, const mx::array&) {
  throw Error("[BatchQuantizedKVCache] holds quantized keys/values: attention must read them with "
              "update_and_fetch_quantized");
}

AttentionMask BatchQuantizedKVCache::make_mask(int n, std::optional<int> window_size, bool return_array) const {
  return planes_[0]->make_mask(n, window_size, return_array);
}

int BatchQuantizedKVCache::trim(int n) {
  int got = 0;
  for (auto& p : planes_) got = p->trim(n);
  sync();
  return got;
}

int64_t BatchQuantizedKVCache::nbytes() const {
  int64_t n = 0;
  for (const auto& p : planes_) n += p->nbytes();
  return n;
}

std::vector<mx::array> BatchQuantizedKVCache::state() const {
  std::vector<mx::array> out;
  for (const auto& p : planes_) {
    for (auto& a : p->state()) out.push_back(std::move(a));
  }
  return out;
}

std::vector<mx::array> BatchQuantizedKVCache::state_to_eval() const {
  std::vector<mx::array> out;
  for (const auto& p : planes_) {
    for (auto& a : p->state_to_eval()) out.push_back(std::move(a));
  }
  return out;
}

std::unique_ptr<KVCacheBase> BatchQuantizedKVCache::clone() const {
  std::array<std::unique_ptr<BatchKVCache>, 3> planes;
  for (int c = 0; c < 3; ++c) planes[c].reset(static_cast<BatchKVCache*>(planes_[c]->clone().release()));
  return std::unique_ptr<KVCacheBase>(new BatchQuantizedKVCache(std::move(planes), group_size_, bits_));
}

void BatchQuantizedKVCache::prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
                                    const std::vector<int>& right_padding) {
  for (auto& p : planes_) p->prepare(left_padding, lengths, right_padding);
  sync();
}

void BatchQuantizedKVCache::finalize() {
  for (auto& p : planes_) p->finalize();
  sync();
}

void BatchQuantizedKVCache::filter(const std::vector<int>& keep) {
  for (auto& p : planes_) p->filter(keep);
  sync();
}

void BatchQuantizedKVCache::extend(BatchCacheBase& other_base) {
  auto* other = dynamic_cast<BatchQuantizedKVCache*>(&other_base);
  if (other == nullptr || other->group_size_ != group_size_ || other->bits_ != bits_) {
    throw Error("[BatchQuantizedKVCache::extend] the other cache is not quantized the same way");
  }
  for (int c = 0; c < 3; ++c) planes_[c]->extend(*other->planes_[c]);
  sync();
}

std::unique_ptr<KVCacheBase> BatchQuantizedKVCache::extract(int row) const {
  check_row("BatchQuantizedKVCache::extract", row);
  std::array<std::pair<mx::array, mx::array>, 3> kv{std::pair{mx::array(0), mx::array(0)},
                                                    std::pair{mx::array(0), mx::array(0)},
                                                    std::pair{mx::array(0), mx::array(0)}};
  int len = 0;
  for (int c = 0; c < 3; ++c) {
    auto solo = planes_[c]->extract(row);
    auto* kvc = static_cast<KVCache*>(solo.get());
    if (kvc->empty()) return std::make_unique<QuantizedKVCache>(group_size_, bits_);
    kv[c] = kvc->keys_and_values();
    len = kvc->offset();
  }
  return QuantizedKVCache::from_rows(QuantizedRows{kv[0].first, kv[1].first, kv[2].first},
                                     QuantizedRows{kv[0].second, kv[1].second, kv[2].second}, len, group_size_, bits_);
}

}  // namespace mlxcpp
