// Reading one quantization scale or bias of a given storage type as float. The float16
// conversion comes from `H::f16` so that each ISA's kernels use their own instruction (F16C)
// and the portable one stays MLX's; H is part of the instantiation, so the differently
// compiled copies never merge.
#pragma once

#include <cstdint>
#include <cstring>

#include <mlx/types/half_types.h>

#include "kernels/qmatmul.h"

namespace mlxcpp::kernels {

// The portable float16 conversion (MLX's).
struct PortableHalf {
  static float f16(uint16_t bits) {
    mlx::core::float16_t h;
    std::memcpy(&h, &bits, sizeof bits);
    return static_cast<float>(h);
  }
};

template <ScaleType ST, class H = PortableHalf>
inline float load_scale(const void* p, long i) {
  if constexpr (ST == ScaleType::kF32) {
    return static_cast<const float*>(p)[i];
  } else {
    const uint16_t bits = static_cast<const uint16_t*>(p)[i];
    if constexpr (ST == ScaleType::kF16) return H::f16(bits);
    // bfloat16: the high half of a float32.
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, sizeof f);
    return f;
  }
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
