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

// inputs: x [..., d] float32, w [d] float32; output: [..., d] float32 = mx.fast.rms_norm(x, w, eps)
// (on CPU, stock MLX composes it from ~8 ops).
class RmsNormPrimitive : public mlx::core::UnaryPrimitive {
 public:
  RmsNormPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx, float eps)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), eps_(eps) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppRmsNorm"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  std::shared_ptr<const KernelContext> ctx_;
  float eps_;
};

// inputs: x [..., n] float32; output: x - logsumexp(x, -1, keepdims) (mlx-lm's log-probabilities
// over the vocabulary; stock MLX takes ~1 ms for 49k logits on one core, ~7 ms for 262k).
class LogSoftmaxPrimitive : public mlx::core::UnaryPrimitive {
 public:
  LogSoftmaxPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx)
      : UnaryPrimitive(s), ctx_(std::move(ctx)) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppLogSoftmax"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  std::shared_ptr<const KernelContext> ctx_;
};

// inputs: logits float32 [rows, n], words uint32 [rows, w] (w * 32 >= n; bit i % 32 of word i / 32
// allows token i); output: the logits, -inf where not allowed (mx::where(mask, logits, -inf) as
// the grammar path composed it: an unpacked byte mask, a cast and a select, three ops over the
// batch's logits, ~0.5 ms at 8 rows of 49k).
class TokenMaskPrimitive : public mlx::core::UnaryPrimitive {
 public:
  explicit TokenMaskPrimitive(mlx::core::Stream s) : UnaryPrimitive(s) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppTokenMask"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override {
    return dynamic_cast<const TokenMaskPrimitive*>(&other) != nullptr;
  }
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override {
    return {inputs[0].shape()};
  }
};

// inputs: x float32 [..., n]; output: uint32 [...], argmax over the last axis exactly as MLX's CPU
// argmax (argmax_rows: NaNs propagate), vectorized (MLX's loop is scalar: ~3.7 ms of a 16-row Gemma 3 decode step).
class ArgmaxPrimitive : public mlx::core::UnaryPrimitive {
 public:
  ArgmaxPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx) : UnaryPrimitive(s), ctx_(std::move(ctx)) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppArgmax"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override {
    auto s = inputs[0].shape();
    s.pop_back();
    return {s};
  }

 private:
  std::shared_ptr<const KernelContext> ctx_;
};

// inputs: ids (integer, any shape), w [rows, d*bits/32] uint32, scales, biases [rows, d/g]
// (float32 or both of one 16-bit type, row-contiguous); output: [ids..., d] float32, the rows of
// dequantize(w, scales, biases) at ids: a quantized embedding lookup (stock MLX: three gathers
// and a dequantize of ~20 ops).
class QuantizedTakePrimitive : public mlx::core::UnaryPrimitive {
 public:
  QuantizedTakePrimitive(mlx::core::Stream s, int bits, int group) : UnaryPrimitive(s), bits_(bits), group_(group) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppQuantizedTake"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override;

 private:
  int bits_, group_;
};

// inputs: x [..., m, k] (float), w [E..., n, k*bits/32] uint32, scales, biases [E..., n, k/g],
// lhs and rhs (integer, one shape B, strides free: broadcast views); output [B..., m, n] float32
// with out[i] = x[lhs[i]] @ dequantize(w[rhs[i]]).T, the experts' products of a mixture-of-
// experts layer (mx.gather_qmm, transpose=True, affine). Batch indices wrap when negative and
// clamp to the tables. The (x, expert) pairs of one expert run as one product of all their rows.
class GatherQmmPrimitive : public mlx::core::UnaryPrimitive {
 public:
  GatherQmmPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx, int bits, int group)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), bits_(bits), group_(group) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppGatherQmm"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override;

 private:
  std::shared_ptr<const KernelContext> ctx_;
  int bits_, group_;
};

}  // namespace mlxcpp::kernels
