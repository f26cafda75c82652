#include "nn/load_context.h"

#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

mx::array LoadContext::cast(mx::array a) const {
  if (float_dtype && mx::issubdtype(a.dtype(), mx::floating) && a.dtype() != *float_dtype) {
    return mx::astype(a, *float_dtype);
  }
  return a;
}

mx::array LoadContext::take(const std::string& name, const mx::Shape& shape) const {
  return cast(weights.take(name, shape));
}

std::optional<mx::array> LoadContext::take_optional(const std::string& name, const mx::Shape& shape) const {
  auto a = weights.take_optional(name, shape);
  if (a) return cast(*a);
  return std::nullopt;
}

}  // namespace mlxcpp
