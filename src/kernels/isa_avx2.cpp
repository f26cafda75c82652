// AVX2 kernels (this file is compiled with -mavx2 -mfma -mf16c).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/qmatmul_simd.h"
#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

namespace {

struct Avx2 {
  using vec = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kMb = 4;
  static constexpr int kNrWide = 1;  // 16 registers: 4 accumulators + 4 x rows + decode
  static vec zero() { return _mm256_setzero_ps(); }
  static vec set1(float v) { return _mm256_set1_ps(v); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  static float f16(uint16_t bits) { return _cvtsh_ss(bits); }

  // Eight scales (or biases) from element i, as floats.
  template <ScaleType ST>
  static vec load8(const void* p, long i) {
    if constexpr (ST == ScaleType::kF32) {
      return _mm256_loadu_ps(static_cast<const float*>(p) + i);
    } else {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
      if constexpr (ST == ScaleType::kF16) return _mm256_cvtph_ps(h);
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
  // sum_i p[off + i] * xs[i] over n values (the bias term of a row).
  template <ScaleType ST>
  static float dot_scales(const void* p, long off, const float* xs, int n) {
    vec acc = zero();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = fma(load8<ST>(p, off + i), load(xs + i), acc);
    float s = reduce(acc);
    for (; i < n; ++i) s += load_scale<ST, Avx2>(p, off + i) * xs[i];
    return s;
  }

  // 16 packed 4-bit values (8 bytes): low nibbles (even elements) and high nibbles (odd).
  static void q4(const uint8_t* p, vec& lo, vec& hi) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0xF)));
    hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
  }

  // kLanes values starting at element k of a packed row, as integer-valued floats.
  template <int BITS>
  static vec qint(const uint8_t* row, int k) {
    __m256i q;
    if constexpr (BITS == 8) {
      q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + k)));
    } else if constexpr (BITS == 2) {
      uint16_t two;  // eight 2-bit values
      std::memcpy(&two, row + k / 4, sizeof two);
      const __m256i shift = _mm256_set_epi32(14, 12, 10, 8, 6, 4, 2, 0);
      q = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(two), shift), _mm256_set1_epi32(0x3));
    } else {
      // 3/5/6 bits: the BITS bytes of eight values, spread to lanes by one byte shuffle.
      static constexpr simd::Spread<BITS, kLanes> sp{};
      uint64_t raw = 0;
      std::memcpy(&raw, row + k * BITS / 8, BITS);
      const __m256i bytes = _mm256_broadcastsi128_si256(_mm_cvtsi64_si128(static_cast<long long>(raw)));
      q = _mm256_shuffle_epi8(bytes, _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.idx)));
      q = _mm256_srlv_epi32(q, _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.shift)));
      q = _mm256_and_si256(q, _mm256_set1_epi32((1 << BITS) - 1));
    }
    return _mm256_cvtepi32_ps(q);
  }
};

}  // namespace

QKernel qmatmul_kernel_avx2(int bits, ScaleType st) {
  return with_scale_type<simd::KernelTable<Avx2>::For>(st, bits);
}

namespace {

float dot256(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = Avx2::reduce(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
void axpy256(float a, const float* x, float* y, int n) {
  const __m256 av = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}
float sumsq256(const float* x, int n) { return dot256(x, x, n); }

}  // namespace

const VecOps& vec_ops_avx2() {
  static const VecOps ops{dot256, axpy256, sumsq256};
  return ops;
}

}  // namespace mlxcpp::kernels
