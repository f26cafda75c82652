// AVX2 vector routines (this file is compiled with -mavx2 -mfma -mf16c): dot/axpy, exp and
// the activations and attention built on it.
#include <immintrin.h>

#include <limits>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/avx2_math.h"
#include "kernels/avx2_traits.h"
#include "kernels/gated_delta_gemm.h"
#include "kernels/row_count.h"
#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

namespace {

using avx2::Avx2;
using avx2::exp256;
using avx2::softmax_numerators;

// Eight cache values as float32: float rows as they are, float16 ones (bit patterns) converted.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t h) { return _cvtsh_ss(h); }

template <class T>
float dot256(const float* a, const T* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
  float s = Avx2::reduce(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s = std::fma(a[i], to_f32(b[i]), s);  // fused as written, whatever T
  return s;
}
template <class T>
void axpy256(float a, const T* x, float* y, int n) {
  const __m256 av = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load8(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a, to_f32(x[i]), y[i]);
}

void to_half256(const float* x, uint16_t* y, long n) {
  long i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
void from_half256(const uint16_t* x, float* y, long n) {
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

bool to_half_exact256(const float* x, uint16_t* y, long n) {
  __m256 same = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    same = _mm256_and_ps(same, _mm256_cmp_ps(_mm256_cvtph_ps(h), v, _CMP_EQ_OQ));
  }
  bool exact = _mm256_movemask_ps(same) == 0xff;
  for (; i < n; ++i) {
    y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
    exact = exact && _cvtsh_ss(y[i]) == x[i];
  }
  return exact;
}
float sumsq256(const float* x, int n) { return dot256(x, x, n); }

// out[0 .. 8 NV) = inv * sum_j p[j] * v[j * hd ..], NV vectors of a row at once.
template <int NV, class T>
void weighted_rows(const float* p, const T* v, int hd, int n, float inv, float* out) {
  __m256 acc[NV];
  for (int i = 0; i < NV; ++i) acc[i] = _mm256_setzero_ps();
  for (int j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const T* row = v + static_cast<long>(j) * hd;
    for (int i = 0; i < NV; ++i) acc[i] = _mm256_fmadd_ps(pj, load8(row + 8 * i), acc[i]);
  }
  const __m256 iv = _mm256_set1_ps(inv);
  for (int i = 0; i < NV; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(acc[i], iv));
}

// Scores of H query rows q[h] against four key rows (hd apart) into sc[h][j..j+3]: one
// transposing reduction per row.
template <int H, class T>
inline void scores_rows(const float* const* q, const T* kr, int hd, float scale, float* const* sc, int j) {
  __m256 a[H][4];
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < 4; ++i) a[h][i] = _mm256_setzero_ps();
  for (int c = 0; c < hd; c += 8) {
    __m256 qv[H];
    for (int h = 0; h < H; ++h) qv[h] = _mm256_loadu_ps(q[h] + c);
    for (int i = 0; i < 4; ++i) {
      const __m256 kv = load8(kr + static_cast<long>(i) * hd + c);
      for (int h = 0; h < H; ++h) a[h][i] = _mm256_fmadd_ps(qv[h], kv, a[h][i]);
    }
  }
  for (int h = 0; h < H; ++h) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[h][0], a[h][1]), _mm256_hadd_ps(a[h][2], a[h][3]));
    const __m128 r = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    _mm_storeu_ps(sc[h] + j, _mm_mul_ps(r, _mm_set1_ps(scale)));
  }
}

// Scores of H query rows (hd apart) against four key rows into sc (rows n apart).
template <int H, class T>
inline void scores4(const float* q, const T* kr, int hd, float scale, float* sc, int n) {
  const float* qr[H];
  float* sr[H];
  for (int h = 0; h < H; ++h) qr[h] = q + static_cast<long>(h) * hd, sr[h] = sc + static_cast<long>(h) * n;
  scores_rows<H>(qr, kr, hd, scale, sr, 0);
}

// out[hd] = inv * sum_j p[j] v[j], 64 features (8 accumulators) per pass over the rows.
template <class T>
void weighted_sum(const float* p, const T* v, int hd, int n, float inv, float* out) {
  for (int c = 0; c < hd; c += 64) {
    switch (std::min(64, hd - c) / 8) {
      case 8: weighted_rows<8>(p, v + c, hd, n, inv, out + c); break;
      case 7: weighted_rows<7>(p, v + c, hd, n, inv, out + c); break;
      case 6: weighted_rows<6>(p, v + c, hd, n, inv, out + c); break;
      case 5: weighted_rows<5>(p, v + c, hd, n, inv, out + c); break;
      case 4: weighted_rows<4>(p, v + c, hd, n, inv, out + c); break;
      case 3: weighted_rows<3>(p, v + c, hd, n, inv, out + c); break;
      case 2: weighted_rows<2>(p, v + c, hd, n, inv, out + c); break;
      default: weighted_rows<1>(p, v + c, hd, n, inv, out + c); break;
    }
  }
}

// VecOps::attend_group: G query rows of one kv head. Each block of four key rows is scored
// against every query row while it is in L1 (two rows per pass), so the cache is read from
// memory once per kv head instead of once per query head.
template <class T>
void attend_group256(const float* q, int G, const T* k, const T* v, int hd, int first, int last, float scale,
                     float* sc, float* out, float* part) {
  const int n = last - first + 1;
  k += static_cast<long>(first) * hd;
  v += static_cast<long>(first) * hd;
  if (hd % 8 != 0) {
    for (int h = 0; h < G; ++h)
      for (int j = 0; j < n; ++j)
        sc[static_cast<long>(h) * n + j] = dot256(q + static_cast<long>(h) * hd, k + static_cast<long>(j) * hd, hd) * scale;
  } else {
    // The cache rows come from memory in a decode step (a layer's cache is read once per
    // token): requested ahead, the keys kPf rows ahead and the value rows of these four keys
    // for the pass after.
    constexpr int kPf = 16;
    const long bytes4 = 4L * hd * sizeof(T);
    int j = 0;
    for (; j + 4 <= n; j += 4) {
      const T* kr = k + static_cast<long>(j) * hd;
      if (j + kPf < n) {
        const char* kp = reinterpret_cast<const char*>(kr + static_cast<long>(kPf) * hd);
        for (long o = 0; o < bytes4; o += 64) _mm_prefetch(kp + o, _MM_HINT_T0);
      }
      const char* vp = reinterpret_cast<const char*>(v + static_cast<long>(j) * hd);
      for (long o = 0; o < bytes4; o += 64) _mm_prefetch(vp + o, _MM_HINT_T0);
      int h = 0;
      for (; h + 2 <= G; h += 2) scores4<2>(q + static_cast<long>(h) * hd, kr, hd, scale, sc + static_cast<long>(h) * n + j, n);
      if (h < G) scores4<1>(q + static_cast<long>(h) * hd, kr, hd, scale, sc + static_cast<long>(h) * n + j, n);
    }
    for (; j < n; ++j)
      for (int h = 0; h < G; ++h)
        sc[static_cast<long>(h) * n + j] = dot256(q + static_cast<long>(h) * hd, k + static_cast<long>(j) * hd, hd) * scale;
  }
  for (int h = 0; h < G; ++h) {
    float* p = sc + static_cast<long>(h) * n;
    float mx;
    const float sum = softmax_numerators(p, n, &mx);
    // The weights' normalization: 1 / sum here, or left to the merge of the parts.
    if (part) part[2 * h] = mx, part[2 * h + 1] = sum;
    const float inv = part ? 1.0f : 1.0f / sum;
    float* o = out + static_cast<long>(h) * hd;
    if (hd % 8 == 0) {
      weighted_sum(p, v, hd, n, inv, o);
    } else {
      std::fill(o, o + hd, 0.f);
      for (int j = 0; j < n; ++j) axpy256(p[j] * inv, v + static_cast<long>(j) * hd, o, hd);
    }
  }
}

// out rows o[m] (m < MB) = inv[m] * sum_j p[m][j] v[j] over columns [c, c + 8 NV) and keys
// [j0, j1): each value row's columns are loaded once for MB rows of weights.
template <int MB, int NV, class T>
void weighted_block(const float* const* p, const T* v, int hd, int j0, int j1, const float* inv, float* const* o,
                    int c) {
  __m256 acc[MB][NV];
  for (int m = 0; m < MB; ++m)
    for (int i = 0; i < NV; ++i) acc[m][i] = _mm256_setzero_ps();
  for (int j = j0; j < j1; ++j) {
    __m256 vr[NV];
    for (int i = 0; i < NV; ++i) vr[i] = load8(v + static_cast<long>(j) * hd + c + 8 * i);
    for (int m = 0; m < MB; ++m) {
      const __m256 pj = _mm256_set1_ps(p[m][j]);
      for (int i = 0; i < NV; ++i) acc[m][i] = _mm256_fmadd_ps(pj, vr[i], acc[m][i]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(o[m] + c + 8 * i, _mm256_mul_ps(acc[m][i], _mm256_set1_ps(inv[m])));
}

// VecOps::attend_tile. The rows of all P positions are scored against each block of four key
// rows while it is in L1, and their weighted value sums run six rows at a time, so a prompt
// reads the keys and values about once per tile instead of once per position. A row's weights
// outside its own keys are zero (exp of nothing: written 0), so each output is the same sum
// in the same order as attend_group's (adding 0 * v leaves a float sum unchanged; a few
// scores may round differently: the blocks of four keys start at the tile's first key).
template <class T>
void attend_tile256(const float* q, long q_stride, int G, int P, const int* first, const int* last, const T* k,
                    const T* v, int hd, float scale, float* sc, float* out, long out_stride) {
  if (hd % 8 != 0) {
    for (int p = 0; p < P; ++p)
      attend_group256(q + p * q_stride, G, k, v, hd, first[p], last[p], scale, sc, out + p * out_stride, nullptr);
    return;
  }
  const int f0 = first[0], n = last[P - 1] - f0 + 1, rows = P * G;
  k += static_cast<long>(f0) * hd;
  v += static_cast<long>(f0) * hd;
  auto srow = [&](int p, int h) { return sc + static_cast<long>(p * G + h) * n; };
  std::vector<const float*> qrow(rows);
  std::vector<float*> scrow(rows);
  std::vector<int> lo(rows), hi(rows);
  for (int p = 0; p < P; ++p)
    for (int h = 0; h < G; ++h) {
      const int r = p * G + h;
      qrow[r] = q + p * q_stride + static_cast<long>(h) * hd;
      scrow[r] = srow(p, h);
      lo[r] = first[p] - f0, hi[r] = last[p] - f0 + 1;
    }
  // Scores: three rows at a time (12 accumulators) against each block of four keys that meets
  // any of their key ranges.
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    const T* kr = k + static_cast<long>(j) * hd;
    for (int r0 = 0; r0 < rows; r0 += 3) {
      const int mb = std::min(3, rows - r0);
      if (j + 4 <= *std::min_element(lo.begin() + r0, lo.begin() + r0 + mb) ||
          j >= *std::max_element(hi.begin() + r0, hi.begin() + r0 + mb))
        continue;
      with_row_count<3>(mb, [&]<int H>() { scores_rows<H>(&qrow[r0], kr, hd, scale, &scrow[r0], j); });
    }
  }
  for (; j < n; ++j)
    for (int r = 0; r < rows; ++r) scrow[r][j] = dot256(qrow[r], k + static_cast<long>(j) * hd, hd) * scale;
  // Softmax over each row's own keys; zero weights elsewhere.
  std::vector<float> inv(rows);
  std::vector<const float*> pr(rows);
  std::vector<float*> orow(rows);
  for (int p = 0; p < P; ++p)
    for (int h = 0; h < G; ++h) {
      const int r = p * G + h, a = lo[r], b = hi[r];
      float* s = scrow[r];
      float mx;
      inv[r] = 1.0f / softmax_numerators(s + a, b - a, &mx);
      std::fill(s, s + a, 0.f);
      std::fill(s + b, s + n, 0.f);
      pr[r] = s;
      orow[r] = out + p * out_stride + static_cast<long>(h) * hd;
    }
  // Weighted value sums, six rows (their keys' union) by 16 columns at a time.
  for (int r0 = 0; r0 < rows; r0 += 6) {
    const int mb = std::min(6, rows - r0);
    const int j0 = *std::min_element(lo.begin() + r0, lo.begin() + r0 + mb);
    const int j1 = *std::max_element(hi.begin() + r0, hi.begin() + r0 + mb);
    with_row_count<6>(mb, [&]<int MB>() {
      int c = 0;
      for (; c + 16 <= hd; c += 16) weighted_block<MB, 2>(&pr[r0], v, hd, j0, j1, &inv[r0], &orow[r0], c);
      if (c < hd) weighted_block<MB, 1>(&pr[r0], v, hd, j0, j1, &inv[r0], &orow[r0], c);
    });
  }
}

double sum_exp256(const float* x, long n, float shift) {
  const __m256 sv = _mm256_set1_ps(shift);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), sv));
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(s0, s1));
  double s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) s += std::exp(x[i] - shift);
  return s;
}

// y = g / (1 + exp(-t(g))) * u: the gated activations of the form g * sigmoid(t(g)); `tail`
// computes the activation for the last n % 8 values.
template <class T>
void gated(const float* g, const float* u, float* y, long n, T&& neg_t, float (*tail)(float)) {
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 d = _mm256_add_ps(_mm256_set1_ps(1.f), exp256(neg_t(gv)));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(gv, d), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) y[i] = tail(g[i]) * u[i];
}

void silu_mul256(const float* g, const float* u, float* y, long n) {
  gated(g, u, y, n, [](__m256 x) { return _mm256_sub_ps(_mm256_setzero_ps(), x); },
        [](float x) { return x / (1.0f + std::exp(-x)); });
}

// gelu_approx(x) = 0.5 x (1 + tanh(t)) = x / (1 + exp(-2t)), t = sqrt(2/pi) (x + 0.044715 x^3).
void gelu_mul256(const float* g, const float* u, float* y, long n) {
  constexpr float c = 0.7978845608028654f;
  gated(g, u, y, n,
        [](__m256 x) {
          const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
          const __m256 t = _mm256_mul_ps(_mm256_set1_ps(c), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
          return _mm256_mul_ps(_mm256_set1_ps(-2.f), t);
        },
        [](float x) { return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x))); });
}

// vmaxps(a, b) = a > b ? a : b keeps the running maxima free of NaNs; an unordered compare
// notes any NaN on the side.
float max_value256(const float* x, long n) {
  long i = 0;
  float m = x[0];
  if (n >= 32) {
    __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0, nan = _mm256_setzero_ps();
    for (; i + 32 <= n; i += 32) {
      const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
      const __m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
      m0 = _mm256_max_ps(a, m0), m1 = _mm256_max_ps(b, m1), m2 = _mm256_max_ps(c, m2), m3 = _mm256_max_ps(d, m3);
      nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c, d, _CMP_UNORD_Q)));
    }
    if (_mm256_movemask_ps(nan) != 0) return std::numeric_limits<float>::quiet_NaN();
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (float v : lanes) m = v > m ? v : m;
  }
  for (; i < n; ++i) {
    if (x[i] != x[i]) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

float delta_rule_row256(float* row, const float* k, const float* q, float g, float v, float beta, int n, bool keep) {
  const float delta = (v - g * dot256(row, k, n)) * beta;
  const __m256 gv = _mm256_set1_ps(g), dv = _mm256_set1_ps(delta);
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_fmadd_ps(dv, _mm256_loadu_ps(k + i), _mm256_mul_ps(gv, _mm256_loadu_ps(row + i)));
    if (keep) _mm256_storeu_ps(row + i, r);
    acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc);
  }
  float out = Avx2::reduce(acc);
  for (; i < n; ++i) {
    const float r = std::fma(delta, k[i], g * row[i]);
    if (keep) row[i] = r;
    out = std::fma(r, q[i], out);
  }
  return out;
}

// 8 elements of a packed row from `bytes` (8 / bits elements a byte, the first in the low bits)
// as int32 lanes.
template <int Bits>
__m256i unpack8(const uint8_t* bytes) {
  if constexpr (Bits == 8) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  } else {
    constexpr int per_byte = 8 / Bits;
    int word = 0;
    std::memcpy(&word, bytes, 8 / per_byte);
    // Byte e / per_byte of the word into lane e, shifted right by (e % per_byte) * Bits.
    const __m128i dup = Bits == 4 ? _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1)
                                  : _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i lanes = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128(word), dup));
    const __m256i shifts = Bits == 4 ? _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4) : _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    return _mm256_and_si256(_mm256_srlv_epi32(lanes, shifts), _mm256_set1_epi32((1 << Bits) - 1));
  }
}

template <int Bits>
void dequant_rows_t(const uint8_t* packed, long packed_stride, int n, int d, int group, const void* scales,
                    const void* biases, long scale_stride, bool f16, float* out) {
  constexpr int per_byte = 8 / Bits;
  auto at = [&](const void* p, long g) {
    return f16 ? _cvtsh_ss(static_cast<const uint16_t*>(p)[g]) : static_cast<const float*>(p)[g];
  };
  for (int j = 0; j < n; ++j) {
    for (int g = 0; g < d / group; ++g) {
      const long sg = j * scale_stride + g;
      const __m256 s = _mm256_set1_ps(at(scales, sg)), b = _mm256_set1_ps(at(biases, sg));
      const uint8_t* src = packed + j * packed_stride + g * group / per_byte;
      float* dst = out + static_cast<long>(j) * d + g * group;
      for (int i = 0; i < group; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_fmadd_ps(_mm256_cvtepi32_ps(unpack8<Bits>(src + i / per_byte)), s, b));
      }
    }
  }
}

void dequant_rows256(const uint8_t* packed, long packed_stride, int n, int bits, int d, int group, const void* scales,
                     const void* biases, long scale_stride, bool f16, float* out) {
  if (bits == 8) return dequant_rows_t<8>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out);
  if (bits == 4) return dequant_rows_t<4>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out);
  dequant_rows_t<2>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out);
}

}  // namespace

const VecOps& vec_ops_avx2() {
  static const VecOps ops{axpy256<float>,         sumsq256,                  attend_group256<float>,
                          attend_tile256<float>,  sum_exp256,                silu_mul256,
                          gelu_mul256,            attend_group256<uint16_t>, attend_tile256<uint16_t>,
                          to_half256,             from_half256,              to_half_exact256,          max_value256,
                          delta_rule_row256,      dequant_rows256,
                          small_gemm::gemm_acc<Avx2, 4, 2>, attend_group_q256};
  return ops;
}

}  // namespace mlxcpp::kernels
