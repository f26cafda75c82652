#include "nn/mlp.h"

#include <mlx/compile.h>
#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

namespace {
// Same graph as Python's compiled swiglu (nn.silu is itself compiled and inlined into it).
std::vector<mx::array> swiglu_impl(const std::vector<mx::array>& in) {
  const auto& g = in[0];
  return {mx::multiply(mx::multiply(g, mx::sigmoid(g)), in[1])};
}
}  // namespace

mx::array swiglu(const mx::array& gate, const mx::array& x) {
  // mx::compile keys its trace cache on the function pointer: traced once per process.
  return mx::compile(swiglu_impl, /*shapeless=*/true)({gate, x})[0];
}

SwiGLUMLP SwiGLUMLP::load(const LoadContext& ctx, const std::string& path, int dims, int hidden, bool bias) {
  return SwiGLUMLP(Linear::load(ctx, path + ".gate_proj", dims, hidden, bias),
                   Linear::load(ctx, path + ".up_proj", dims, hidden, bias),
                   Linear::load(ctx, path + ".down_proj", hidden, dims, bias));
}

void SwiGLUMLP::collect(std::vector<mx::array>& out) const {
  gate_.collect(out);
  up_.collect(out);
  down_.collect(out);
}

mx::array SwiGLUMLP::operator()(const mx::array& x) const { return down_(swiglu(gate_(x), up_(x))); }

mx::array SwiGLUMLP::residual(const mx::array& h, const RMSNorm& norm, const kernels::FastPath& fast,
                              float residual_scale) const {
  if (fast) {
    auto g = gate_.block_view(), u = up_.block_view(), d = down_.block_view();
    if (g && u && d) {
      if (auto out = kernels::mlp_block(h, norm.weight(), norm.eps(), *g, *u, *d, fast, kernels::GluActivation::kSilu,
                                        std::nullopt, residual_scale)) {
        return *out;
      }
    }
  }
  auto r = (*this)(norm(h));
  return mx::add(h, residual_scale == 1.f ? r : mx::multiply(r, mx::array(residual_scale, r.dtype())));
}

}  // namespace mlxcpp
