// mlx-lm's switch_layers.py: the experts of a mixture-of-experts layer, stacked [E, out, in]
// (SwitchLinear / QuantizedSwitchLinear), and SwitchGLU: each token's chosen experts' gated MLPs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "kernels/moe_ops.h"
#include "nn/load_context.h"

namespace mlxcpp {

class SwitchLinear {
 public:
  static SwitchLinear load(const LoadContext& ctx, const std::string& path, int in_dims, int out_dims, int experts);
  // x [..., 1, in] through the experts at `idx` -> [..., out]: mx.gather_qmm (quantized) or
  // mx.gather_mm (float), sorted_indices as given.
  mlx::core::array operator()(const mlx::core::array& x, const mlx::core::array& idx, bool sorted) const;
  // The stacked experts as our MoE kernel reads them (fast mode, affine-quantized only).
  std::optional<kernels::ExpertsLinear> experts_view() const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  SwitchLinear() = default;
  int experts_ = 0, out_ = 0;
  std::optional<mlx::core::array> weight_;  // float [E, out, in]
  // Quantized: [E, out, in * bits / 32] uint32 and [E, out, in / group] scales/biases (stock
  // MLX), or in fast mode the same rows as one [E * out, ...] matrix, possibly in kRows8.
  std::optional<mlx::core::array> qweight_, scales_, biases_;
  QuantSpec spec_;

  // The fast path's [E * out, ...] form (a 2-D quantized weight).
  bool flat() const { return qweight_ && qweight_->ndim() == 2; }
};

class SwitchGLU {
 public:
  // act: swiglu (kSilu), or Gemma 4's geglu (kGeluApprox).
  static SwitchGLU load(const LoadContext& ctx, const std::string& path, int dims, int hidden, int experts,
                        kernels::GluActivation act = kernels::GluActivation::kSilu);
  // x [..., dims], indices [..., k] -> [..., k, dims]: down(act(gate(x), up(x))) per chosen
  // expert, as SwitchGLU.__call__ (token/expert pairs sorted by expert when indices.size >= 64).
  mlx::core::array operator()(const mlx::core::array& x, const mlx::core::array& indices) const;
  // (experts(x, indices) * scores[..., None]).sum(-2): one primitive of ours on the fast path
  // (nullopt where it does not apply; the caller composes the stock ops).
  std::optional<mlx::core::array> weighted(const mlx::core::array& x, const mlx::core::array& indices,
                                           const mlx::core::array& scores, const kernels::FastPath& fast) const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  SwitchGLU(SwitchLinear g, SwitchLinear u, SwitchLinear d, kernels::GluActivation act)
      : gate_(std::move(g)), up_(std::move(u)), down_(std::move(d)), act_(act) {}
  SwitchLinear gate_, up_, down_;
  kernels::GluActivation act_;
};

}  // namespace mlxcpp
