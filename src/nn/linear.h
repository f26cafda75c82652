// nn.Linear and nn.QuantizedLinear (mlx/python/mlx/nn/layers/{linear,quantized}.py).
// The layer is quantized exactly when the quantization config says so for its path.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "kernels/ops.h"
#include "nn/load_context.h"

namespace mlxcpp {

// The packed weight + scales (+ biases for affine) of a quantized matrix [out, in].
struct QuantizedWeight {
  mlx::core::array weight;
  mlx::core::array scales;
  std::optional<mlx::core::array> biases;
  QuantSpec spec;
  kernels::FastPath fast;  // null: stock MLX (parity)

  static QuantizedWeight take(const LoadContext& ctx, const std::string& path, int out, int in,
                              const QuantSpec& spec);
  // x @ W.T through mx.quantized_matmul(transpose=True).
  mlx::core::array matmul_t(const mlx::core::array& x) const;
  void collect(std::vector<mlx::core::array>& out) const;
};

class Linear {
 public:
  static Linear load(const LoadContext& ctx, const std::string& path, int in_dims, int out_dims, bool bias);
  mlx::core::array operator()(const mlx::core::array& x) const;

  bool quantized() const { return q_.has_value(); }
  // The arrays our block kernels take (affine-quantized layers only).
  std::optional<kernels::BlockLinear> block_view() const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  Linear() = default;
  std::optional<mlx::core::array> weight_;  // unquantized [out, in]
  std::optional<QuantizedWeight> q_;
  std::optional<mlx::core::array> bias_;
};

}  // namespace mlxcpp
