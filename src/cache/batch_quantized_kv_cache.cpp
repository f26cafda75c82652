#include "cache/batch_quantized_kv_cache.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Component c (0 w, 1 scales, 2 biases) of quantized rows.
const mx::array& part(const QuantizedRows& r, int c) { return c == 0 ? r.w : c == 1 ? r.scales : r.biases; }

}  // namespace

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
  Planes planes;
  for (int p = 0; p < 3; ++p) {
    std::vector<const KVCache*> ptrs;
    for (const auto& c : plain[p]) ptrs.push_back(&c);
    planes[p] = BatchKVCache::merge(ptrs);
  }
  return std::unique_ptr<BatchQuantizedKVCache>(new BatchQuantizedKVCache(std::move(planes), g, b));
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

std::unique_ptr<KVCacheBase> BatchQuantizedKVCache::clone() const {
  return std::unique_ptr<KVCacheBase>(new BatchQuantizedKVCache(cloned_planes(), group_size_, bits_));
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
