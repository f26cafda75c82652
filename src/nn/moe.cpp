#include "nn/moe.h"

#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

SparseMoe SparseMoe::load(const LoadContext& ctx, const std::string& path, int dims, const MoeArgs& a) {
  SparseMoe m(a, SwitchGLU::load(ctx, path + ".switch_mlp", dims, a.hidden, a.experts));
  if (a.router == MoeArgs::Router::kSoftmax) {
    m.gate_ = Linear::load(ctx, path + ".gate", dims, a.experts, false);
  } else {
    // MoEGate is a plain module (no to_quantized): its weight is never quantized.
    m.gate_w_ = ctx.take(path + ".gate.weight", mx::Shape{a.experts, dims});
    m.gate_bias_ = ctx.take(path + ".gate.e_score_correction_bias", mx::Shape{a.experts});
  }
  if (a.shared_hidden > 0) {
    m.shared_ = SwiGLUMLP::load(ctx, path + (a.gated_shared ? ".shared_expert" : ".shared_experts"), dims,
                                a.shared_hidden, false);
    if (a.gated_shared) m.shared_gate_ = Linear::load(ctx, path + ".shared_expert_gate", dims, 1, false);
  }
  m.fast_ = ctx.fast;
  return m;
}

std::pair<mx::array, mx::array> SparseMoe::route(const mx::array& x) const {
  const int k = a_.top_k;
  auto last = [](const mx::array& t, int begin, int end) {
    auto start = mx::Shape(t.ndim(), 0), stop = t.shape();
    start.back() = begin;
    stop.back() = end;
    return mx::slice(t, start, stop);
  };
  if (a_.router == MoeArgs::Router::kSoftmax) {
    auto gates = mx::softmax((*gate_)(x), -1, /*precise=*/true);
    const int e = gates.shape(-1);
    auto inds = last(mx::argpartition(gates, -k, -1), e - k, e);
    auto scores = mx::take_along_axis(gates, inds, -1);
    if (a_.norm_topk_prob) scores = mx::divide(scores, mx::sum(scores, -1, true));
    return {inds, scores};
  }
  // glm4_moe.py's group_expert_select (an mx.compile of these ops; eager gives the same bits).
  auto scores = mx::sigmoid(mx::astype(mx::matmul(x, mx::transpose(*gate_w_)), mx::float32));
  auto orig = scores;
  scores = mx::add(scores, *gate_bias_);
  if (a_.n_group > 1) {
    scores = mx::unflatten(scores, -1, {a_.n_group, -1});
    auto group_scores = mx::sum(mx::topk(scores, 2, -1), -1, true);
    const int drop = a_.n_group - a_.topk_group;
    auto part = mx::argpartition(group_scores, drop - 1, -2);
    auto start = mx::Shape(part.ndim(), 0), stop = part.shape();
    stop[part.ndim() - 2] = drop;
    auto group_idx = mx::slice(part, start, stop);
    scores = mx::put_along_axis(scores, group_idx, mx::array(0.0f), -2);
    scores = mx::flatten(scores, -2, -1);
  }
  auto inds = last(mx::argpartition(mx::negative(scores), k - 1, -1), 0, k);
  scores = mx::take_along_axis(orig, inds, -1);
  if (k > 1 && a_.norm_topk_prob) scores = mx::divide(scores, mx::sum(scores, -1, true));
  scores = mx::multiply(scores, mx::array(static_cast<float>(a_.routed_scaling)));
  return {inds, scores};
}

mx::array SparseMoe::operator()(const mx::array& x) const {
  auto [inds, scores] = route(x);
  std::optional<mx::array> y;
  if (fast_) y = experts_.weighted(x, inds, scores, fast_);
  if (!y) {
    auto e = experts_(x, inds);
    y = mx::astype(mx::sum(mx::multiply(e, mx::expand_dims(scores, -1)), -2), e.dtype());
  }
  if (shared_) {
    auto s = (*shared_)(x);
    if (shared_gate_) s = mx::multiply(mx::sigmoid((*shared_gate_)(x)), s);
    y = mx::add(*y, s);
  }
  return *y;
}

mx::array SparseMoe::residual(const mx::array& h, const RMSNorm& norm) const { return mx::add(h, (*this)(norm(h))); }

void SparseMoe::collect(std::vector<mx::array>& out) const {
  experts_.collect(out);
  if (gate_) gate_->collect(out);
  if (gate_w_) out.push_back(*gate_w_);
  if (gate_bias_) out.push_back(*gate_bias_);
  if (shared_) shared_->collect(out);
  if (shared_gate_) shared_gate_->collect(out);
}

}  // namespace mlxcpp
