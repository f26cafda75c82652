#include "nn/norm.h"

#include <mlx/fast.h>

namespace mx = mlx::core;

namespace mlxcpp {

RMSNorm RMSNorm::load(const LoadContext& ctx, const std::string& path, int dims, float eps) {
  return RMSNorm(ctx.take(path + ".weight", mx::Shape{dims}), eps);
}

mx::array RMSNorm::operator()(const mx::array& x) const { return mx::fast::rms_norm(x, weight_, eps_); }

}  // namespace mlxcpp
