// Microscaling checkpoints on the fast path. An mxfp4 weight (e2m1 values, one e8m0 scale per 32)
// is exactly an affine 8-bit one: twice each fp4 value is an integer in [-12, 12], so
// value = (code - 128) * 2^(e - 128) with code = 2 * fp4 + 128; bias = -128 * scale makes it a
// symmetric matrix the integer kernels run (kRows8 without biases, 8.5 bits a weight instead of
// mxfp4's 4.25: the stock CPU fallback for mxfp4 is single-threaded scalar code). nvfp4 (groups
// of 16) and mxfp8 (e4m3 values, not an integer grid) stay on the stock ops.
#pragma once

#include <array>
#include <optional>

#include <mlx/array.h>

namespace mlxcpp::kernels {

// w [n, k / 8] uint32 (fp4 nibbles, element i at bits 4 * (i % 8) of word i / 8), scales
// [n, k / 32] uint8 (e8m0) -> {w [n, k * bits / 32] uint32 (MLX's packing), scales, biases
// [n, k / 32] float32}: affine, group 32, `bits` 5 or 8, equal to the mxfp4 values exactly.
// nullopt for other shapes, dtypes or bits.
std::optional<std::array<mlx::core::array, 3>> mxfp4_as_affine(const mlx::core::array& w, const mlx::core::array& scales,
                                                               int bits);

}  // namespace mlxcpp::kernels
