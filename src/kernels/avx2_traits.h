// The AVX2 vector traits shared by the AVX2 kernels (float GEMV/GEMM and the integer-dot GEMV).
// Include only from translation units compiled with -mavx2 -mfma -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/qmatmul_simd.h"

namespace mlxcpp::kernels::avx2 {

struct Avx2 {
  using vec = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kMb = 4;
  static constexpr int kNrWide = 1;  // 16 registers: 4 accumulators + 4 x rows + decode
  static vec zero() { return _mm256_setzero_ps(); }
  static vec set1(float v) { return _mm256_set1_ps(v); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(vec v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }

  static float f16(uint16_t bits) { return _cvtsh_ss(bits); }

  // kLanes scales (or biases) from element i, as floats.
  template <ScaleType ST>
  static vec load_scales(const void* p, long i) {
    if constexpr (ST == ScaleType::kF32) {
      return _mm256_loadu_ps(static_cast<const float*>(p) + i);
    } else {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
      if constexpr (ST == ScaleType::kF16) return _mm256_cvtph_ps(h);
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
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

}  // namespace mlxcpp::kernels::avx2
