// The integer-dot GEMM for prefill on AVX-512 VNNI (this file is compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c): int16 activations against 2..8-bit weights
// with vpdpwssd, 32 multiply-adds an instruction where a float32 FMA does 16 (Zen 4, one core:
// 115 vs 58 GMAC/s). The activations are int16 levels of a step per quantization group.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/qmatmul_simd.h"
#include "kernels/row_count.h"
#include "kernels/scale_load.h"

namespace mlxcpp::kernels {

namespace {

struct F16c {
  static float f16(uint16_t bits) { return _cvtsh_ss(bits); }
};

// Output columns per register block: two vectors of 16 int32 lanes.
constexpr int kCols = 32;
// x rows per register block: kMb * 2 int32 and as many float accumulators, two weight vectors.
constexpr int kMb = 6;

// --- Widening a tile of weight rows ------------------------------------------------------------
// A tile of W rows is decoded once into int16 and laid out for the register blocks: for each
// block of 32 rows, each pair of k values (k even) holds 32 int32 lanes, lane r = the row's
// values k (low half) and k + 1 (high half): exactly the operand vpdpwssd multiplies with a
// broadcast pair of x. Scales and biases become float32 [block][group][32].

// Row values [0, k) as int16 in natural order.
template <int BITS>
void decode_row(const uint8_t* row, int k, int16_t* dst) {
  if constexpr (BITS == 8) {
    for (int i = 0; i < k; i += 32)
      _mm512_storeu_si512(dst + i, _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i))));
  } else if constexpr (BITS == 4) {
    // Byte j holds values 2j (low nibble) and 2j + 1 (high): one int32 lane is one pair.
    const __m512i lo = _mm512_set1_epi32(0xF), hi = _mm512_set1_epi32(0xF0);
    for (int i = 0; i < k; i += 32) {
      const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i / 2)));
      _mm512_storeu_si512(dst + i, _mm512_or_si512(_mm512_and_si512(b, lo), _mm512_slli_epi32(_mm512_and_si512(b, hi), 12)));
    }
  } else {
    // Sixteen values sit in 2 * BITS bytes (a masked load never reads past them); a byte
    // shuffle spreads them to lanes, as the float kernels' decode does.
    static constexpr simd::Spread<BITS, 16> sp{};
    const __m512i idx = _mm512_load_si512(sp.idx), shift = _mm512_load_si512(sp.shift);
    const __m512i mask = _mm512_set1_epi32((1 << BITS) - 1);
    for (int i = 0; i < k; i += 16) {
      const __m128i raw = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (2 * BITS)) - 1), row + i * BITS / 8);
      __m512i q = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw), idx);
      q = _mm512_and_si512(_mm512_srlv_epi32(q, shift), mask);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(q));
    }
  }
}

struct Tile {
  std::unique_ptr<int32_t[]> w;  // [blocks][k / 2][kCols]
  std::unique_ptr<float[]> s, b;  // [blocks][groups][kCols]
  std::unique_ptr<int16_t[]> row;  // one decoded row
  Tile(int cols, int k, int groups)
      : w(new int32_t[static_cast<size_t>(cols) * k / 2]),
        s(new float[static_cast<size_t>(cols) * groups]),
        b(new float[static_cast<size_t>(cols) * groups]),
        row(new int16_t[k]) {}
};

// Rows [t0, t1) of q into the tile (rows past t1 up to a whole block are zero).
template <int BITS, ScaleType ST>
void widen(const QMatrixView& q, int t0, int t1, Tile& t) {
  const int pairs = q.k / 2, groups = q.k / q.group;
  const long row_bytes = static_cast<long>(q.k) * BITS / 8;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  const int blocks = (t1 - t0 + kCols - 1) / kCols;
  for (int nb = 0; nb < blocks; ++nb) {
    int32_t* w = t.w.get() + static_cast<long>(nb) * pairs * kCols;
    float* s = t.s.get() + static_cast<long>(nb) * groups * kCols;
    float* b = t.b.get() + static_cast<long>(nb) * groups * kCols;
    for (int r = 0; r < kCols; ++r) {
      const int n = t0 + nb * kCols + r;
      if (n >= t1) {
        for (int p = 0; p < pairs; ++p) w[p * kCols + r] = 0;
        for (int g = 0; g < groups; ++g) s[g * kCols + r] = b[g * kCols + r] = 0.f;
        continue;
      }
      decode_row<BITS>(base + n * row_bytes, q.k, t.row.get());
      const auto* pr = reinterpret_cast<const int32_t*>(t.row.get());
      for (int p = 0; p < pairs; ++p) w[p * kCols + r] = pr[p];
      for (int g = 0; g < groups; ++g) {
        s[g * kCols + r] = load_scale<ST, F16c>(q.scales, static_cast<long>(n) * groups + g);
        b[g * kCols + r] = load_scale<ST, F16c>(q.biases, static_cast<long>(n) * groups + g);
      }
    }
  }
}

// --- Activations ---------------------------------------------------------------------------------
// Each group of a row of x as int16 levels of its own step (max|x| over the group / 32767), in
// natural order, with the step and the sum of x per group: a row's outliers (Gemma's are ~100x
// its typical value) coarsen only their own group, not the whole row.
void quantize_groups(const float* x, int k, int group, int16_t* q, float* step, float* xsum) {
  for (int g = 0; g < k / group; ++g) {
    const float* xg = x + static_cast<long>(g) * group;
    __m512 amax = _mm512_setzero_ps(), sum = _mm512_setzero_ps();
    for (int i = 0; i < group; i += 16) {
      const __m512 v = _mm512_loadu_ps(xg + i);
      amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
      sum = _mm512_add_ps(sum, v);
    }
    const float m = _mm512_reduce_max_ps(amax);
    step[g] = m > 0.f ? m / 32767.f : 1.f;
    xsum[g] = _mm512_reduce_add_ps(sum);
    const __m512 inv = _mm512_set1_ps(m > 0.f ? 32767.f / m : 0.f);
    for (int i = 0; i < group; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + static_cast<long>(g) * group + i),
                          _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + i), inv))));
  }
}

// --- The register block ------------------------------------------------------------------------
// MB x rows against one block of 32 widened W rows: per group, int32 sums of xq * q (exact:
// |xq| <= 32767, q <= 255, at most 64 pairs), then out += sum * step * scale + xsum * bias in
// float. xp: the rows' int16 pairs (ldx pairs apart); xd, xs: step and sum of x [MB][groups].
template <int MB, int GP>
void block(const int32_t* xp, long ldx, const float* xd, const float* xs, int groups, const int32_t* w, const float* s,
           const float* b, float* out, long ldo, int cols) {
  __m512 f[MB][2];
  for (int m = 0; m < MB; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m512i acc[MB][2];
    for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_si512();
    const int32_t* wg = w + static_cast<long>(g) * GP * kCols;
    const int32_t* xg = xp + g * GP;
#pragma GCC unroll 4
    for (int p = 0; p < GP; ++p) {
      const __m512i w0 = _mm512_loadu_si512(wg + p * kCols), w1 = _mm512_loadu_si512(wg + p * kCols + 16);
      for (int m = 0; m < MB; ++m) {
        const __m512i xv = _mm512_set1_epi32(xg[m * ldx + p]);
        acc[m][0] = _mm512_dpwssd_epi32(acc[m][0], xv, w0);
        acc[m][1] = _mm512_dpwssd_epi32(acc[m][1], xv, w1);
      }
    }
    const __m512 s0 = _mm512_loadu_ps(s + g * kCols), s1 = _mm512_loadu_ps(s + g * kCols + 16);
    const __m512 b0 = _mm512_loadu_ps(b + g * kCols), b1 = _mm512_loadu_ps(b + g * kCols + 16);
    for (int m = 0; m < MB; ++m) {
      const __m512 d = _mm512_set1_ps(xd[m * groups + g]), sum = _mm512_set1_ps(xs[m * groups + g]);
      f[m][0] = _mm512_fmadd_ps(sum, b0, _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[m][0]), d), s0, f[m][0]));
      f[m][1] = _mm512_fmadd_ps(sum, b1, _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[m][1]), d), s1, f[m][1]));
    }
  }
  const __mmask16 k0 = cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 k1 = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : static_cast<__mmask16>((1u << (cols - 16)) - 1);
  for (int m = 0; m < MB; ++m) {
    _mm512_mask_storeu_ps(out + m * ldo, k0, f[m][0]);
    _mm512_mask_storeu_ps(out + m * ldo + 16, k1, f[m][1]);
  }
}

// x rows [m0, m0 + mb) (mb <= kMb) against every block of the tile (columns t0..t1 of out).
template <int GP>
void row_block(const QInput& in, const QMatrixView& q, int m0, int mb, const Tile& t, int t0, int t1, float* out, int ldo) {
  const int pairs = q.k / 2, groups = q.k / q.group;
  const auto* xp = reinterpret_cast<const int32_t*>(in.xq) + static_cast<long>(m0) * pairs;
  const float* xd = in.xd + static_cast<long>(m0) * groups;
  const float* xs = in.xsum + static_cast<long>(m0) * groups;
  for (int c = t0, nb = 0; c < t1; c += kCols, ++nb) {
    const int32_t* w = t.w.get() + static_cast<long>(nb) * pairs * kCols;
    const float* s = t.s.get() + static_cast<long>(nb) * groups * kCols;
    const float* b = t.b.get() + static_cast<long>(nb) * groups * kCols;
    float* o = out + static_cast<long>(m0) * ldo + c;
    const int cols = std::min(kCols, t1 - c);
    with_row_count<kMb>(mb, [&]<int MB>() { block<MB, GP>(xp, pairs, xd, xs, groups, w, s, b, o, ldo, cols); });
  }
}

template <int BITS, ScaleType ST, int GP>
void rows_gemm(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  const int groups = q.k / q.group;
  // A tile of about 192 KB of widened weights stays in L2 while every block of x rows sweeps it.
  constexpr long kTileBytes = 192 * 1024;
  const int tile = std::max<int>(kCols, static_cast<int>(kTileBytes / (2L * q.k)) / kCols * kCols);
  Tile t(std::min(tile, (n1 - n0 + kCols - 1) / kCols * kCols), q.k, groups);
  for (int t0 = n0; t0 < n1; t0 += tile) {
    const int t1 = std::min(n1, t0 + tile);
    widen<BITS, ST>(q, t0, t1, t);
    for (int m0 = 0; m0 < in.m; m0 += kMb) row_block<GP>(in, q, m0, std::min(kMb, in.m - m0), t, t0, t1, out, ldo);
  }
}

template <int BITS, ScaleType ST>
void rows_any(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  switch (q.group) {
    case 32: return rows_gemm<BITS, ST, 16>(in, q, n0, n1, out, ldo);
    case 64: return rows_gemm<BITS, ST, 32>(in, q, n0, n1, out, ldo);
    default: return rows_gemm<BITS, ST, 64>(in, q, n0, n1, out, ldo);
  }
}

template <ScaleType ST>
struct GemmTable {
  static QKernel call(int bits) {
    QKernel k;
    switch (bits) {
      case 2: k.rows = rows_any<2, ST>; break;
      case 3: k.rows = rows_any<3, ST>; break;
      case 4: k.rows = rows_any<4, ST>; break;
      case 5: k.rows = rows_any<5, ST>; break;
      case 6: k.rows = rows_any<6, ST>; break;
      case 8: k.rows = rows_any<8, ST>; break;
      default: return {};
    }
    k.xsum = true;
    k.quantize = quantize_groups;
    k.group_steps = true;
    k.n_align = kCols;
    return k;
  }
};

}  // namespace

QKernel qmatmul_kernel_avx512_i16(int bits, ScaleType st) { return with_scale_type<GemmTable>(st, bits); }

}  // namespace mlxcpp::kernels
