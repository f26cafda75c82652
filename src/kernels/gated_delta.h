// The gated-DeltaNet layer (Qwen3.5 / Qwen3-Next linear attention) on the CPU fast path: one
// primitive for a whole prompt chunk or decode step instead of mlx-lm's ~30 ops and per-token
// loop. The conv runs per token on the pool; the recurrence per (batch row, value head), its
// [Dv, Dk] float32 state in cache, a token costing one pass over it (decay, delta update and
// readout fused per state row).
#pragma once

#include <array>
#include <optional>
#include <utility>

#include <mlx/array.h>

#include "kernels/ops.h"

namespace mlxcpp::kernels {

// Everything between the layer's projections: the causal depthwise conv (kernel K) over
// [conv_state | qkv] with SiLU, q/k L2 norms (q also scaled by Dk^-1, k by Dk^-0.5), g = exp(-exp(a_log) softplus(a + dt_bias)), beta = sigmoid(b), the
// recurrence S = g S + beta (v - g S k) k^T, y = S q (value head h reading key head
// h / (Hv / Hk)), and the gated RMSNorm rms_norm(y, norm_w, eps) * silu(z).
struct GatedDeltaCoreShape {
  int k_heads, v_heads, k_dim, v_dim, kernel;
  float eps;
};
// qkv [B, S, 2 Hk Dk + Hv Dv], z [B, S, Hv Dv], b and a [B, S, Hv], conv_state [B, K - 1, C],
// state [B, Hv, Dv, Dk], conv_w [C, K, 1], a_log and dt_bias [Hv], norm_w [Dv]; mask [B, S]
// bool (padding tokens: zeroed before the conv, skipped by the state); lengths [B] int32 (a
// right-padded prefill: the conv state kept ends at each row's length, as mlx-lm's) ->
// {y [B, S, Hv Dv], new conv_state, new state}, float32. nullopt where the fast path does not
// apply (no context, non-float32 inputs, shapes that disagree).
std::optional<std::array<mlx::core::array, 3>> gated_delta_core(
    const mlx::core::array& qkv, const mlx::core::array& z, const mlx::core::array& b, const mlx::core::array& a,
    const mlx::core::array& conv_state, const mlx::core::array& state, const mlx::core::array& conv_w,
    const mlx::core::array& a_log, const mlx::core::array& dt_bias, const mlx::core::array& norm_w,
    const std::optional<mlx::core::array>& mask, const std::optional<mlx::core::array>& lengths,
    const GatedDeltaCoreShape& shape, const FastPath& fast);

}  // namespace mlxcpp::kernels
