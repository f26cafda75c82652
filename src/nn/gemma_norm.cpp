#include "nn/gemma_norm.h"

#include <mlx/fast.h>
#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

GemmaRMSNorm GemmaRMSNorm::load(const LoadContext& ctx, const std::string& path, int dims, float eps) {
  auto w = ctx.take(path + ".weight", mx::Shape{dims});
  // Python's `1.0 + weight` (a weak scalar: the weight's dtype), computed once instead of per
  // call; elementwise the same values.
  return GemmaRMSNorm(mx::add(mx::array(1.0f, w.dtype()), w), eps, ctx.fast);
}

mx::array GemmaRMSNorm::operator()(const mx::array& x) const {
  if (auto y = kernels::rms_norm(x, scale_, eps_, fast_)) return *y;
  return mx::fast::rms_norm(x, scale_, eps_);
}

}  // namespace mlxcpp
