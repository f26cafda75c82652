// Small float32 vector routines the block kernels are built from, one table per ISA.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace mlxcpp::kernels {

// One side (keys or values) of an affine-quantized cache for one kv head, as mx.quantize packs
// it: row j's bytes at w + j * w_stride, its groups' scales and biases (float32, or float16 bit
// patterns with f16) at j * s_stride.
struct PackedKv {
  const uint8_t* w;
  long w_stride;
  const void* scales;
  const void* biases;
  long s_stride;
  bool f16;
};

struct VecOps {
  void (*axpy)(float a, const float* x, float* y, int n);  // y += a * x
  float (*sum_squares)(const float* x, int n);
  // Attention of G query rows of one kv head (q and out: G rows of hd) over the key and value
  // rows first..last (hd floats each, rows hd apart from k / v): out = softmax(scale * K q) V
  // per row. scores: scratch of G * (last - first + 1) floats. With `part` (a slice of a longer
  // range, to be merged; G pairs): out is left unnormalized, sum_j exp(s_j - m) v_j, and part
  // receives {m, sum_j exp(s_j - m)} per row. Each key and value row is read once for all G.
  void (*attend_group)(const float* q, int G, const float* k, const float* v, int hd, int first, int last, float scale,
                       float* scores, float* out, float* part);
  // A prompt's tile: P consecutive positions of one kv head, G query rows each (position p's
  // at q + p * q_stride, hd apart; out likewise with out_stride), position p attending keys
  // first[p]..last[p] (both nondecreasing in p). scores: P * G * (last[P - 1] - first[0] + 1)
  // floats. The same values as attend_group per position.
  void (*attend_tile)(const float* q, long q_stride, int G, int P, const int* first, const int* last, const float* k,
                      const float* v, int hd, float scale, float* scores, float* out, long out_stride);
  // sum(exp(x[i] - shift)) over n values, accumulated in double.
  double (*sum_exp)(const float* x, long n, float shift);
  // y = silu(g) * u (mlx-lm's swiglu) and y = gelu_approx(g) * u (the tanh form; Gemma's GeGLU).
  void (*silu_mul)(const float* g, const float* u, float* y, long n);
  void (*gelu_mul)(const float* g, const float* u, float* y, long n);
  // attend_group and attend_tile over a float16 cache (k and v hold IEEE half bit patterns):
  // each row converted to float32 as it is read, then the same arithmetic in the same order,
  // so the results are those of the float32 kernels on the rounded rows.
  void (*attend_group_h)(const float* q, int G, const uint16_t* k, const uint16_t* v, int hd, int first, int last,
                         float scale, float* scores, float* out, float* part);
  void (*attend_tile_h)(const float* q, long q_stride, int G, int P, const int* first, const int* last,
                        const uint16_t* k, const uint16_t* v, int hd, float scale, float* scores, float* out,
                        long out_stride);
  // y[i] = x[i] rounded to float16 (nearest even; MLX's astype), as bit patterns.
  void (*to_half)(const float* x, uint16_t* y, long n);
  // y[i] = the float16 bit pattern x[i] as float32 (exact).
  void (*from_half)(const uint16_t* x, float* y, long n);
  // to_half, and whether every y[i] converts back to exactly x[i] (a NaN never does).
  bool (*to_half_exact)(const float* x, uint16_t* y, long n);
  // The largest of n > 0 values (+0 and -0 alike), NaN if any is NaN.
  float (*max_value)(const float* x, long n);
  // One row of a gated delta-rule state (n = Dk floats) for one token: delta = (v - g row.k) beta,
  // row' = g row + delta k (written back when `keep`), returns row'.q.
  float (*delta_rule_row)(float* row, const float* k, const float* q, float g, float v, float beta, int n, bool keep);
  // n rows of an affine-quantized cache (mx.quantize's packing: `bits` 2, 4 or 8, element i at
  // bits [i * bits, (i + 1) * bits) of the little-endian bytes) of d elements, groups of `group`
  // with their scale and bias (float32, or with f16 float16 bit patterns): out[j][i] = q[j][i] *
  // scale + bias (fused where the ISA has FMA). Row j's packed bytes at packed + j *
  // packed_stride, its scales and biases at scales / biases + j * scale_stride (elements), out
  // rows d floats apart.
  void (*dequant_rows)(const uint8_t* packed, long packed_stride, int n, int bits, int d, int group,
                       const void* scales, const void* biases, long scale_stride, bool f16, float* out);
  // C[m, n] += A[m, k] B[k, n] for small float32 matrices (kernels/gated_delta_gemm.h): A(i, p) at
  // a[i * a_rs + p * a_cs], B and C rows ldb / ldc apart.
  void (*gemm_acc)(int m, int n, int k, const float* a, long a_rs, long a_cs, const float* b, long ldb, float* c,
                   long ldc);
  // attend_group over the key and value rows first..last of a quantized cache read as packed
  // (`bits` bits, groups of `group`): the same result up to rounding, without a dequantized
  // copy. scratch: packed_scratch_floats(G, n, hd, group) floats (n = last - first + 1). false
  // where the ISA has no such kernel for these bits / group (nullptr: none at all).
  bool (*attend_group_q)(const float* q, int G, const PackedKv& k, const PackedKv& v, int bits, int group, int hd,
                         int first, int last, float scale, float* scratch, float* out, float* part);

};

const VecOps& vec_ops(Isa isa);
const VecOps& vec_ops_scalar();
const VecOps& vec_ops_avx2();
const VecOps& vec_ops_avx512();

// The scratch VecOps::attend_group_q needs for G query rows over n keys.
inline long packed_scratch_floats(int G, int n, int hd, int group) {
  return static_cast<long>(G) * (n + hd / group + hd + 1) + 4L * n + 8;
}

// The AVX2 and AVX-512 VNNI VecOps::attend_group_q (kernels/attend_packed_avx2.cpp, _avx512.cpp)
// and the AVX2 softmax numerators they share (scores[j] = exp(scores[j] - max) in place; returns
// their sum, the max in *max_out).
bool attend_group_q512(const float* q, int G, const PackedKv& k, const PackedKv& v, int bits, int group, int hd,
                       int first, int last, float scale, float* scratch, float* out, float* part);
float softmax_numerators256(float* scores, int n, float* max_out);
bool attend_group_q256(const float* q, int G, const PackedKv& k, const PackedKv& v, int bits, int group, int hd,
                       int first, int last, float scale, float* scratch, float* out, float* part);

}  // namespace mlxcpp::kernels
