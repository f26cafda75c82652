// GGML tensor data -> MLX arrays: pure functions over one tensor's raw bytes (no file I/O).
// Block layouts and arithmetic follow ggml (ggml-common.h, ggml-quants.c dequantize_row_*) and
// gguf-py (gguf/quants.py); the MLX affine packing follows mlx/backend/cpu/quantized.cpp.
//
// Mapping (a GGML "row" is the last dim of the HF-order shape; blocks run along it):
//   F32, F16, BF16 (I8..I64, F64)  -> kept as a dense array of the same dtype
//   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0   -> MLX affine, bits 4/4/5/5/8, group 32, lossless
//   Q4_K, Q5_K                     -> MLX affine, bits 4/5, group 32, lossless
//   Q2_K, Q3_K, Q6_K               -> float32 dequantization, then MLX affine 8-bit group 32
//                                     (or a dense array on request, see GgmlConvertOptions)
//   anything else                  -> WeightError "unsupported ggml type"
// "Lossless" means: dequantize(weight, scales, biases) computed in float32 equals ggml's float32
// dequantization bit for bit (MLX computes q*scale then +bias; every product here is exact).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp {

// ggml.h's enum ggml_type (the ids stored in GGUF tensor infos).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// Elements per block and bytes per block (F32: 1 and 4; Q4_K: 256 and 144).
struct GgmlBlockInfo {
  int64_t block_size = 0;
  int64_t type_size = 0;
};

// "Q4_K", or "type 99" for an id this table does not know.
std::string ggml_type_name(GgmlType type);
// nullopt for an unknown id (e.g. a removed type such as 4 or 31).
std::optional<GgmlBlockInfo> ggml_block_info(GgmlType type);
// True when dequantize_ggml (and so convert_ggml_tensor) handles the type.
bool ggml_type_supported(GgmlType type);

// One GGML tensor as found in a GGUF file. Nothing is owned: `data` may point into an mmap.
struct GgmlTensorView {
  std::string name;             // for error messages only
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;   // HF/MLX order [..., rows, cols] (GGUF's ne reversed)
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

// Bytes a tensor of `type` and `shape` occupies. Throws WeightError naming `tensor` when the type
// is unknown, a dim is negative, or the last dim is not a multiple of the block size.
size_t ggml_nbytes(GgmlType type, const std::vector<int64_t>& shape, const std::string& tensor);

// Throws WeightError naming the tensor and type unless the type is known and t.nbytes equals
// ggml_nbytes(t.type, t.shape). Called by the two functions below.
void check_ggml_tensor(const GgmlTensorView& t);

// float32 dequantization, bit-identical to ggml / gguf-py, shape t.shape. Supported types:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Otherwise
// WeightError "tensor 'x': unsupported ggml type 'IQ2_XS'" (integer types: "cannot dequantize").
// The array is evaluated.
mlx::core::array dequantize_ggml(const GgmlTensorView& t);

// An MLX affine-quantized matrix, as mlx.nn.QuantizedLinear stores it:
// weight uint32 [..., rows, cols*bits/32] (a little-endian bitstream per row, value i at bit
// i*bits), scales and biases [..., rows, cols/group_size]; w = q*scale + bias.
struct MlxAffine {
  mlx::core::array weight;
  mlx::core::array scales;
  mlx::core::array biases;
  int bits = 0;
  int group_size = 0;
  bool lossless = false;  // false when requantized, or when scales_dtype rounded a scale/bias
};

struct GgmlConvertOptions {
  // dtype of scales/biases for the lossless types. nullopt: float16 when every scale and bias is
  // exactly representable in float16 (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 unless 8*d overflows), else
  // float32 (Q4_K/Q5_K: d*sc carries up to 17 significant bits). Forcing float16/bfloat16 may
  // round them (then MlxAffine::lossless is false). Note: MLX computes in the promoted dtype of
  // activations and scales, so float16 scales are exact only with float32 activations.
  std::optional<mlx::core::Dtype> scales_dtype;
  // Types without an exact MLX form (Q2_K, Q3_K, Q6_K): nullopt = requantize the float32
  // dequantization with mx::quantize(bits, group size below); a dtype = keep them dense in it.
  std::optional<mlx::core::Dtype> dense_dtype;
  int requant_bits = 8;
  int requant_group_size = 32;
  // dtype of the requantized scales/biases (mx::quantize works in float32).
  mlx::core::Dtype requant_scales_dtype = mlx::core::float32;
};

// Converts one tensor. Quantized types give MlxAffine when the tensor has >= 2 dims, else a dense
// array (float32, or dense_dtype when set). F32/F16/BF16 come back dense, unchanged. Arrays are
// evaluated; validation errors are WeightError naming the tensor and its type.
std::variant<MlxAffine, mlx::core::array> convert_ggml_tensor(
    const GgmlTensorView& t, const GgmlConvertOptions& options = {});

}  // namespace mlxcpp
