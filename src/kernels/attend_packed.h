// Helpers shared by the packed-cache decode kernels (attend_packed_avx2.cpp, _avx512.cpp). Include
// only from translation units compiled with -mavx2 -mfma -mf16c. Internal linkage on purpose: each
// ISA's file gets its own copy (an inline function merged across them could run the AVX-512
// file's encoding on an AVX2-only CPU).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/vec_ops.h"

namespace mlxcpp::kernels::packed {
namespace {

inline float elem(const void* p, long i, bool f16) {
  return f16 ? _cvtsh_ss(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}

// N = 4 or 8 scales (or biases) of consecutive rows, `stride` elements apart from element at.
template <int N>
inline auto gather_rows(const void* p, long at, long stride, bool f16) {
  if (f16) {
    const auto* h = static_cast<const uint16_t*>(p) + at;
    alignas(16) uint16_t hv[8];
    if (stride == 1) std::copy_n(h, N, hv);
    else
      for (int i = 0; i < N; ++i) hv[i] = h[i * stride];
    if constexpr (N == 4) return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(hv)));
    else return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(hv)));
  } else {
    alignas(32) float f[N];
    const auto* x = static_cast<const float*>(p) + at;
    for (int i = 0; i < N; ++i) f[i] = x[i * stride];
    if constexpr (N == 4) return _mm_load_ps(f);
    else return _mm256_load_ps(f);
  }
}

// Scales and biases of four key rows j.. of group g (rows past `last`, a tail, repeat it).
inline void scales4(const PackedKv& k, long j, long last, int g, __m128& s4, __m128& b4) {
  if (j + 3 <= last) {
    s4 = gather_rows<4>(k.scales, j * k.s_stride + g, k.s_stride, k.f16);
    b4 = gather_rows<4>(k.biases, j * k.s_stride + g, k.s_stride, k.f16);
    return;
  }
  float s[4], b[4];
  for (int i = 0; i < 4; ++i) {
    const long at = std::min(j + i, last) * k.s_stride + g;
    s[i] = elem(k.scales, at, k.f16), b[i] = elem(k.biases, at, k.f16);
  }
  s4 = _mm_loadu_ps(s), b4 = _mm_loadu_ps(b);
}

// The rows come from memory (a layer's cache is read once a token): the key rows are requested
// kPf rows ahead of the scores, the value rows alongside them (into L2, for the pass after).
// Always inlined: GCC's IPA takes a function that only prefetches for one without side effects
// and drops its calls (prefetch_ahead as a plain inline function compiled to nothing).
constexpr int kPf = 64;
template <int Hint = _MM_HINT_T0>
[[gnu::always_inline]] inline void prefetch_row(const PackedKv& t, long j) {
  const auto* p = t.w + j * t.w_stride;
  for (long o = 0; o < t.w_stride; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), static_cast<_mm_hint>(Hint));
}
// Before the scores' rows j..j+3 of n: the first kPf rows at j == 0, then kPf rows ahead.
[[gnu::always_inline]] inline void prefetch_ahead(const PackedKv& k, const PackedKv& v, long first, int j, int n) {
  if (j == 0)
    for (int i = 0; i < kPf && i < n; ++i) {
      prefetch_row(k, first + i);
      prefetch_row<_MM_HINT_T1>(v, first + i);
    }
  for (int i = j + kPf; i < j + kPf + 4 && i < n; ++i) {
    prefetch_row(k, first + i);
    prefetch_row<_MM_HINT_T1>(v, first + i);
  }
}

// Query rows h0..h0 + mb - 1's scores (n each, in sc) to their softmax numerators; inv[m] their
// normalization, 1 / sum, or with `part` (a slice to be merged) 1, and part gets {max, sum} a row.
inline void softmax_rows(float* sc, int n, int h0, int mb, float* part, float* inv) {
  for (int m = 0; m < mb; ++m) {
    const int h = h0 + m;
    float mx;
    const float sum = softmax_numerators256(sc + static_cast<long>(h) * n, n, &mx);
    if (part) part[2 * h] = mx, part[2 * h + 1] = sum;
    inv[m] = part ? 1.0f : 1.0f / sum;
  }
}

// Value group g's coefficients for one query row: cm[jj] = p[jj] * scale_jj, and returns
// sum_jj p[jj] * bias_jj, over the n value rows first.. .
inline float group_coefficients(const float* p, const PackedKv& v, long first, int n, int g, float* cm) {
  __m256 b8 = _mm256_setzero_ps();
  int jj = 0;
  for (; jj + 8 <= n; jj += 8) {
    const long at = (first + jj) * v.s_stride + g;
    const __m256 pj = _mm256_loadu_ps(p + jj);
    _mm256_storeu_ps(cm + jj, _mm256_mul_ps(pj, gather_rows<8>(v.scales, at, v.s_stride, v.f16)));
    b8 = _mm256_fmadd_ps(pj, gather_rows<8>(v.biases, at, v.s_stride, v.f16), b8);
  }
  alignas(32) float bl[8];
  _mm256_store_ps(bl, b8);
  float b = ((bl[0] + bl[1]) + (bl[2] + bl[3])) + ((bl[4] + bl[5]) + (bl[6] + bl[7]));
  for (; jj < n; ++jj) {
    const long at = (first + jj) * v.s_stride + g;
    cm[jj] = p[jj] * elem(v.scales, at, v.f16);
    b += p[jj] * elem(v.biases, at, v.f16);
  }
  return b;
}

// group_coefficients for query rows h0..h0 + mb - 1 (weights n apart in sc): coefficients into
// cf (n apart), bias sums into bsum.
inline void rows_coefficients(const float* sc, int n, int h0, int mb, const PackedKv& v, long first, int g, float* cf,
                              float* bsum) {
  for (int m = 0; m < mb; ++m)
    bsum[m] = group_coefficients(sc + static_cast<long>(h0 + m) * n, v, first, n, g, cf + static_cast<long>(m) * n);
}

}  // namespace
}  // namespace mlxcpp::kernels::packed
