// The gated delta-rule recurrence (Qwen3.5 / Qwen3-Next linear attention) on the CPU fast path:
// one primitive for a whole prompt chunk or decode step instead of mlx-lm's per-token ops. Each
// (batch row, value head) runs on a pool thread with its [Dv, Dk] float32 state in cache; a
// token costs one pass over the state (decay, delta update and readout fused per row).
#pragma once

#include <optional>
#include <utility>

#include <mlx/array.h>

#include "kernels/ops.h"

namespace mlxcpp::kernels {

// q, k [B, T, Hk, Dk] (q/k normalized, q scaled), v [B, T, Hv, Dv], g and beta [B, T, Hv], state
// [B, Hv, Dv, Dk], mask [B, T] bool (false: a padding token, the state skips it) -> y [B, T, Hv,
// Dv] and the new state, all float32: for each token S = g S + beta (v - g S k) k^T, y = S q
// (value head h reads key head h / (Hv / Hk)). nullopt where the fast path does not apply (no
// context, non-float32 inputs, shapes that disagree).
std::optional<std::pair<mlx::core::array, mlx::core::array>> gated_delta(
    const mlx::core::array& q, const mlx::core::array& k, const mlx::core::array& v, const mlx::core::array& g,
    const mlx::core::array& beta, const mlx::core::array& state, const std::optional<mlx::core::array>& mask,
    const FastPath& fast);

}  // namespace mlxcpp::kernels
