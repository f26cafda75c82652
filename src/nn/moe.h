// Sparse mixture-of-experts MLPs: a router picks each token's top-k experts and weights them,
// the experts run through SwitchGLU. qwen3_moe.py's Qwen3MoeSparseMoeBlock (softmax router) and
// glm4_moe.py's MoE (sigmoid router with a correction bias, group-limited top-k, routed
// scaling, shared experts), qwen3_next.py's Qwen3NextSparseMoeBlock (softmax router, one gated
// shared expert).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/norm.h"
#include "nn/switch_glu.h"

namespace mlxcpp {

struct MoeArgs {
  enum class Router {
    kSoftmax,       // qwen3_moe: softmax (precise) over nn.Linear gate logits, top-k, optional renormalization
    kSigmoidGroups  // glm4_moe: group_expert_select over x @ gate.weight.T
  };
  Router router = Router::kSoftmax;
  int experts = 0, top_k = 0, hidden = 0;  // hidden: moe_intermediate_size
  bool norm_topk_prob = false;
  int n_group = 1, topk_group = 1;    // glm4_moe
  double routed_scaling = 1.0;        // glm4_moe
  int shared_hidden = 0;              // glm4_moe: moe_intermediate_size * n_shared_experts (0: none)
  // qwen3_next / qwen3_5_moe: one shared expert (`shared_expert`) scaled by
  // sigmoid(shared_expert_gate(x)).
  bool gated_shared = false;
};

class SparseMoe {
 public:
  static SparseMoe load(const LoadContext& ctx, const std::string& path, int dims, const MoeArgs& a);
  mlx::core::array operator()(const mlx::core::array& x) const;
  // h + moe(norm(h)).
  mlx::core::array residual(const mlx::core::array& h, const RMSNorm& norm) const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  SparseMoe(MoeArgs a, SwitchGLU experts) : a_(std::move(a)), experts_(std::move(experts)) {}
  // {indices [..., top_k], scores [..., top_k]} of each token's chosen experts.
  std::pair<mlx::core::array, mlx::core::array> route(const mlx::core::array& x) const;

  MoeArgs a_;
  SwitchGLU experts_;
  std::optional<Linear> gate_;                            // kSoftmax: nn.Linear
  std::optional<mlx::core::array> gate_w_, gate_bias_;    // kSigmoidGroups: MoEGate weight, e_score_correction_bias
  std::optional<SwiGLUMLP> shared_;
  std::optional<Linear> shared_gate_;                     // gated_shared
  kernels::FastPath fast_;  // null in parity mode
};

}  // namespace mlxcpp
