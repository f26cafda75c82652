#include "cache/batch_quantized_rotating_kv_cache.h"

#include "cache/rotating_kv_cache.h"
#include "core/errors.h"

namespace mlxcpp {

std::unique_ptr<BatchQuantizedRotatingKVCache> BatchQuantizedRotatingKVCache::merge(
    const std::vector<const QuantizedRotatingKVCache*>& caches) {
  if (caches.empty()) throw Error("[BatchQuantizedRotatingKVCache::merge] no caches to merge");
  const int g = caches.front()->group_size(), b = caches.front()->bits();
  Planes planes;
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

std::unique_ptr<KVCacheBase> BatchQuantizedRotatingKVCache::clone() const {
  return std::unique_ptr<KVCacheBase>(new BatchQuantizedRotatingKVCache(cloned_planes(), group_size_, bits_));
}

std::unique_ptr<KVCacheBase> BatchQuantizedRotatingKVCache::extract(int row) const {
  check_row("BatchQuantizedRotatingKVCache::extract", row);
  const int max_size = planes_[0]->max_size();
  std::array<RotatingKVCache, 3> lanes{RotatingKVCache(max_size), RotatingKVCache(max_size), RotatingKVCache(max_size)};
  for (int c = 0; c < 3; ++c) {
    auto solo = planes_[c]->extract(row);
    lanes[c] = std::move(*static_cast<RotatingKVCache*>(solo.get()));
  }
  return QuantizedRotatingKVCache::from_lanes(std::move(lanes), group_size_, bits_);
}

}  // namespace mlxcpp
