// The gated-DeltaNet layer of Qwen3.5 / Qwen3-Next (mlx_lm/models/qwen3_5.py GatedDeltaNet,
// qwen3_next.py Qwen3NextGatedDeltaNet, gated_delta.py): input projections, a depthwise causal
// conv1d over q|k|v with its conv state, q/k L2 norms, the gated delta-rule recurrence with its
// float32 state, a gated RMSNorm and the output projection. Parity mode runs mlx-lm's ops (its
// per-token loop off Metal); the CPU fast path runs the recurrence as one primitive of ours.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "cache/kv_cache.h"
#include "nn/linear.h"

namespace mlxcpp {

struct GatedDeltaArgs {
  enum class Layout {
    kSplit,       // qwen3_5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
    kInterleaved  // qwen3_next: in_proj_qkvz and in_proj_ba, grouped per key head
  };
  Layout layout = Layout::kSplit;
  int hidden = 0, k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0, conv_kernel = 4;
  float eps = 1e-6f;

  int key_dim() const { return k_heads * k_dim; }
  int value_dim() const { return v_heads * v_dim; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
};

// gated_delta.compute_g: exp(-exp(A_log) * softplus(a + dt_bias)) (one compiled kernel).
mlx::core::array gated_delta_decay(const mlx::core::array& a_log, const mlx::core::array& a,
                                   const mlx::core::array& dt_bias);

// gated_delta.gated_delta_ops: the recurrence token by token. q, k [B, T, Hk, Dk] (normalized,
// q scaled), v [B, T, Hv, Dv], g and beta [B, T, Hv], state [B, Hv, Dv, Dk] float32, mask
// [B, T] bool or none. Returns y [B, T, Hv, Dv] and the new state.
std::pair<mlx::core::array, mlx::core::array> gated_delta_ops(mlx::core::array q, mlx::core::array k,
                                                              const mlx::core::array& v, const mlx::core::array& g,
                                                              const mlx::core::array& beta, mlx::core::array state,
                                                              const std::optional<mlx::core::array>& mask);

class GatedDeltaNet {
 public:
  static GatedDeltaNet load(const LoadContext& ctx, const std::string& path, const GatedDeltaArgs& a);
  // x [B, S, hidden]; `mask` the layer's ssm mask ([B, S] bool, none for unpadded input);
  // `cache` an ArraysCache / BatchArraysCache of 2 slots (conv state, recurrent state) or null.
  mlx::core::array operator()(const mlx::core::array& x, const std::optional<mlx::core::array>& mask,
                              KVCacheBase* cache) const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  GatedDeltaNet(GatedDeltaArgs a, Linear out_proj) : a_(a), out_proj_(std::move(out_proj)) {}
  struct Projected {
    mlx::core::array qkv, z, b, a;  // [B, S, conv_dim], [B, S, Hv, Dv], [B, S, Hv] x2
  };
  Projected project(const mlx::core::array& x) const;

  GatedDeltaArgs a_;
  std::vector<Linear> in_;  // kSplit: qkv, z, b, a; kInterleaved: qkvz, ba
  Linear out_proj_;
  mlx::core::array conv_w_ = mlx::core::array(0.0f);  // [conv_dim, K, 1]
  mlx::core::array dt_bias_ = mlx::core::array(0.0f), a_log_ = mlx::core::array(0.0f);
  mlx::core::array norm_w_ = mlx::core::array(0.0f);
  kernels::FastPath fast_;  // null in parity mode
};

}  // namespace mlxcpp
