// What a layer needs while it takes its weights: the strict weight map, the quantization
// config, and the float dtype floating weights are cast to (float32 in parity mode on CPU).
#pragma once

#include <optional>
#include <string>

#include <mlx/array.h>

#include "artifacts/quant_config.h"
#include "artifacts/weight_map.h"
#include "kernels/ops.h"

namespace mlxcpp {

struct LoadContext {
  WeightMap& weights;
  const QuantConfig& quant;
  std::optional<mlx::core::Dtype> float_dtype;  // nullopt: keep the stored dtype
  // Our CPU kernels (fast mode); null in parity mode, where layers use stock MLX ops only.
  kernels::FastPath fast = nullptr;

  // Casts a floating tensor to float_dtype (what mlx-lm's model.set_dtype does).
  mlx::core::array cast(mlx::core::array a) const;
  mlx::core::array take(const std::string& name, const mlx::core::Shape& shape) const;
  std::optional<mlx::core::array> take_optional(const std::string& name, const mlx::core::Shape& shape) const;
};

}  // namespace mlxcpp
