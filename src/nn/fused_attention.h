// A pre-norm attention block (norm, q/k/v, rope, KV-cache write, causal attention, o
// projection, residual) as one primitive on the CPU fast path. Families call it first and
// compose stock ops when it returns nullopt (parity mode, GPU, layouts or caches not covered).
#pragma once

#include <optional>

#include <mlx/array.h>

#include "cache/kv_cache.h"
#include "kernels/ops.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/rope.h"

namespace mlxcpp {

struct FusedAttentionLayer {
  const RMSNorm& norm;
  const Linear &q, &k, &v, &o;
  const Rope* rope;  // null: no rotary embedding in this layer
  int heads, kv_heads, head_dim;
  float scale;
};

std::optional<mlx::core::array> fused_attention_block(const mlx::core::array& x, const FusedAttentionLayer& layer,
                                                      KVCacheBase* cache, const kernels::FastPath& fast);

}  // namespace mlxcpp
