// A pre-norm attention block (norm, q/k/v, [q/k norms,] rope, KV-cache write, causal or
// sliding-window attention, o projection, [post-norm,] residual) as one primitive on the CPU
// fast path, over a plain KVCache, a BatchKVCache or a RaggedKVCache (which only these blocks
// write: a model given one must not fall back). Families call it first and compose stock
// ops when it returns nullopt (parity mode, GPU, layouts or caches not covered).
#pragma once

#include <memory>
#include <optional>
#include <vector>

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
  float residual_scale = 1.f;  // MiniCPM: x + attn * residual_scale
  bool pre_norm = true;        // false (OLMo 2): no input norm (norm_w unused)
  bool qk_norm_full = false;   // OLMo 2: q_norm/k_norm span all heads
  std::optional<float> llama4_beta = std::nullopt;  // Ministral 3's attention temperature
  int llama4_original_max = 0;
  std::optional<mlx::core::array> v_norm = std::nullopt;  // Gemma 4: per-head v norm (ones: no scale)
};

// A layer's cache: a RotatingKVCache of `window` rows for a sliding-window layer, a KVCache
// otherwise and on the fast path (where the fused block and the attention kernels mask the window
// over a plain cache themselves).
std::unique_ptr<KVCacheBase> layer_cache(std::optional<int> window, const kernels::FastPath& fast);

std::optional<mlx::core::array> fused_attention_block(const mlx::core::array& x, const FusedAttentionLayer& layer,
                                                      KVCacheBase* cache, const kernels::FastPath& fast);

// A pre-norm gated MLP block h + [post_norm](down(act(gate(n)) * up(n))), n = norm(h) (one eps).
struct FusedMlpLayer {
  mlx::core::array norm_w;  // effective weight (Gemma: 1 + weight)
  float eps;
  const Linear &gate, &up, &down;
  kernels::GluActivation act = kernels::GluActivation::kSilu;
  std::optional<mlx::core::array> post_norm = std::nullopt;
  float residual_scale = 1.f;  // MiniCPM: h + mlp * residual_scale
  bool pre_norm = true;        // false (OLMo 2): no input norm (norm_w unused)
};

struct FusedDecoderLayer {
  FusedAttentionLayer attn;
  FusedMlpLayer mlp;
};

// Every layer (attention block, then MLP block) in one primitive on the CPU fast path, each
// with its cache (caches[i]: a plain KVCache, or a BatchKVCache without pending right padding,
// whose rows' left padding the kernels skip). nullopt, with no cache touched, where some layer
// is not covered: the caller runs the layers one by one.
std::optional<mlx::core::array> fused_decoder_stack(const mlx::core::array& x,
                                                    const std::vector<FusedDecoderLayer>& layers,
                                                    const std::vector<KVCacheBase*>& caches,
                                                    const kernels::FastPath& fast);

// A model's layers blocks[0..] (each with fused_layer(): std::optional<FusedDecoderLayer>) with
// their caches through fused_decoder_stack; nullopt without a fast path or caches, or where a
// layer is not covered.
template <class Blocks>
std::optional<mlx::core::array> fused_decoder_stack(const mlx::core::array& x, const Blocks& blocks,
                                                    LayerCaches* caches, const kernels::FastPath& fast) {
  if (!fast || !caches || caches->size() != blocks.size()) return std::nullopt;
  std::vector<FusedDecoderLayer> layers;
  std::vector<KVCacheBase*> cs;
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto l = blocks[i].fused_layer();
    if (!l) return std::nullopt;
    layers.push_back(std::move(*l));
    cs.push_back((*caches)[i].get());
  }
  return fused_decoder_stack(x, layers, cs, fast);
}

}  // namespace mlxcpp
