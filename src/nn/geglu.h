// GeGLU MLP as mlx-lm's gemma3_text.MLP: down(nn.gelu_approx(gate(x)) * up(x)).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "nn/fused_attention.h"
#include "nn/gemma_norm.h"
#include "nn/linear.h"

namespace mlxcpp {

// mlx.nn.gelu_approx: a shapeless mx.compile of 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))).
mlx::core::array gelu_approx(const mlx::core::array& x);
// gemma4_text.geglu: a shapeless mx.compile of gelu_approx(gate) * x (gelu_approx inlined).
mlx::core::array geglu(const mlx::core::array& gate, const mlx::core::array& x);

class GeGLUMLP {
 public:
  static GeGLUMLP load(const LoadContext& ctx, const std::string& path, int dims, int hidden);
  mlx::core::array operator()(const mlx::core::array& x) const;
  // Gemma 3's MLP sub-block: h + post_norm(mlp(pre_norm(h))); one fused primitive on the CPU
  // fast path, else stock ops (`add` is the residual add, clip_residual in Gemma 3).
  mlx::core::array residual(const mlx::core::array& h, const GemmaRMSNorm& pre_norm, const GemmaRMSNorm& post_norm,
                            const kernels::FastPath& fast,
                            mlx::core::array (*add)(const mlx::core::array&, const mlx::core::array&)) const;
  // The sub-block above as fused_decoder_stack takes it (the kernel's one eps: the norms' must
  // be equal; nullopt otherwise).
  std::optional<FusedMlpLayer> fused_layer(const GemmaRMSNorm& pre_norm, const GemmaRMSNorm& post_norm) const {
    if (pre_norm.eps() != post_norm.eps()) return std::nullopt;
    return FusedMlpLayer{pre_norm.weight(), pre_norm.eps(), gate_, up_, down_, kernels::GluActivation::kGeluApprox,
                         post_norm.weight()};
  }
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  GeGLUMLP(Linear g, Linear u, Linear d) : gate_(std::move(g)), up_(std::move(u)), down_(std::move(d)) {}
  Linear gate_, up_, down_;
};

}  // namespace mlxcpp
