// Gemma 4's mixture-of-experts branch (mlx_lm/models/gemma4_text.py Router, Experts and the
// DecoderLayer's enable_moe_block branch): routed on the residual stream h (rms_norm with
// scale / sqrt(hidden), projection, top-k, softmax over the k, times per_expert_scale), the
// experts' geglu MLPs on pre_feedforward_layernorm_2(h), post_feedforward_layernorm_2 after.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/switch_glu.h"

namespace mlxcpp {

class Gemma4Moe {
 public:
  struct Shape {
    int experts, top_k, hidden;  // num_experts, top_k_experts, moe_intermediate_size
  };
  // `path`: the decoder layer (router., experts.switch_glu., the *_1 / *_2 norms beneath it).
  static Gemma4Moe load(const LoadContext& ctx, const std::string& path, int dims, Shape s, float eps);
  // post_feedforward_layernorm_2(sum_k w_k * expert_k(pre_feedforward_layernorm_2(h))).
  mlx::core::array operator()(const mlx::core::array& h) const;
  // The dense branch's own post-norm (post_feedforward_layernorm_1).
  const RMSNorm& post_ff_1() const { return post_ff_1_; }
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  Gemma4Moe(Linear proj, mlx::core::array scale, mlx::core::array per_expert_scale, SwitchGLU experts, RMSNorm n1,
            RMSNorm n2, RMSNorm n3, int top_k, float eps, int dims, kernels::FastPath fast);
  // {indices [..., k], weights [..., k]}
  std::pair<mlx::core::array, mlx::core::array> route(const mlx::core::array& h) const;

  Linear proj_;
  mlx::core::array router_norm_w_, per_expert_scale_;  // router.scale * hidden ** -0.5
  SwitchGLU experts_;
  RMSNorm post_ff_1_, pre_ff_2_, post_ff_2_;
  int top_k_;
  float eps_;
  kernels::FastPath fast_;  // null in parity mode
};

}  // namespace mlxcpp
