// Reading MLX arrays inside our primitives: any float dtype, any strides, as contiguous float32.
#pragma once

#include <optional>
#include <vector>

#include <mlx/array.h>

#include "kernels/qmatmul.h"

namespace mlxcpp::kernels {

// The array's elements in row-major order as float32: the array's own buffer when it already
// is contiguous float32, otherwise converted/gathered into `scratch`.
const float* contiguous_f32(const mlx::core::array& a, std::vector<float>& scratch);

// Writes the array's elements in row-major order, in its own (floating or uint32) dtype, to out
// (a.nbytes() bytes).
void copy_contiguous(const mlx::core::array& a, void* out);

// The scale storage type our qmatmul kernels read in place for this dtype (nullopt: none).
std::optional<ScaleType> scale_type(mlx::core::Dtype d);

// Scales + biases as a kernel reads them: in place when both are row-contiguous of one
// supported type, otherwise as float32 copies in the scratch vectors.
struct ScalePair {
  const void* scales;
  const void* biases;
  ScaleType type;
};
ScalePair scale_pair(const mlx::core::array& s, const mlx::core::array& b, std::vector<float>& s_scratch,
                     std::vector<float>& b_scratch);

// The index types our primitives read (row_index_any's).
inline bool index_dtype(mlx::core::Dtype d) {
  return d == mlx::core::int32 || d == mlx::core::uint32 || d == mlx::core::int64 || d == mlx::core::uint64;
}
// Element i (row-major order) of the integer array `ids`, whatever its strides, as a row of a
// table of `rows` (negative ids wrap as take's; clamped into the table).
long row_index_any(const mlx::core::array& ids, size_t i, long rows);

// Whether `a` is float32 and row-contiguous (usable in place).
bool is_contiguous_f32(const mlx::core::array& a);

// A matrix in the fast path's kRows8 layout (qmatmul.h) travels as MLX arrays too: w [n,
// rows8_row_words] uint32 holds the stream, scales and biases are empty arrays of the scale
// type (an MLX-layout matrix of n > 0 rows never has empty scales).
inline bool is_rows8(const mlx::core::array& w, const mlx::core::array& scales) {
  return scales.size() == 0 && w.size() > 0;
}
// A symmetric kRows8 matrix (QMatrixView::sym) has an empty int8 biases array instead.
inline bool is_rows8_sym(const mlx::core::array& w, const mlx::core::array& scales, const mlx::core::array& biases) {
  return is_rows8(w, scales) && biases.size() == 0 && biases.dtype() == mlx::core::int8;
}
// Scales and biases our kernels read: one scale type for both, or a symmetric kRows8 matrix's.
inline bool kernel_scale_pair(const mlx::core::array& w, const mlx::core::array& scales,
                              const mlx::core::array& biases) {
  return scale_type(scales.dtype()) && (scales.dtype() == biases.dtype() || is_rows8_sym(w, scales, biases));
}
// What a stock op given kRows8 arrays reports.
inline constexpr const char* kRows8Stock =
    "[fast path] these quantized weights were repacked at load for the CPU fast path's kernels (kRows8 layout); "
    "stock MLX ops (a GPU stream, a non-float input) cannot read them: load the model with --mlx-layout, with "
    "--parity, or for that device";
// The number of columns (k) of a quantized matrix in either layout.
int quantized_k(const mlx::core::array& w, const mlx::core::array& scales, const mlx::core::array& biases, int bits,
                int group);
// The kernels' view of a quantized matrix in either layout (MLX layout: scales and biases
// row-contiguous of one type scale_type covers).
QMatrixView quantized_view(const mlx::core::array& w, const mlx::core::array& scales, const mlx::core::array& biases,
                           int bits, int group);

}  // namespace mlxcpp::kernels
