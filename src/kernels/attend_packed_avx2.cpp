// VecOps::attend_group_q in AVX2 (this file is compiled with -mavx2 -mfma -mf16c): a decode
// query's attention over an affine-quantized cache read as it is packed, no dequantized copy.
// With row j's group g holding w * s + b (integers w, its scale s and bias b):
//   q . k_j   = sum_g s_jg (q_g . w_jg) + b_jg sum(q_g)
//   sum_j p_j v_j = sum_j (p_j s_jg) w_jg + sum_j p_j b_jg      (per group g of columns)
// so a row costs its integers' conversion and the dot / axpy itself, like a float16 row at half
// the bytes.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/avx2_math.h"
#include "kernels/avx2_traits.h"
#include "kernels/attend_packed.h"
#include "kernels/row_count.h"
#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

namespace {

using avx2::Avx2;
using namespace packed;

// Scores of H query rows (q rows hd apart, their group sums qsum rows `groups` apart) against the
// four key rows j..j+3 (rows past `last` repeat it and are not stored) into sc[h * n + jj].
template <int H, int Bits>
void packed_scores4(const float* q, const float* qsum, const PackedKv& k, long j, long last, int hd,
                    int group, float scale, float* sc, int n, int jj) {
  const uint8_t* rows[4];
  for (int i = 0; i < 4; ++i) rows[i] = k.w + std::min(j + i, last) * k.w_stride;
  __m128 tot[H];
  for (int h = 0; h < H; ++h) tot[h] = _mm_setzero_ps();
  for (int g = 0; g < hd / group; ++g) {
    __m256 a[H][4];
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < 4; ++i) a[h][i] = _mm256_setzero_ps();
    for (int c = g * group; c < (g + 1) * group; c += 8) {
      for (int i = 0; i < 4; ++i) {
        const __m256 w = Avx2::qint<Bits>(rows[i], c);
        for (int h = 0; h < H; ++h) a[h][i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + static_cast<long>(h) * hd + c), w, a[h][i]);
      }
    }
    __m128 s4, b4;
    scales4(k, j, last, g, s4, b4);
    for (int h = 0; h < H; ++h) {
      const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[h][0], a[h][1]), _mm256_hadd_ps(a[h][2], a[h][3]));
      const __m128 r = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
      tot[h] = _mm_fmadd_ps(r, s4, _mm_fmadd_ps(b4, _mm_set1_ps(qsum[h * (hd / group) + g]), tot[h]));
    }
  }
  const int count = static_cast<int>(std::min<long>(4, last - j + 1));  // the rows not past `last`
  for (int h = 0; h < H; ++h) {
    alignas(16) float out[4];
    _mm_store_ps(out, _mm_mul_ps(tot[h], _mm_set1_ps(scale)));
    std::copy_n(out, count, sc + static_cast<long>(h) * n + jj);
  }
}

// o[m][c .. c + 16) (+)= sum_jj cf[m][jj] w_jj[c .. c + 16) for MB rows of coefficients (n each,
// n apart), value rows first.. .
template <int MB, int Bits>
void packed_axpy16(const float* cf, const PackedKv& v, long first, int n, int c, __m256 (&acc)[MB][2]) {
  for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int jj = 0; jj < n; ++jj) {
    const uint8_t* row = v.w + (first + jj) * v.w_stride;
    const __m256 w0 = Avx2::qint<Bits>(row, c), w1 = Avx2::qint<Bits>(row, c + 8);
    for (int m = 0; m < MB; ++m) {
      const __m256 p = _mm256_broadcast_ss(cf + static_cast<long>(m) * n + jj);
      acc[m][0] = _mm256_fmadd_ps(p, w0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(p, w1, acc[m][1]);
    }
  }
}

template <int Bits>
void attend_packed(const float* q, int G, const PackedKv& k, const PackedKv& v, int group, int hd, int first, int last,
                   float scale, float* scratch, float* out, float* part) {
  const int n = last - first + 1, groups = hd / group;
  float* const sc = scratch;                          // G * n scores, then weights
  float* const cf = sc + static_cast<long>(G) * n;    // 4 * n: weights times a group's scales
  float* const qsum = cf + 4L * n;                    // G * groups
  for (int h = 0; h < G; ++h)
    for (int g = 0; g < groups; ++g) {
      const float* qg = q + static_cast<long>(h) * hd + g * group;
      __m256 s = _mm256_setzero_ps();
      for (int c = 0; c < group; c += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(qg + c));
      qsum[h * groups + g] = Avx2::reduce(s);
    }
  for (int j = 0; j < n; j += 4) {
    prefetch_ahead(k, v, first, j, n);
    for (int h0 = 0; h0 < G; h0 += 3)
      with_row_count<3>(std::min(3, G - h0), [&]<int H>() {
        packed_scores4<H, Bits>(q + static_cast<long>(h0) * hd, qsum + h0 * groups, k, first + j, last, hd,
                                group, scale, sc + static_cast<long>(h0) * n, n, j);
      });
  }
  float inv[4], bsum[4];
  for (int h0 = 0; h0 < G; h0 += 4) {
    const int mb = std::min(4, G - h0);
    softmax_rows(sc, n, h0, mb, part, inv);
    for (int c = 0; c < hd; c += 16) {
      const int g = c / group;
      if (c % group == 0) rows_coefficients(sc, n, h0, mb, v, first, g, cf, bsum);  // this group's
      with_row_count<4>(mb, [&]<int MB>() {
        __m256 acc[MB][2];
        packed_axpy16<MB, Bits>(cf, v, first, n, c, acc);
        for (int m = 0; m < MB; ++m) {
          float* o = out + static_cast<long>(h0 + m) * hd + c;
          const __m256 b = _mm256_set1_ps(bsum[m]), iv = _mm256_set1_ps(inv[m]);
          _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_add_ps(acc[m][0], b), iv));
          _mm256_storeu_ps(o + 8, _mm256_mul_ps(_mm256_add_ps(acc[m][1], b), iv));
        }
      });
    }
  }
}

}  // namespace

float softmax_numerators256(float* scores, int n, float* max_out) {
  return avx2::softmax_numerators(scores, n, max_out);
}

bool attend_group_q256(const float* q, int G, const PackedKv& k, const PackedKv& v, int bits, int group, int hd,
                       int first, int last, float scale, float* scratch, float* out, float* part) {
  if ((bits != 8 && bits != 4) || group % 16 != 0 || hd % group != 0 || last < first) return false;
  if (bits == 8) attend_packed<8>(q, G, k, v, group, hd, first, last, scale, scratch, out, part);
  else attend_packed<4>(q, G, k, v, group, hd, first, last, scale, scratch, out, part);
  return true;
}

}  // namespace mlxcpp::kernels
