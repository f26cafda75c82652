#include "generate/host_ids.h"

#include <mlx/ops.h>
#include <mlx/transforms.h>

namespace mx = mlx::core;

namespace mlxcpp {

std::vector<int> host_ids(const mx::array& t) {
  mx::eval(t);
  if (t.flags().row_contiguous && t.dtype() == mx::uint32) return {t.data<uint32_t>(), t.data<uint32_t>() + t.size()};
  if (t.flags().row_contiguous && t.dtype() == mx::int32) return {t.data<int32_t>(), t.data<int32_t>() + t.size()};
  auto c = mx::astype(t, mx::int32);  // another layout: rare (the samplers' outputs are contiguous)
  mx::eval(c);
  return {c.data<int32_t>(), c.data<int32_t>() + c.size()};
}

}  // namespace mlxcpp
