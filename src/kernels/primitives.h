// Our CPU kernels as MLX custom primitives (mlx::core::Primitive with eval_cpu). They join
// MLX graphs like stock ops: lazily built, scheduled on the CPU stream, freed with the graph.
#pragma once

#include <memory>

#include <mlx/primitives.h>

#include "kernels/kernel_context.h"

namespace mlxcpp::kernels {

// inputs: x [..., k] (float), w [n, k*bits/32] uint32, scales, biases [n, k/g] float32;
// output: [..., n] float32 = x @ dequantize(w).T.
class QuantizedMatmulPrimitive : public mlx::core::UnaryPrimitive {
 public:
  QuantizedMatmulPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx, int bits, int group)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), bits_(bits), group_(group) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppQuantizedMatmul"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override;

 private:
  std::shared_ptr<const KernelContext> ctx_;
  int bits_, group_;
};

}  // namespace mlxcpp::kernels
