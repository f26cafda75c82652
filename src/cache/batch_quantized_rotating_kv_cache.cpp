#include "cache/batch_quantized_rotating_kv_cache.h"

#include "cache/rotating_kv_cache.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

const mx::array& part(const QuantizedRows& r, int c) { return c == 0 ? r.w : c == 1 ? r.scales : r.biases; }

}  // namespace

BatchQuantizedRotatingKVCache::BatchQuantizedRotatingKVCache(std::array<std::unique_ptr<BatchRotatingKVCache>, 3> planes,
                                                             int group_size, int bits)
    : BatchCacheBase(planes[0]->left_padding()), planes_(std::move(planes)), group_size_(group_size), bits_(bits) {
  sync();
}

void BatchQuantizedRotatingKVCache::sync() {
  left_padding_ = planes_[0]->left_padding();
  offsets_ = planes_[0]->offsets();
}

std::unique_ptr<BatchQuantizedRotatingKVCache> BatchQuantizedRotatingKVCache::merge(
    const std::vector<const QuantizedRotatingKVCache*>& caches) {
  if (caches.empty()) throw Error("[BatchQuantizedRotatingKVCache::merge] no caches to merge");
  const int g = caches.front()->group_size(), b = caches.front()->bits();
  std::array<std::unique_ptr<BatchRotatingKVCache>, 3> planes;
  for (int c = 0; c < 3; ++c) {
    std::vector<const RotatingKVCache*> lanes;
    for (const auto* q : caches) {
      if (q->group_size() != g || q->bits() != b) {
        throw Error("[BatchQuantizedRotatingKVCache::merge] the caches are quantized differently");
      }
      lanes.push_back(&q->lane(c));
    }
    planes[c] = BatchRotatingKVCache::merge(lanes);
  }
  return std::unique_ptr<BatchQuantizedRotatingKVCache>(new BatchQuantizedRotatingKVCache(std::move(planes), g, b));
}

std::pair<QuantizedRows, QuantizedRows> BatchQuantizedRotatingKVCache::update_and_fetch_quantized(
    const mx::array& keys, const mx::array& values) {
  auto qk = quantize_rows(keys, group_size_, bits_), qv = quantize_rows(values, group_size_, bits_);
  std::array<std::pair<mx::array, mx::array>, 3> got{std::pair{mx::array(0), mx::array(0)},
                                                     std::pair{mx::array(0), mx::array(0)},
                                                     std::pair{mx::array(0), mx::array(0)}};
  for (int c = 0; c < 3; ++c) got[c] = planes_[c]->update_and_fetch(part(qk, c), part(qv, c));
  sync();
  return {QuantizedRows{got[0].first, got[1].first, got[2].first},
          QuantizedRows{got[0].second, got[1].second, got[2].second}};
}

std::pair<mx::array, mx::array> BatchQuantizedRotatingKVCache::update_and_fetch(const mx::array&, const mx::array&) {
  throw Error("[BatchQuantizedRotatingKVCache] holds quantized keys/values: attention must read them with "
              "update_and_fetch_quantized");
}

int BatchQuantizedRotatingKVCache::trim(int n) {
  int got = 0;
  for (auto& p : planes_) got = p->trim(n);
  sync();
  return got;
}

int64_t BatchQuantizedRotatingKVCache::nbytes() const {
  int64_t n = 0;
  for (const auto& p : planes_) n += p->nbytes();
  return n;
}

std::vector<mx::array> BatchQuantizedRotatingKVCache::state() const {
  std::vector<mx::array> out;
  for (const auto& p : planes_) {
    for (auto& a : p->state()) out.push_back(std::move(a));
  }
  return out;
}

std::unique_ptr<KVCacheBase> BatchQuantizedRotatingKVCache::clone() const {
  std::array<std::unique_ptr<BatchRotatingKVCache>, 3> planes;
  for (int c = 0; c < 3; ++c) planes[c].reset(static_cast<BatchRotatingKVCache*>(planes_[c]->clone().release()));
  return std::unique_ptr<KVCacheBase>(new BatchQuantizedRotatingKVCache(std::move(planes), group_size_, bits_));
}

void BatchQuantizedRotatingKVCache::prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
                                            const std::vector<int>& right_padding) {
  for (auto& p : planes_) p->prepare(left_padding, lengths, right_padding);
  sync();
}

void BatchQuantizedRotatingKVCache::finalize() {
  for (auto& p : planes_) p->finalize();
  sync();
}

void BatchQuantizedRotatingKVCache::filter(const std::vector<int>& keep) {
  for (auto& p : planes_) p->filter(keep);
  sync();
}

void BatchQuantizedRotatingKVCache::extend(BatchCacheBase& other_base) {
  auto* other = dynamic_cast<BatchQuantizedRotatingKVCache*>(&other_base);
  if (other == nullptr || other->group_size_ != group_size_ || other->bits_ != bits_) {
    throw Error("[BatchQuantizedRotatingKVCache::extend] the other cache is not quantized the same way");
  }
  for (int c = 0; c < 3; ++c) planes_[c]->extend(*other->planes_[c]);
  sync();
}

std::unique_ptr<KVCacheBase> BatchQuantizedRotatingKVCache::extract(int row) const {
  check_row("BatchQuantizedRotatingKVCache::extract", row);
  std::array<RotatingKVCache, 3> lanes{RotatingKVCache(planes_[0]->max_size()), RotatingKVCache(planes_[0]->max_size()),
                                       RotatingKVCache(planes_[0]->max_size())};
  for (int c = 0; c < 3; ++c) {
    auto solo = planes_[c]->extract(row);
    lanes[c] = std::move(*static_cast<RotatingKVCache*>(solo.get()));
  }
  return QuantizedRotatingKVCache::from_lanes(std::move(lanes), group_size_, bits_);
}

}  // namespace mlxcpp
