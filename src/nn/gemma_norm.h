// Gemma's RMSNorm (mlx_lm/models/gemma3_text.py RMSNorm): mx.fast.rms_norm(x, 1.0 + weight, eps)
// (fast mode: one primitive of ours).
// The stored weight is an offset from one.
#pragma once

#include <string>
#include <vector>

#include <mlx/array.h>

#include "kernels/ops.h"
#include "nn/load_context.h"

namespace mlxcpp {

class GemmaRMSNorm {
 public:
  static GemmaRMSNorm load(const LoadContext& ctx, const std::string& path, int dims, float eps);
  mlx::core::array operator()(const mlx::core::array& x) const;
  void collect(std::vector<mlx::core::array>& out) const { out.push_back(scale_); }
  // The effective weight (1 + weight) and eps, for the fused blocks.
  const mlx::core::array& weight() const { return scale_; }
  float eps() const { return eps_; }

 private:
  GemmaRMSNorm(mlx::core::array scale, float eps, kernels::FastPath fast)
      : scale_(std::move(scale)), eps_(eps), fast_(std::move(fast)) {}
  mlx::core::array scale_;  // 1 + weight, in the weight's dtype
  float eps_;
  kernels::FastPath fast_;  // our one-primitive norm in fast mode
};

}  // namespace mlxcpp
