// A batch of quantized KV caches (what mlx-lm lacks: its BatchGenerator cannot batch a
// QuantizedKVCache): QuantizedKVCache's packed rows, scales and biases, each held as a BatchKVCache
// plane (keys and values of one component) moved in lockstep (QuantizedPlanes), so left padding,
// growth, padded prefills (prepare / finalize), filter, extend, extract and merge are
// BatchKVCache's own. The fused attention block writes it in place (QuantizedBlockCache).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "cache/batch_kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "cache/quantized_planes.h"

namespace mlxcpp {

class BatchQuantizedKVCache final : public QuantizedPlanes<BatchKVCache>, public QuantizedBlockCache {
 public:
  // Solo quantized caches (any may be empty; one group size and bits) as one batch.
  static std::unique_ptr<BatchQuantizedKVCache> merge(const std::vector<const QuantizedKVCache*>& caches);

  // The planes' take_for_update / commit_update in lockstep (a batch's rows, left padding kept).
  std::array<mlx::core::array, 6> take_for_update(int batch, int heads, int n, int dim,
                                                  mlx::core::Dtype scale_dtype) override;
  void commit_update(std::array<mlx::core::array, 6> buffers, int n, bool exclusive) override;
  bool exclusive() const override;
  std::optional<mlx::core::Dtype> scale_dtype() const override;
  bool pending_right_padding() const { return planes_[0]->pending_right_padding(); }

  bool is_trimmable() const override { return true; }
  int size() const override { return offset(); }
  std::unique_ptr<KVCacheBase> clone() const override;
  std::unique_ptr<KVCacheBase> extract(int row) const override;

 private:
  BatchQuantizedKVCache(Planes planes, int group_size, int bits)
      : QuantizedPlanes(std::move(planes), group_size, bits, "BatchQuantizedKVCache") {}
};

}  // namespace mlxcpp
