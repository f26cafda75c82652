#include "nn/attention.h"

#include <mlx/fast.h>

namespace mx = mlx::core;

namespace mlxcpp {

mx::array scaled_dot_product_attention(const mx::array& q, const mx::array& k, const mx::array& v, float scale,
                                       const AttentionMask& mask, const std::optional<mx::array>& sinks) {
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

