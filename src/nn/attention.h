// Attention helpers shared by the families: mlx-lm's base.scaled_dot_product_attention.
#pragma once

#include <optional>

#include <mlx/array.h>

#include "cache/mask.h"

namespace mlxcpp {

mlx::core::array scaled_dot_product_attention(const mlx::core::array& queries, const mlx::core::array& keys,
                                              const mlx::core::array& values, float scale,
                                              const AttentionMask& mask,
                                              const std::optional<mlx::core::array>& sinks = std::nullopt);

}  // namespace mlxcpp

