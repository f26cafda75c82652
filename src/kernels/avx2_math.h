// exp and the softmax numerators in AVX2, shared by the AVX2 attention kernels. Include only
// from translation units compiled with -mavx2 -mfma.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/avx2_traits.h"

namespace mlxcpp::kernels::avx2 {

// exp(x) in float32 (Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial
// in r, times 2^n; within ~2 ulp of the exact value). Inputs are clamped to +-88.376: below,
// the result is 0; above, 2^128 = inf.
inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f)), _mm256_set1_ps(88.3762626647949f));
  const __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.f)));
  // 2^n by the exponent bits (n = -127 gives 0).
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// The softmax numerators in place: scores[j] = exp(scores[j] - max); returns their sum (and
// the max in *max_out).
inline float softmax_numerators(float* sc, int n, float* max_out) {
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  int j = 0;
  for (; j + 8 <= n; j += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(sc + j));
  float mx = Avx2::reduce_max(m8);
  for (; j < n; ++j) mx = std::max(mx, sc[j]);
  *max_out = mx;
  const __m256 mv = _mm256_set1_ps(mx);
  __m256 s8 = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(sc + j), mv));
    _mm256_storeu_ps(sc + j, e);
    s8 = _mm256_add_ps(s8, e);
  }
  float sum = Avx2::reduce(s8);
  for (; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
  return sum;
}

}  // namespace mlxcpp::kernels::avx2
