// A mixture-of-experts layer's experts on the CPU fast path: each token's chosen experts'
// gated MLPs and their weighted sum in one primitive, reading only the chosen experts' rows.
#pragma once

#include <array>
#include <optional>

#include <mlx/array.h>

#include "kernels/ops.h"

namespace mlxcpp::kernels {

// One stacked projection of the experts, affine-quantized: `experts` matrices of n x k as one
// [experts * n, ...] matrix (expert e's rows at e * n) in MLX's layout or kRows8, scales and
// biases of one type (as BlockLinear's).
struct ExpertsLinear {
  mlx::core::array w, scales, biases;
  int experts, n, k, bits, group;
};

// Load time: the stacked [E, n, k * bits / 32] weight and its [E, n, k / group] scales/biases as
// ExpertsLinear's arrays: one [E * n, ...] matrix, 16-bit scales where they convert exactly,
// kRows8 where fast_path_layout takes it. nullopt where our kernels do not cover the layer.
std::optional<std::array<mlx::core::array, 3>> experts_layout(const mlx::core::array& w, const mlx::core::array& scales,
                                                              const mlx::core::array& biases, int bits, int group,
                                                              const FastPath& fast);

// x [..., d] (float32), indices [..., top_k] (integer), scores [..., top_k] (float32) ->
// [..., d] float32: sum_j scores[j] * down_e(act(gate_e(x)) * up_e(x)), e = indices[j], act SiLU
// or (Gemma 4) GELU-tanh (mlx-lm's
// SwitchGLU then (y * scores[..., None]).sum(-2)). Each expert's tokens run as one product; a
// decode step's rows ([B, 1, d]) each come out as alone. nullopt where the fast path does not
// apply.
std::optional<mlx::core::array> moe_glu(const mlx::core::array& x, const mlx::core::array& indices,
                                        const mlx::core::array& scores, const ExpertsLinear& gate,
                                        const ExpertsLinear& up, const ExpertsLinear& down, const FastPath& fast,
                                        GluActivation act = GluActivation::kSilu);

}  // namespace mlxcpp::kernels
