// Affine quantized matmul in MLX's packed layout (mx.quantize, transpose=True):
//   out[m, n] = sum_k x[m, k] * (scales[n, k/g] * q[n, k] + biases[n, k/g])
// w is [n, k*bits/32] uint32, value i of a row at bit offset i*bits (little-endian bitstream);
// scales and biases are [n, k/g] float32, float16 or bfloat16 (both the same type: 16-bit ones
// are read in place, a fifth less memory traffic at group 32). Activations and accumulation
// are float32.
#pragma once

#include <cstdint>

namespace mlxcpp::kernels {

class KernelContext;

enum class ScaleType : uint8_t { kF32, kF16, kBF16 };

// kMlx: MLX's layout above. kRows8: the fast path's layout, made at load (repack_rows8) for
// the integer-dot kernels: one stream per block of 8 rows, group after group; each group is
// GROUP * BITS bytes of weights in 16-byte chunks, byte 2j + h of a chunk belonging to row j
// (4-bit: chunk c covers k = 4c..4c+3 of the group, the low nibble k = 4c + h, the high one
// 4c + 2 + h; 8-bit: chunk c covers k = 2c + h), then the 8 rows' scales and the 8 biases in
// the scale type. Widened to 16-bit lanes, a chunk is an int16-pair dot product's operand
// with lane j = row j, so a GEMV needs no horizontal sums and reads one sequential stream
// (`w` points to it; scales and biases are unused). 5- and 6-bit groups hold the low four bits
// of each value as the 4-bit layout does (GROUP * 4 bytes), then per 4-bit chunk c its BITS - 4
// bit planes, one uint32 each (plane b of chunk c at GROUP * 4 + 4 * ((BITS - 4) * c + b)): bit
// i (< 16) is bit 4 + b of the value in byte i's low nibble, bit 16 + i that of its high nibble,
// so a plane becomes a lane mask of the widened chunk's low or high half.
// A symmetric kRows8 matrix (QMatrixView::sym) stores no biases: each is -2^(BITS-1) x its scale
// (GGUF's Q4_0 / Q8_0 converted: MLX's affine form of d * (q - 8) or d * q), so a group carries
// Q4_0's 18 bytes a row, not 20.
enum class QLayout : uint8_t { kMlx, kRows8 };

struct QMatrixView {
  const uint32_t* w;
  const void* scales;
  const void* biases;
  int n, k, bits, group;
  ScaleType stype = ScaleType::kF32;
  QLayout layout = QLayout::kMlx;
  bool sym = false;  // kRows8 without biases (see QLayout)
};

// --- kRows8 ---
constexpr int scale_bytes(ScaleType st) { return st == ScaleType::kF32 ? 4 : 2; }
// Bytes of one group of one 8-row block (sym: no biases).
constexpr long rows8_group_bytes(int bits, int group, ScaleType st, bool sym = false) {
  return static_cast<long>(group) * bits + (sym ? 8L : 16L) * scale_bytes(st);
}
// A symmetric matrix's implied bias of a value with this scale: -2^(bits-1) x scale.
constexpr float rows8_sym_bias(int bits, float scale) { return -static_cast<float>(1 << (bits - 1)) * scale; }
// Where row j's scale (bias: its bias, not in a symmetric matrix) sits within a group of an
// 8-row block, in bytes.
constexpr long rows8_scale_offset(int bits, int group, ScaleType st, int j, bool bias = false) {
  return static_cast<long>(group) * bits + (bias ? 8 + j : j) * scale_bytes(st);
}
// uint32 words per row of a kRows8 matrix ([n, words]: a row's share of its block's stream)
// and back.
inline int rows8_row_words(int k, int bits, int group, ScaleType st, bool sym = false) {
  return static_cast<int>(k / group * rows8_group_bytes(bits, group, st, sym) / 32);
}
inline int rows8_k(long row_words, int bits, int group, ScaleType st, bool sym = false) {
  return static_cast<int>(row_words * 32 / rows8_group_bytes(bits, group, st, sym) * group);
}
// The widths kRows8 holds: 4, 5, 6 and 8 bits.
constexpr bool rows8_bits(int bits) { return bits == 4 || bits == 5 || bits == 6 || bits == 8; }
// Whether a matrix of n rows can take kRows8 (those widths, whole blocks of 8 rows).
inline bool rows8_supported(int bits, int group, int n) {
  return rows8_bits(bits) && (group == 32 || group == 64 || group == 128) && n > 0 && n % 8 == 0;
}
// Bit planes a kRows8 value keeps beside its low nibble (5-bit: 1, 6-bit: 2; 4/8-bit: none).
constexpr int rows8_planes(int bits) { return bits == 5 || bits == 6 ? bits - 4 : 0; }
// 16-byte chunks of weights in a kRows8 group (4/5/6-bit: the low nibbles' chunks).
constexpr int rows8_chunks(int bits, int group) { return bits == 8 ? group / 2 : group / 4; }
// `src` (MLX layout) rewritten as kRows8 into dst [n * rows8_row_words(...)]: blocks of 8 rows
// [block0, block1) (block1 < 0: to the end); sym: without biases (each must be
// rows8_sym_bias of its scale).
void repack_rows8(const QMatrixView& src, uint32_t* dst, int block0 = 0, int block1 = -1, bool sym = false);

// The activations a kernel reads: m rows of k floats, prepared as its QKernel asks: with
// x_block > 0 each block of x_block values is de-interleaved (even elements, then odd ones:
// the order of low and high nibbles in packed bytes), and xsum holds sum(x) per quantization
// group ([m, k / group]) so biases cost one multiply per group instead of one per weight.
// With QKernel::quantize the kernel reads xq instead of x: each row of x as int16 levels
// (x ≈ xq * xd[row], |xq| <= 32767: about 4-5 significant digits of the row's largest value;
// with QKernel::group_steps xd[row, group], of each group's largest value) so that products
// are exact integer dot products (vpmaddwd, vpdpwssd).
struct QInput {
  const float* x;
  const float* xsum;
  int m;
  const int16_t* xq = nullptr;
  const float* xd = nullptr;
};

// Computes rows [n0, n1) of out (row stride ldo).
using QRowsFn = void (*)(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo);
// An integer-dot kernel's activations for one row of x (k values, k % group == 0): its int16
// levels as QInput describes, their step and xsum (sum of x per group).
using QQuantizeFn = void (*)(const float* x, int k, int group, int16_t* levels, float* step, float* xsum);

struct QKernel {
  QRowsFn rows = nullptr;
  int x_block = 0;
  bool xsum = false;
  // Integer-dot kernels (int16 activations) read QInput::xq/xd, which this fills per row.
  QQuantizeFn quantize = nullptr;
  // Row ranges handed to rows() start at multiples of this (the kernel's column block).
  int n_align = 4;
  // quantize() writes one step per quantization group (QInput::xd is [m, k / group]) instead
  // of one per row.
  bool group_steps = false;
};

// Per-ISA kernels (rows == nullptr where an ISA has no path for these bits; scalar has all).
QKernel qmatmul_kernel_scalar(int bits, ScaleType st);
QKernel qmatmul_kernel_avx2(int bits, ScaleType st);
QKernel qmatmul_kernel_avx512(int bits, ScaleType st);
// Integer-dot GEMV for a few rows of x (decode, a batch of decoding sequences): int16
// activations, 4/5/6/8-bit weights, each block of weight rows decoded once for all rows of x.
QKernel qmatmul_kernel_avx2_i16(int bits, ScaleType st);
// Integer-dot GEMMs for more rows (prefill): 2..8-bit weights (not 7), int16 activations with
// a step per quantization group; AVX-512 with VNNI (vpdpwssd) and AVX2 (vpmaddwd).
QKernel qmatmul_kernel_avx512_i16_gemm(int bits, ScaleType st);
QKernel qmatmul_kernel_avx2_i16_gemm(int bits, ScaleType st);
// Integer-dot GEMV over kRows8 matrices (<= kI16MaxRows rows of x, or kDecodeGemvMaxRows decode
// rows; 4/5/6/8-bit): AVX2 (vpmaddwd)
// and AVX-512 VNNI (vpdpwssd on 256-bit vectors, 32 registers).
QKernel qmatmul_kernel_avx2_rows8(int bits, ScaleType st);
QKernel qmatmul_kernel_vnni_rows8(int bits, ScaleType st);
// The integer-dot GEMV's activations for one row in natural order (AVX2; a QQuantizeFn): int16
// levels of step max|x| / 32767 over the k values, and sum(x) per group.
void quantize_i16_row(const float* x, int k, int group, int16_t* levels, float* step, float* xsum);
// At most this many x rows take the integer-dot GEMV; more take the float GEMM (at 8 rows the
// GEMV still beats dequantizing tiles: 49152 x 576, 2 threads, 8-bit 3.1-3.7 vs 4.5-5.2 ms).
inline constexpr int kI16MaxRows = 8;
// Rows of x that are each one sequence's next token (a batched decode step: `decode` below)
// take the kRows8 GEMV up to this many rows: it reads each block of 8 weight rows from memory
// once for all rows of x (the other passes hit L1) at a cost per row and no fixed cost, and
// each row comes out exactly as alone (a batched request generates what it generates alone).
// 1536 x 576, 2 threads, AVX-512 VNNI, GEMV vs GEMM: 4-bit 167 vs 407 us at 16 rows, 348 vs
// 554 at 32, 658 vs 821 at 64; 8-bit 188 vs 223, 355 vs 368, 669 vs 647. (A prompt's rows
// keep the GEMM beyond kI16MaxRows: its per-group steps round them more finely.)
inline constexpr int kDecodeGemvMaxRows = 32;

// Row n of the matrix dequantized (scale * q + bias per value, MLX's dequantize) into out[k].
void dequantize_row(const QMatrixView& q, long n, float* out);

// Whether the kernel qmatmul picks for m rows of x (of a matrix in `layout`) on this context
// rounds x to int16 levels for integer dot products (see QInput); group_steps: with a step per
// quantization group.
bool qmatmul_int16(const KernelContext& ctx, int bits, int m, bool* group_steps = nullptr,
                   QLayout layout = QLayout::kMlx, bool decode = false);

// Whether our kernels handle this layout (bits 2..8 except 7, group 32/64/128).
bool qmatmul_supported(int bits, int group);

// out [m, n] (row-major, contiguous) on the context's ISA and thread pool. `decode`: the rows
// of x are separate sequences' next tokens (see kDecodeGemvMaxRows).
void qmatmul(const KernelContext& ctx, const float* x, int m, const QMatrixView& q, float* out, bool decode = false);

// Several products in one pass over the pool (one barrier instead of one per matrix), e.g. the
// q/k/v or gate/up projections of one input.
struct QJob {
  QMatrixView q;
  const float* x;
  int m;
  float* out;
  bool decode = false;  // as qmatmul's
  // Every row through the prompt GEMM (int16 levels per quantization group), whatever m: each
  // row then comes out the same in any company (a mixture of experts' per-expert products,
  // whose row counts depend on the other tokens of the batch). Not with decode.
  bool gemm_rows = false;
};
void qmatmul_many(const KernelContext& ctx, const QJob* jobs, int count);

}  // namespace mlxcpp::kernels
