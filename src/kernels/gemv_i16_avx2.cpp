// The integer-dot GEMV for decode on AVX2 (this file is compiled with -mavx2 -mfma -mf16c):
// int16 activations against 4/5/6/8-bit weights with vpmaddwd.
#include <algorithm>

#include "kernels/avx2_traits.h"
#include "kernels/gemv_rows8.h"

namespace mlxcpp::kernels {

namespace {

using avx2::Avx2;

// --- Integer activations for the integer-dot GEMVs --------------------------------------------

inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), v); }

// Sum of x per group.
void group_sums(const float* x, int k, int group, float* xsum) {
  for (int g = 0; g < k / group; ++g) {
    __m256 s = _mm256_setzero_ps();
    for (int i = g * group; i < (g + 1) * group; i += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + i));
    xsum[g] = Avx2::reduce(s);
  }
}

// 32 values as int32 levels (x * inv, rounded to nearest) in natural order x0..7, 8..15, ...
inline void levels32(const float* x, __m256 inv, __m256i v[4]) {
  for (int i = 0; i < 4; ++i) v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), inv));
}

// int16 levels of the row's step d = max|x| / 32767; with DEINT each block of 32 de-interleaved
// (16 even values, then 16 odd ones: the order of a 4-bit row's low and high nibbles).
template <bool DEINT>
void quantize_i16(const float* x, int k, int group, int16_t* q, float* step, float* xsum) {
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < k; i += 8) amax = _mm256_max_ps(amax, abs8(_mm256_loadu_ps(x + i)));
  const float m = Avx2::reduce_max(amax);
  *step = m > 0.f ? m / 32767.f : 1.f;
  const __m256 inv = _mm256_set1_ps(m > 0.f ? 32767.f / m : 0.f);
  // Within each 128-bit lane of 8 int16: evens then odds.
  const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                         0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  for (int i = 0; i < k; i += 32) {
    __m256i v[4];
    levels32(x + i, inv, v);
    // packs works per 128-bit lane; the qword permute restores natural order x0..15, x16..31.
    __m256i a = _mm256_permute4x64_epi64(_mm256_packs_epi32(v[0], v[1]), 0xD8);
    __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi32(v[2], v[3]), 0xD8);
    if constexpr (DEINT) {
      a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, split), 0xD8);  // [evens 0..14 | odds 1..15]
      b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, split), 0xD8);
      const __m256i e = _mm256_permute2x128_si256(a, b, 0x20), o = _mm256_permute2x128_si256(a, b, 0x31);
      a = e;
      b = o;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i + 16), b);
  }
  group_sums(x, k, group, xsum);
}

// --- Integer-dot GEMV (decode): int16 activations, 4/5/6/8-bit weights ------------------------
// Per 32 weights of a row: 4-bit: the 16 packed bytes widened to 16-bit lanes, low nibbles
// (even elements) by a mask and high ones (odd) by a shift, each multiplied with the matching
// de-interleaved int16 x by vpmaddwd; 8-bit: two widened halves. Products and sums are exact
// int32 (<= 255 * 32767 * 2 per lane and step); each group's sum is converted once and scaled.

// 5/6-bit: the 32 values of a group block sit in 4*BITS bytes; values 0-15 come from the first
// 16 bytes and 16-31 from the last 16 (both loads inside the block). A byte shuffle puts the two
// bytes holding each value in its 16-bit lane, a multiply by 2^(16-BITS-shift) moves the value
// to the top bits and a shift right by 16-BITS brings it down (AVX2 has no per-lane 16-bit
// variable shift).
template <int BITS>
struct Spread16 {
  static constexpr int kBytes = 4 * BITS, kBaseB = kBytes - 16;
  alignas(32) uint8_t idx[2][32];
  alignas(32) uint16_t mul[2][16];
  constexpr Spread16() : idx{}, mul{} {
    for (int j = 0; j < 32; ++j) {
      const int off = j * BITS, b = off / 8, s = off % 8, half = j / 16, lane = j % 16;
      const int base = half ? kBaseB : 0;
      idx[half][2 * lane] = static_cast<uint8_t>(b - base);
      idx[half][2 * lane + 1] = static_cast<uint8_t>(s + BITS > 8 ? b + 1 - base : 0x80);
      mul[half][lane] = static_cast<uint16_t>(1u << (16 - BITS - s));
    }
  }
};

template <int BITS>
inline void unpack32_16(const uint8_t* p, __m256i& a, __m256i& b) {
  static constexpr Spread16<BITS> sp{};
  const __m256i va = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i vb =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + Spread16<BITS>::kBaseB)));
  a = _mm256_shuffle_epi8(va, _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.idx[0])));
  b = _mm256_shuffle_epi8(vb, _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.idx[1])));
  a = _mm256_srli_epi16(_mm256_mullo_epi16(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.mul[0]))), 16 - BITS);
  b = _mm256_srli_epi16(_mm256_mullo_epi16(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.mul[1]))), 16 - BITS);
}

// 32 weights of a row from element k as 16-bit lanes matching the x layout (x0, x1).
template <int BITS>
inline void decode32(const uint8_t* row, int k, __m256i& w0, __m256i& w1) {
  if constexpr (BITS == 4) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2)));
    w0 = _mm256_and_si256(v, _mm256_set1_epi16(0x0F));
    w1 = _mm256_srli_epi16(v, 4);
  } else if constexpr (BITS == 5 || BITS == 6) {
    unpack32_16<BITS>(row + k / 32 * (4 * BITS), w0, w1);
  } else {
    w0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k)));
    w1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + 16)));
  }
}

// Runs group(g) for every group g of rows [n, n + NR), then apply(r, scale) with the scale of
// group g of row n + r broadcast to a vector. Per row the scales of 8 groups are loaded (and
// converted) once and each group's is picked by one lane permute (a scalar load, conversion and
// broadcast per group and row cost ~25% of the 4-bit GEMV).
template <ScaleType ST, int NR, class Group, class Apply>
inline void for_each_scaled_group(const QMatrixView& q, int n, int groups, Group&& group, Apply&& apply) {
  int g = 0;
  for (; g + 8 <= groups; g += 8) {
    __m256 sc[NR];
    for (int r = 0; r < NR; ++r) sc[r] = Avx2::load_scales<ST>(q.scales, static_cast<long>(n + r) * groups + g);
    for (int j = 0; j < 8; ++j) {
      group(g + j);
      const __m256i idx = _mm256_set1_epi32(j);
      for (int r = 0; r < NR; ++r) apply(r, _mm256_permutevar8x32_ps(sc[r], idx));
    }
  }
  for (; g < groups; ++g) {
    group(g);
    for (int r = 0; r < NR; ++r)
      apply(r, _mm256_set1_ps(load_scale<ST, Avx2>(q.scales, static_cast<long>(n + r) * groups + g)));
  }
}

// One row of x against rows [n, n + NR) (decode at batch 1: a separate kernel because, as a
// case of gemv_i16_block below, it ran ~10% slower on L2-resident rows).
template <int BITS, ScaleType ST, int NR, int G>
void gemv_i16_row(const int16_t* xq, const float* xsum, float xd, const QMatrixView& q, int n, float* out) {
  const int groups = q.k / G;
  const long row_bytes = static_cast<long>(q.k) * BITS / 8;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  simd::NextBlockPrefetch<NR, 4 * BITS> pf(q, row_bytes, n);
  const uint8_t* row[NR];
  for (int r = 0; r < NR; ++r) row[r] = base + static_cast<long>(n + r) * row_bytes;
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  __m256i s[NR];
  auto group = [&](int g) {
    for (int r = 0; r < NR; ++r) s[r] = _mm256_setzero_si256();
    for (int k = g * G; k < (g + 1) * G; k += 32) {
      pf.step();
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k + 16));
      for (int r = 0; r < NR; ++r) {
        __m256i w0, w1;
        decode32<BITS>(row[r], k, w0, w1);
        s[r] = _mm256_add_epi32(s[r], _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1)));
      }
    }
  };
  for_each_scaled_group<ST, NR>(q, n, groups, group, [&](int r, __m256 scv) {
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), scv, acc[r]);
  });
  for (int r = 0; r < NR; ++r) {
    out[n + r] = xd * Avx2::reduce(acc[r]) +
                 simd::dot_scales<Avx2, ST>(q.biases, static_cast<long>(n + r) * groups, xsum, groups);
  }
}

// Rows [n, n + NR) of W against x rows [m0, m0 + MB), group size G at compile time: the packed
// weights are decoded once per step for all MB rows of x.
// PREFETCH: the first pass over these rows requests the next block (later passes find them
// in L1). Not inlined (inlined into rows_block with its other variants it ran ~12% slower).
template <int BITS, ScaleType ST, int MB, int NR, int G, bool PREFETCH>
[[gnu::noinline]] void gemv_i16_block(const QInput& in, int m0, const QMatrixView& q, int n, float* out, int ldo) {
  const int groups = q.k / G;
  const long row_bytes = static_cast<long>(q.k) * BITS / 8;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  simd::NextBlockPrefetch<NR, 4 * BITS> pf(q, row_bytes, n, PREFETCH ? simd::Prefetch::kSpread : simd::Prefetch::kNone);
  const uint8_t* row[NR];
  for (int r = 0; r < NR; ++r) row[r] = base + static_cast<long>(n + r) * row_bytes;
  const int16_t* xq = in.xq + static_cast<long>(m0) * q.k;
  __m256 acc[MB][NR];
  for (int mm = 0; mm < MB; ++mm)
    for (int r = 0; r < NR; ++r) acc[mm][r] = _mm256_setzero_ps();
  __m256i s[MB][NR];
  auto group = [&](int g) {
    for (int mm = 0; mm < MB; ++mm)
      for (int r = 0; r < NR; ++r) s[mm][r] = _mm256_setzero_si256();
    for (int k = g * G; k < (g + 1) * G; k += 32) {
      if constexpr (PREFETCH) pf.step();
      // Each row's weights decoded right before their products (16 registers); x loaded once
      // per step for one or two rows of x, per use for more.
      constexpr bool kHoist = MB <= 2;
      __m256i xh[kHoist ? MB : 1][2];
      auto xload = [&](int mm, int half) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + static_cast<long>(mm) * q.k + k + 16 * half));
      };
      if constexpr (kHoist)
        for (int mm = 0; mm < MB; ++mm) xh[mm][0] = xload(mm, 0), xh[mm][1] = xload(mm, 1);
      for (int r = 0; r < NR; ++r) {
        __m256i w0, w1;
        decode32<BITS>(row[r], k, w0, w1);
        for (int mm = 0; mm < MB; ++mm) {
          const __m256i x0 = kHoist ? xh[mm][0] : xload(mm, 0), x1 = kHoist ? xh[mm][1] : xload(mm, 1);
          s[mm][r] = _mm256_add_epi32(s[mm][r], _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1)));
        }
      }
    }
  };
  for_each_scaled_group<ST, NR>(q, n, groups, group, [&](int r, __m256 scv) {
    for (int mm = 0; mm < MB; ++mm) acc[mm][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[mm][r]), scv, acc[mm][r]);
  });
  for (int mm = 0; mm < MB; ++mm)
    for (int r = 0; r < NR; ++r)
      out[static_cast<long>(m0 + mm) * ldo + n + r] =
          in.xd[m0 + mm] * Avx2::reduce(acc[mm][r]) +
          simd::dot_scales<Avx2, ST>(q.biases, static_cast<long>(n + r) * groups,
                                     in.xsum + static_cast<long>(m0 + mm) * groups, groups);
}

// W rows per block for MB rows of x (16 registers).
constexpr int rows_for(int mb) { return mb == 1 ? 4 : mb == 2 ? 2 : 1; }

// Rows [n, n + count) (count 4, or 1 at the end) against every row of x, MB in {4, 2, 1} rows
// of x at a time; the block's weights come from memory once.
template <int BITS, ScaleType ST, int G>
void rows_block(const QInput& in, const QMatrixView& q, int n, int count, float* out, int ldo) {
  bool first = true;
  for (int m0 = 0; m0 < in.m;) {
    const int left = in.m - m0, mb = left >= 4 ? 4 : left >= 2 ? 2 : 1;
    auto run = [&]<int MB>() {
      constexpr int NR = rows_for(MB);
      auto block = [&]<int R, bool PF>() {
        for (int r = 0; r < count; r += R) gemv_i16_block<BITS, ST, MB, R, G, PF>(in, m0, q, n + r, out, ldo);
      };
      if (count == 1) first ? block.template operator()<1, true>() : block.template operator()<1, false>();
      else first ? block.template operator()<NR, true>() : block.template operator()<NR, false>();
    };
    if (mb == 4) run.template operator()<4>();
    else if (mb == 2) run.template operator()<2>();
    else run.template operator()<1>();
    m0 += mb;
    first = false;
  }
}

template <int BITS, ScaleType ST, int G>
void rows_i16(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  simd::prefetch_rows(q, static_cast<long>(q.k) * BITS / 8, n0, n0 + 4);  // the first block
  int n = n0;
  if (in.m == 1) {
    for (; n + 4 <= n1; n += 4) gemv_i16_row<BITS, ST, 4, G>(in.xq, in.xsum, in.xd[0], q, n, out);
    for (; n < n1; ++n) gemv_i16_row<BITS, ST, 1, G>(in.xq, in.xsum, in.xd[0], q, n, out);
    return;
  }
  for (; n + 4 <= n1; n += 4) rows_block<BITS, ST, G>(in, q, n, 4, out, ldo);
  for (; n < n1; ++n) rows_block<BITS, ST, G>(in, q, n, 1, out, ldo);
}

template <int BITS, ScaleType ST>
void rows_i16_any(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  switch (q.group) {
    case 32: return rows_i16<BITS, ST, 32>(in, q, n0, n1, out, ldo);
    case 64: return rows_i16<BITS, ST, 64>(in, q, n0, n1, out, ldo);
    default: return rows_i16<BITS, ST, 128>(in, q, n0, n1, out, ldo);
  }
}

template <ScaleType ST>
struct I16Table {
  static QKernel call(int bits) {
    if (bits == 4) return {rows_i16_any<4, ST>, 32, true, quantize_i16<true>};
    if (bits == 5) return {rows_i16_any<5, ST>, 0, true, quantize_i16<false>};
    if (bits == 6) return {rows_i16_any<6, ST>, 0, true, quantize_i16<false>};
    if (bits == 8) return {rows_i16_any<8, ST>, 0, true, quantize_i16<false>};
    return {};
  }
};

// kRows8 GEMV operations: vpmaddwd + vpaddd; 2 x rows a pass (4 accumulators each, 16 registers).
struct MaddRows8 {
  static constexpr int kMb = 2;
  static __m256i dot2(__m256i acc, __m256i w, __m256i x) { return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x)); }
};

}  // namespace

QKernel qmatmul_kernel_avx2_i16(int bits, ScaleType st) { return with_scale_type<I16Table>(st, bits); }

QKernel qmatmul_kernel_avx2_rows8(int bits, ScaleType st) {
  return with_scale_type<rows8::Table<MaddRows8>::For>(st, bits);
}

void quantize_i16_row(const float* x, int k, int group, int16_t* levels, float* step, float* xsum) {
  quantize_i16<false>(x, k, group, levels, step, xsum);
}

}  // namespace mlxcpp::kernels
