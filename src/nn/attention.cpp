#include "nn/attention.h"

#include <mlx/fast.h>
#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

mx::array scaled_dot_product_attention(const mx::array& q, const mx::array& k_in, const mx::array& v_in, float scale,
                                       const AttentionMask& mask, const std::optional<mx::array>& sinks) {
  // A cache the CPU fast path filled in float16 meets float32 queries here only when a later
  // step leaves the fused blocks: attend in the queries' dtype, as the kernels do.
  const auto k = k_in.dtype() == q.dtype() ? k_in : mx::astype(k_in, q.dtype());
  const auto v = v_in.dtype() == q.dtype() ? v_in : mx::astype(v_in, q.dtype());
  // Python's binding: "causal" -> mask_mode "causal"; an array -> mode "" with the array.
  switch (mask.kind) {
    case AttentionMask::Kind::Causal:
      return mx::fast::scaled_dot_product_attention(q, k, v, scale, "causal", std::nullopt, sinks);
    case AttentionMask::Kind::Array:
      return mx::fast::scaled_dot_product_attention(q, k, v, scale, "", mask.array, sinks);
    case AttentionMask::Kind::None:
    default:
      return mx::fast::scaled_dot_product_attention(q, k, v, scale, "", std::nullopt, sinks);
  }
}

}  // namespace mlxcpp

