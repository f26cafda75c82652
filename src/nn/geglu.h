// GeGLU MLP as mlx-lm's gemma3_text.MLP: down(nn.gelu_approx(gate(x)) * up(x)).
#pragma once

#include <string>
#include <vector>

#include <mlx/array.h>

#include "nn/linear.h"

namespace mlxcpp {

// mlx.nn.gelu_approx: a shapeless mx.compile of 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))).
mlx::core::array gelu_approx(const mlx::core::array& x);

class GeGLUMLP {
 public:
  static GeGLUMLP load(const LoadContext& ctx, const std::string& path, int dims, int hidden);
  mlx::core::array operator()(const mlx::core::array& x) const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  GeGLUMLP(Linear g, Linear u, Linear d) : gate_(std::move(g)), up_(std::move(u)), down_(std::move(d)) {}
  Linear gate_, up_, down_;
};

}  // namespace mlxcpp
