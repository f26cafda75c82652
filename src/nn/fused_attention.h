// A pre-norm attention block (norm, q/k/v, [q/k norms,] rope, KV-cache write, causal or
// sliding-window attention, o projection, [post-norm,] residual) as one primitive on the CPU
// fast path. Families call it first and
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
  mlx::core::array norm_w;  // the input norm's effective weight (Gemma: 1 + weight)
  float eps;
  const Linear &q, &k, &v, &o;
  const Rope* rope;  // null: no rotary embedding in this layer
  int heads, kv_heads, head_dim;
  float scale;
  std::optional<int> window = std::nullopt;  // sliding-window layer (keys older than window masked)
  // Gemma 3: per-head q/k norms and the post-attention norm (effective weights, same eps).
  std::optional<mlx::core::array> q_norm = std::nullopt, k_norm = std::nullopt, post_norm = std::nullopt;
};

std::optional<mlx::core::array> fused_attention_block(const mlx::core::array& x, const FusedAttentionLayer& layer,
                                                      KVCacheBase* cache, const kernels::FastPath& fast);

}  // namespace mlxcpp
