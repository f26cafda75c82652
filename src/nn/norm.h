// nn.RMSNorm: mx.fast.rms_norm(x, weight, eps) (fast mode: one primitive of ours).
#pragma once

#include <string>
#include <vector>

#include <mlx/array.h>

#include "nn/load_context.h"

namespace mlxcpp {

class RMSNorm {
 public:
  static RMSNorm load(const LoadContext& ctx, const std::string& path, int dims, float eps);
  mlx::core::array operator()(const mlx::core::array& x) const;
  void collect(std::vector<mlx::core::array>& out) const { out.push_back(weight_); }
  const mlx::core::array& weight() const { return weight_; }
  float eps() const { return eps_; }

 private:
  RMSNorm(mlx::core::array w, float eps, kernels::FastPath fast)
      : weight_(std::move(w)), eps_(eps), fast_(std::move(fast)) {}
  mlx::core::array weight_;
  float eps_;
  kernels::FastPath fast_;  // our one-primitive norm in fast mode
};

}  // namespace mlxcpp
