#include "nn/norm.h"

#include <mlx/fast.h>

#include "kernels/ops.h"

namespace mx = mlx::core;

namespace mlxcpp {

RMSNorm RMSNorm::load(const LoadContext& ctx, const std::string& path, int dims, float eps) {
  return RMSNorm(ctx.take(path + ".weight", mx::Shape{dims}), eps, ctx.fast);
}

mx::array RMSNorm::operator()(const mx::array& x) const {
  if (auto y = kernels::rms_norm(x, weight_, eps_, fast_)) return *y;
  return mx::fast::rms_norm(x, weight_, eps_);
}

}  // namespace mlxcpp
