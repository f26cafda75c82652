// Reading one quantization scale or bias of a given storage type as float. Include from the
// kernel translation units (the ISA ones compile the 16-bit conversions to F16C / shifts).
#pragma once

#include <mlx/types/bf16.h>
#include <mlx/types/half_types.h>

#include "kernels/qmatmul.h"

namespace mlxcpp::kernels {

template <ScaleType ST>
inline float load_scale(const void* p, long i) {
  if constexpr (ST == ScaleType::kF32) return static_cast<const float*>(p)[i];
  if constexpr (ST == ScaleType::kF16) return static_cast<float>(static_cast<const mlx::core::float16_t*>(p)[i]);
  if constexpr (ST == ScaleType::kBF16) return static_cast<float>(static_cast<const mlx::core::bfloat16_t*>(p)[i]);
}

// Instantiates F<ST> for the run-time scale type (F is a class template with a static call()).
template <template <ScaleType> class F, class... A>
inline auto with_scale_type(ScaleType st, A&&... a) {
  switch (st) {
    case ScaleType::kF16: return F<ScaleType::kF16>::call(static_cast<A&&>(a)...);
    case ScaleType::kBF16: return F<ScaleType::kBF16>::call(static_cast<A&&>(a)...);
    default: return F<ScaleType::kF32>::call(static_cast<A&&>(a)...);
  }
}

}  // namespace mlxcpp::kernels
