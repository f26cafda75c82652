// The integer-dot decode GEMV over the fast path's kRows8 layout (qmatmul.h), shared by the
// AVX2 and AVX-512 VNNI kernels; `I` supplies the int16 pair dot product (dot2: vpmaddwd +
// vpaddd, or vpdpwssd) and kMb, the x rows per pass (16 or 32 vector registers). Include only
// from a translation unit compiled for AVX2 (and up).
//
// Per block of 8 W rows and group: each 16-byte chunk widened to 16-bit lanes is one or two
// operands whose lane j holds row j's values at k, k + 1; the pair (x_k, x_k+1) of int16 levels
// is broadcast to every lane, so one dot2 gives all 8 rows their partial sum (exact int32) and
// the group ends with one conversion and one scale multiply for the 8 rows, not one per row as
// in the MLX layout's GEMV. out = xd * sum_g(scale_g * dot_g) + sum_g(bias_g * sum(x_g)).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/qmatmul.h"
#include "kernels/row_count.h"

namespace mlxcpp::kernels::rows8 {

// The 8 scales (or biases) at p as floats.
template <ScaleType ST>
inline __m256 load8(const uint8_t* p) {
  if constexpr (ST == ScaleType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (ST == ScaleType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

inline __m256i pair(const int16_t* x) {
  int32_t v;
  std::memcpy(&v, x, sizeof v);
  return _mm256_set1_epi32(v);
}

// How far ahead of the group being computed the stream is requested (the hardware prefetcher
// alone left a thread at ~22 GB/s, 4 KB ahead ~25; 1536 x 576 4-bit rows read from memory).
inline constexpr int kAhead = 4096;

// x rows [m0, m0 + MB) against the 8 rows of the block at p.
template <class I, int BITS, ScaleType ST, int G, int MB, bool PREFETCH>
inline void block(const QInput& in, int m0, const uint8_t* p, int k, float* out, int ldo) {
  constexpr int kChunks = G * BITS / 16;
  constexpr long kGroupBytes = rows8_group_bytes(BITS, G, ST);
  const int groups = k / G;
  const __m256i low4 = _mm256_set1_epi16(0x0F);
  __m256 acc[MB], accb[MB];
  for (int mm = 0; mm < MB; ++mm) acc[mm] = accb[mm] = _mm256_setzero_ps();
  for (int g = 0; g < groups; ++g, p += kGroupBytes) {
    if constexpr (PREFETCH)
      for (int o = 0; o < kGroupBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead + o, _MM_HINT_T0);
    // Four independent sums per x row (vpdpwssd's latency; one or two chains of it ran the
    // 8-bit GEMV at half speed).
    __m256i s[MB][4];
    for (int mm = 0; mm < MB; ++mm)
      for (int a = 0; a < 4; ++a) s[mm][a] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) {
      const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * c)));
      for (int mm = 0; mm < MB; ++mm) {
        const int16_t* x = in.xq + static_cast<long>(m0 + mm) * k + g * G;
        if constexpr (BITS == 4) {
          const int a = 2 * (c & 1);
          s[mm][a] = I::dot2(s[mm][a], _mm256_and_si256(v, low4), pair(x + 4 * c));
          s[mm][a + 1] = I::dot2(s[mm][a + 1], _mm256_srli_epi16(v, 4), pair(x + 4 * c + 2));
        } else {
          s[mm][c & 3] = I::dot2(s[mm][c & 3], v, pair(x + 2 * c));
        }
      }
    }
    const __m256 sc = load8<ST>(p + rows8_scale_offset(BITS, G, ST, 0)), bi = load8<ST>(p + rows8_scale_offset(BITS, G, ST, 0, true));
    for (int mm = 0; mm < MB; ++mm) {
      const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(s[mm][0], s[mm][1]), _mm256_add_epi32(s[mm][2], s[mm][3]));
      acc[mm] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), sc, acc[mm]);
      accb[mm] = _mm256_fmadd_ps(bi, _mm256_set1_ps(in.xsum[static_cast<long>(m0 + mm) * groups + g]), accb[mm]);
    }
  }
  for (int mm = 0; mm < MB; ++mm)
    _mm256_storeu_ps(out + static_cast<long>(m0 + mm) * ldo, _mm256_fmadd_ps(_mm256_set1_ps(in.xd[m0 + mm]), acc[mm], accb[mm]));
}

// Rows [n0, n1) (multiples of 8) against every row of x, kMb rows of x at a time; a block's
// stream comes from memory in the first pass (prefetched) and from L1/L2 in the others.
template <class I, int BITS, ScaleType ST, int G>
void rows(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  const long block_bytes = static_cast<long>(q.k / G) * rows8_group_bytes(BITS, G, ST);
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  for (int n = n0; n < n1; n += 8) {
    const uint8_t* p = base + static_cast<long>(n / 8) * block_bytes;
    for (int m0 = 0; m0 < in.m; m0 += I::kMb) {
      with_row_count<I::kMb>(std::min(I::kMb, in.m - m0), [&]<int MB>() {
        if (m0 == 0) block<I, BITS, ST, G, MB, true>(in, m0, p, q.k, out + n, ldo);
        else block<I, BITS, ST, G, MB, false>(in, m0, p, q.k, out + n, ldo);
      });
    }
  }
}

template <class I, int BITS, ScaleType ST>
void rows_any(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  with_group(q.group, [&]<int G>() { rows<I, BITS, ST, G>(in, q, n0, n1, out, ldo); });
}

// QKernel entries (with_scale_type's F): activations as the MLX-layout GEMV's without the
// de-interleave (quantize_i16_row: natural order, one step per row, sums per group).
template <class I>
struct Table {
  template <ScaleType ST>
  struct For {
    static QKernel call(int bits) {
      QKernel k;
      if (bits == 4) k.rows = rows_any<I, 4, ST>;
      if (bits == 8) k.rows = rows_any<I, 8, ST>;
      if (!k.rows) return k;
      k.xsum = true;
      k.quantize = quantize_i16_row;
      k.n_align = 8;
      return k;
    }
  };
};

}  // namespace mlxcpp::kernels::rows8
