// VecOps::attend_group_q for AVX-512 with VNNI (this file is compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c; called only where the CPU has them): a decode
// query over an affine-quantized cache read as it is packed. As attend_packed_avx2.cpp, with
//   q . k_j = sum_g s_jg (q_g . w_jg) + b_jg sum(q_g),
// the integer dots q_g . w_jg taken by vpdpwssd (32 multiply-adds an instruction) on the query
// rounded to int16 (one scale a query row: |q| / 32767 at most, far below the cache's own
// quantization), and the values as sum_j (p_j s_jg) w_jg + sum_j p_j b_jg in float32.
// 8-bit caches with groups of a multiple of 32, 4-bit ones of 64; others go to the AVX2 kernel.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attend_packed.h"
#include "kernels/row_count.h"
#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

namespace {

using namespace packed;

// Four int32 vectors' lane sums, in order.
inline __m128i reduce4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
  const __m256i v = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// 32 packed values of a key row from element c as int16 words for vpdpwssd against the query
// words laid out to match: 8-bit rows in order (32 words); 4-bit rows 64 values at once, their
// low nibbles (even elements) then the high ones (the query's words permuted alike).
template <int Bits>
inline void key_words(const uint8_t* row, int c, __m512i& lo, __m512i& hi) {
  if constexpr (Bits == 8) {
    lo = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c)));
  } else {
    const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c / 2)));
    lo = _mm512_and_si512(b, _mm512_set1_epi16(0x0F));
    hi = _mm512_srli_epi16(b, 4);
  }
}

// Scores of H query rows (int16 words qw rows hd apart, their scales qs, group sums qsum rows
// `groups` apart) against key rows j..j+3 (past `last`: repeats, not stored) into sc[h * n + jj].
template <int H, int Bits>
void scores4(const int16_t* qw, const float* qs, const float* qsum, const PackedKv& k, long j, long last,
             int hd, int group, float scale, float* sc, int n, int jj) {
  const uint8_t* rows[4];
  for (int i = 0; i < 4; ++i) rows[i] = k.w + std::min(j + i, last) * k.w_stride;
  const int groups = hd / group;
  __m128 tot[H];
  for (int h = 0; h < H; ++h) tot[h] = _mm_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m512i a[H][4];
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < 4; ++i) a[h][i] = _mm512_setzero_si512();
    constexpr int kStep = Bits == 8 ? 32 : 64;
    for (int c = g * group; c < (g + 1) * group; c += kStep) {
      for (int i = 0; i < 4; ++i) {
        __m512i lo, hi;
        key_words<Bits>(rows[i], c, lo, hi);
        for (int h = 0; h < H; ++h) {
          const int16_t* qr = qw + static_cast<long>(h) * hd + c;
          a[h][i] = _mm512_dpwssd_epi32(a[h][i], lo, _mm512_loadu_si512(qr));
          if constexpr (Bits == 4) a[h][i] = _mm512_dpwssd_epi32(a[h][i], hi, _mm512_loadu_si512(qr + 32));
        }
      }
    }
    __m128 s4, b4;
    scales4(k, j, last, g, s4, b4);
    for (int h = 0; h < H; ++h) {
      const __m128 d = _mm_cvtepi32_ps(reduce4(a[h][0], a[h][1], a[h][2], a[h][3]));
      tot[h] = _mm_fmadd_ps(_mm_mul_ps(d, _mm_set1_ps(qs[h])), s4,
                            _mm_fmadd_ps(b4, _mm_set1_ps(qsum[h * groups + g]), tot[h]));
    }
  }
  const int count = static_cast<int>(std::min<long>(4, last - j + 1));  // the rows not past `last`
  for (int h = 0; h < H; ++h) {
    alignas(16) float out[4];
    _mm_store_ps(out, _mm_mul_ps(tot[h], _mm_set1_ps(scale)));
    std::copy_n(out, count, sc + static_cast<long>(h) * n + jj);
  }
}

// 32 values of a value row from column c as two float vectors: 8-bit in order; 4-bit its even
// columns then its odd ones (the accumulators are put back in order at the end).
template <int Bits>
inline void value_floats(const uint8_t* row, int c, __m512& v0, __m512& v1) {
  if constexpr (Bits == 8) {
    v0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c))));
    v1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c + 16))));
  } else {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c / 2)));
    v0 = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x0F)));
    v1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
  }
}

// acc[m] = sum_jj cf[m][jj] v_jj[c .. c + 32) over value rows first.. (MB rows of coefficients,
// n apart).
template <int MB, int Bits>
void values32(const float* cf, const PackedKv& v, long first, int n, int c, __m512 (&acc)[MB][2]) {
  for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
  for (int jj = 0; jj < n; ++jj) {
    __m512 w0, w1;
    value_floats<Bits>(v.w + (first + jj) * v.w_stride, c, w0, w1);
    for (int m = 0; m < MB; ++m) {
      const __m512 p = _mm512_set1_ps(cf[static_cast<long>(m) * n + jj]);
      acc[m][0] = _mm512_fmadd_ps(p, w0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(p, w1, acc[m][1]);
    }
  }
}

template <int Bits>
void attend_packed(const float* q, int G, const PackedKv& k, const PackedKv& v, int group, int hd, int first, int last,
                   float scale, float* scratch, float* out, float* part) {
  const int n = last - first + 1, groups = hd / group;
  float* const sc = scratch;                                  // G * n scores, then weights
  float* const cf = sc + static_cast<long>(G) * n;            // 4 * n: weights times a group's scales
  float* const qsum = cf + 4L * n;                            // G * groups
  float* const qs = qsum + static_cast<long>(G) * groups;     // G: the query words' scales
  // The query rows as int16 words (G * hd, in the scratch past qs; 4-bit: each 64 permuted to
  // its even elements then its odd ones).
  auto* const qw = reinterpret_cast<int16_t*>(qs + G + 4);
  for (int h = 0; h < G; ++h) {
    const float* qh = q + static_cast<long>(h) * hd;
    float amax = 0.f;
    for (int i = 0; i < hd; ++i) amax = std::max(amax, std::abs(qh[i]));
    qs[h] = amax > 0.f ? amax / 32767.f : 1.f;
    const float inv = 1.f / qs[h];
    int16_t* w = qw + static_cast<long>(h) * hd;
    for (int i = 0; i < hd; ++i) {
      const int at = Bits == 8 ? i : i / 64 * 64 + (i % 2) * 32 + i % 64 / 2;
      w[at] = static_cast<int16_t>(std::lrint(qh[i] * inv));
    }
    for (int g = 0; g < groups; ++g) {
      float s = 0.f;
      for (int i = 0; i < group; ++i) s += qh[g * group + i];
      qsum[h * groups + g] = s;
    }
  }
  for (int j = 0; j < n; j += 4) {
    prefetch_ahead(k, v, first, j, n);
    for (int h0 = 0; h0 < G; h0 += 3)
      with_row_count<3>(std::min(3, G - h0), [&]<int H>() {
        scores4<H, Bits>(qw + static_cast<long>(h0) * hd, qs + h0, qsum + h0 * groups, k, first + j, last, hd,
                         group, scale, sc + static_cast<long>(h0) * n, n, j);
      });
  }
  // Even / odd columns (4-bit accumulators) back in order.
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  float inv[4], bsum[4];
  for (int h0 = 0; h0 < G; h0 += 4) {
    const int mb = std::min(4, G - h0);
    softmax_rows(sc, n, h0, mb, part, inv);
    for (int c = 0; c < hd; c += 32) {
      const int g = c / group;
      if (c % group == 0) rows_coefficients(sc, n, h0, mb, v, first, g, cf, bsum);  // this group's
      with_row_count<4>(mb, [&]<int MB>() {
        __m512 acc[MB][2];
        values32<MB, Bits>(cf, v, first, n, c, acc);
        for (int m = 0; m < MB; ++m) {
          float* o = out + static_cast<long>(h0 + m) * hd + c;
          const __m512 b = _mm512_set1_ps(bsum[m]), iv = _mm512_set1_ps(inv[m]);
          __m512 r0 = acc[m][0], r1 = acc[m][1];
          if constexpr (Bits == 4) {
            r0 = _mm512_permutex2var_ps(acc[m][0], lo_idx, acc[m][1]);
            r1 = _mm512_permutex2var_ps(acc[m][0], hi_idx, acc[m][1]);
          }
          _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_add_ps(r0, b), iv));
          _mm512_storeu_ps(o + 16, _mm512_mul_ps(_mm512_add_ps(r1, b), iv));
        }
      });
    }
  }
}

}  // namespace

bool attend_group_q512(const float* q, int G, const PackedKv& k, const PackedKv& v, int bits, int group, int hd,
                       int first, int last, float scale, float* scratch, float* out, float* part) {
  if (last < first || hd % group != 0 || !((bits == 8 && group % 32 == 0) || (bits == 4 && group % 64 == 0))) {
    return attend_group_q256(q, G, k, v, bits, group, hd, first, last, scale, scratch, out, part);
  }
  if (bits == 8) attend_packed<8>(q, G, k, v, group, hd, first, last, scale, scratch, out, part);
  else attend_packed<4>(q, G, k, v, group, hd, first, last, scale, scratch, out, part);
  return true;
}

}  // namespace mlxcpp::kernels
