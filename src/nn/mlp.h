// Gated MLPs: SwiGLU as mlx-lm's activations.swiglu (a shapeless mx.compile of silu(gate) * x).
#pragma once

#include <string>

#include <mlx/array.h>

#include "nn/fused_attention.h"
#include "nn/linear.h"
#include "nn/norm.h"

namespace mlxcpp {

mlx::core::array swiglu(const mlx::core::array& gate, const mlx::core::array& x);

// down(swiglu(gate(x), up(x)))
class SwiGLUMLP {
 public:
  static SwiGLUMLP load(const LoadContext& ctx, const std::string& path, int dims, int hidden, bool bias);
  mlx::core::array operator()(const mlx::core::array& x) const;
  // h + mlp(norm(h)) [* residual_scale]: one block primitive on the CPU fast path, else the
  // stock composition.
  mlx::core::array residual(const mlx::core::array& h, const RMSNorm& norm, const kernels::FastPath& fast,
                            float residual_scale = 1.f) const;
  // The block h + mlp(norm(h)) [* residual_scale] as fused_decoder_stack takes it.
  FusedMlpLayer fused_layer(const RMSNorm& norm, float residual_scale = 1.f) const {
    return {norm.weight(), norm.eps(), gate_, up_, down_, kernels::GluActivation::kSilu, std::nullopt, residual_scale};
  }
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  SwiGLUMLP(Linear g, Linear u, Linear d) : gate_(std::move(g)), up_(std::move(u)), down_(std::move(d)) {}
  Linear gate_, up_, down_;
};

}  // namespace mlxcpp
