#include "nn/geglu.h"

#include <cmath>
#include <numbers>

#include <mlx/compile.h>
#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

namespace {
// The same graph Python traces: each Python float is a weak scalar of x's dtype.
std::vector<mx::array> gelu_approx_impl(const std::vector<mx::array>& in) {
  const auto& x = in[0];
  auto c = [&](double v) { return mx::array(static_cast<float>(v), x.dtype()); };
  auto cube = mx::power(x, c(3));
  auto inner = mx::multiply(c(std::sqrt(2 / std::numbers::pi)), mx::add(x, mx::multiply(c(0.044715), cube)));
  return {mx::multiply(mx::multiply(c(0.5), x), mx::add(c(1), mx::tanh(inner)))};
}
}  // namespace

mx::array gelu_approx(const mx::array& x) {
  // mx::compile keys its trace cache on the function pointer: traced once per process.
  return mx::compile(gelu_approx_impl, /*shapeless=*/true)({x})[0];
}

namespace {
std::vector<mx::array> geglu_impl(const std::vector<mx::array>& in) {
  return {mx::multiply(gelu_approx(in[0]), in[1])};
}
}  // namespace

mx::array geglu(const mx::array& gate, const mx::array& x) {
  return mx::compile(geglu_impl, /*shapeless=*/true)({gate, x})[0];
}

GeGLUMLP GeGLUMLP::load(const LoadContext& ctx, const std::string& path, int dims, int hidden) {
  return GeGLUMLP(Linear::load(ctx, path + ".gate_proj", dims, hidden, false),
                  Linear::load(ctx, path + ".up_proj", dims, hidden, false),
                  Linear::load(ctx, path + ".down_proj", hidden, dims, false));
}

mx::array GeGLUMLP::operator()(const mx::array& x) const {
  return down_(mx::multiply(gelu_approx(gate_(x)), up_(x)));
}

mx::array GeGLUMLP::residual(const mx::array& h, const GemmaRMSNorm& pre_norm, const GemmaRMSNorm& post_norm,
                            const kernels::FastPath& fast, mx::array (*add)(const mx::array&, const mx::array&)) const {
  if (fast) {
    auto g = gate_.block_view(), u = up_.block_view(), d = down_.block_view();
    // One eps for both norms in the kernel (Gemma's are equal).
    if (g && u && d && pre_norm.eps() == post_norm.eps()) {
      if (auto out = kernels::mlp_block(h, pre_norm.weight(), pre_norm.eps(), *g, *u, *d, fast,
                                        kernels::GluActivation::kGeluApprox, post_norm.weight())) {
        return *out;
      }
    }
  }
  return add(h, post_norm((*this)(pre_norm(h))));
}

void GeGLUMLP::collect(std::vector<mx::array>& out) const {
  gate_.collect(out);
  up_.collect(out);
  down_.collect(out);
}

}  // namespace mlxcpp
