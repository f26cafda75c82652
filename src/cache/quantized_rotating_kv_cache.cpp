#include "cache/quantized_rotating_kv_cache.h"

namespace mx = mlx::core;

namespace mlxcpp {

QuantizedRotatingKVCache::QuantizedRotatingKVCache(int max_size, int keep, int group_size, int bits)
    : QuantizedCache(group_size, bits),
      lanes_{RotatingKVCache(max_size, keep), RotatingKVCache(max_size, keep), RotatingKVCache(max_size, keep)} {}

std::unique_ptr<QuantizedRotatingKVCache> QuantizedRotatingKVCache::from(const RotatingKVCache& cache, int group_size,
                                                                         int bits) {
  auto q = std::make_unique<QuantizedRotatingKVCache>(cache.max_size(), cache.keep(), group_size, bits);
  auto s = cache.state();
  if (s.empty()) return q;
  const auto k = q->quantize(s[0]), v = q->quantize(s[1]);
  const mx::array ks[3] = {k.w, k.scales, k.biases}, vs[3] = {v.w, v.scales, v.biases};
  for (int i = 0; i < 3; ++i) {
    q->lanes_[i].set_state(ks[i], vs[i], cache.offset(), cache.keep(), cache.max_size(), cache.idx());
  }
  return q;
}

std::unique_ptr<QuantizedRotatingKVCache> QuantizedRotatingKVCache::from_lanes(std::array<RotatingKVCache, 3> lanes,
                                                                               int group_size, int bits) {
  auto q = std::make_unique<QuantizedRotatingKVCache>(lanes[0].max_size(), lanes[0].keep(), group_size, bits);
  q->lanes_ = std::move(lanes);
  return q;
}

std::pair<QuantizedRows, QuantizedRows> QuantizedRotatingKVCache::update_and_fetch_quantized(const mx::array& keys,
                                                                                             const mx::array& values) {
  const auto k = quantize(keys), v = quantize(values);
  auto [kw, vw] = lanes_[0].update_and_fetch(k.w, v.w);
  auto [ks, vs] = lanes_[1].update_and_fetch(k.scales, v.scales);
  auto [kb, vb] = lanes_[2].update_and_fetch(k.biases, v.biases);
  return {QuantizedRows{kw, ks, kb}, QuantizedRows{vw, vs, vb}};
}

int QuantizedRotatingKVCache::trim(int n) {
  int out = 0;
  for (auto& l : lanes_) out = l.trim(n);
  return out;
}

int64_t QuantizedRotatingKVCache::nbytes() const {
  int64_t b = 0;
  for (const auto& l : lanes_) b += l.nbytes();
  return b;
}

std::vector<mx::array> QuantizedRotatingKVCache::state() const {
  std::vector<mx::array> out;
  for (const auto& l : lanes_) {
    for (auto& a : l.state()) out.push_back(a);
  }
  return out;
}

}  // namespace mlxcpp
