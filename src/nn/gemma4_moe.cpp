#include "nn/gemma4_moe.h"

#include <cmath>

#include <mlx/fast.h>
#include <mlx/ops.h>

#include "nn/geglu.h"

namespace mx = mlx::core;

namespace mlxcpp {

Gemma4Moe::Gemma4Moe(Linear proj, mx::array scale, mx::array per_expert_scale, SwitchGLU experts, RMSNorm n1,
                     RMSNorm n2, RMSNorm n3, int top_k, float eps, int dims, kernels::FastPath fast)
    : proj_(std::move(proj)),
      // Router.__call__'s scale * hidden ** -0.5, the same op once at load rather than each step.
      router_norm_w_(mx::multiply(scale, mx::array(static_cast<float>(std::pow(static_cast<double>(dims), -0.5)),
                                                   scale.dtype()))),
      per_expert_scale_(std::move(per_expert_scale)),
      experts_(std::move(experts)),
      post_ff_1_(std::move(n1)),
      pre_ff_2_(std::move(n2)),
      post_ff_2_(std::move(n3)),
      top_k_(top_k),
      eps_(eps),
      fast_(std::move(fast)) {}

Gemma4Moe Gemma4Moe::load(const LoadContext& ctx, const std::string& p, int dims, Shape s, float eps) {
  return Gemma4Moe(Linear::load(ctx, p + ".router.proj", dims, s.experts, false),
                   ctx.take(p + ".router.scale", {dims}), ctx.take(p + ".router.per_expert_scale", {s.experts}),
                   SwitchGLU::load(ctx, p + ".experts.switch_glu", dims, s.hidden, s.experts,
                                   kernels::GluActivation::kGeluApprox),
                   RMSNorm::load(ctx, p + ".post_feedforward_layernorm_1", dims, eps),
                   RMSNorm::load(ctx, p + ".pre_feedforward_layernorm_2", dims, eps),
                   RMSNorm::load(ctx, p + ".post_feedforward_layernorm_2", dims, eps), s.top_k, eps, dims, ctx.fast);
}

std::pair<mx::array, mx::array> Gemma4Moe::route(const mx::array& h) const {
  auto scores = proj_(mx::fast::rms_norm(h, router_norm_w_, eps_));
  auto part = mx::argpartition(scores, -top_k_, -1);
  auto start = mx::Shape(part.ndim(), 0), stop = part.shape();
  start.back() = stop.back() - top_k_;
  auto idx = mx::slice(part, start, stop);
  auto weights = mx::softmax(mx::take_along_axis(scores, idx, -1), -1);
  return {idx, mx::multiply(weights, mx::take(per_expert_scale_, idx, 0))};
}

mx::array Gemma4Moe::operator()(const mx::array& h) const {
  auto [idx, w] = route(h);
  auto x = pre_ff_2_(h);
  std::optional<mx::array> y;
  if (fast_) y = experts_.weighted(x, idx, w, fast_);  // our MoE primitive
  if (!y) y = mx::sum(mx::multiply(mx::expand_dims(w, -1), experts_(x, idx)), -2);
  return post_ff_2_(*y);
}

void Gemma4Moe::collect(std::vector<mx::array>& out) const {
  proj_.collect(out);
  out.push_back(router_norm_w_);
  out.push_back(per_expert_scale_);
  experts_.collect(out);
  for (const auto* n : {&post_ff_1_, &pre_ff_2_, &post_ff_2_}) n->collect(out);
}

}  // namespace mlxcpp
