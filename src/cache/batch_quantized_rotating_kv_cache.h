// A batch of quantized rotating caches (sliding-window layers with --kv-bits in a batch; mlx-lm
// has neither the quantized ring nor a batch of quantized caches): QuantizedRotatingKVCache's three
// rings (packed rows, scales, biases) as three BatchRotatingKVCache planes moved in lockstep
// (QuantizedPlanes), so the ring's writes, temporal order, left padding, filter, extend, extract
// and merge are BatchRotatingKVCache's own; attention reads the rows with the ring's mask.
#pragma once

#include <memory>
#include <vector>

#include "cache/batch_rotating_kv_cache.h"
#include "cache/quantized_planes.h"
#include "cache/quantized_rotating_kv_cache.h"

namespace mlxcpp {

class BatchQuantizedRotatingKVCache final : public QuantizedPlanes<BatchRotatingKVCache> {
 public:
  // Solo quantized rotating caches (any may be empty; one max_size, group size and bits) as one batch.
  static std::unique_ptr<BatchQuantizedRotatingKVCache> merge(const std::vector<const QuantizedRotatingKVCache*>& caches);

  std::unique_ptr<KVCacheBase> clone() const override;
  // A QuantizedRotatingKVCache holding the row's tokens in temporal order.
  std::unique_ptr<KVCacheBase> extract(int row) const override;

 private:
  BatchQuantizedRotatingKVCache(Planes planes, int group_size, int bits)
      : QuantizedPlanes(std::move(planes), group_size, bits, "BatchQuantizedRotatingKVCache") {}
};

}  // namespace mlxcpp
