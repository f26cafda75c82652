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

// 16 int16 lanes, lane i = val where bit i of m is set, 0 elsewhere (AVX2: no mask registers).
inline __m256i spread16(uint32_t m, int16_t val) {
  const __m256i sel = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                        static_cast<int16_t>(0x8000));
  const __m256i b = _mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(m)), sel);
  return _mm256_and_si256(_mm256_cmpeq_epi16(b, sel), _mm256_set1_epi16(val));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A 5/6-bit chunk's NP bit planes (at pl, a uint32 each) added to its widened low nibbles (lo:
// plane bits 0..15) and high ones (hi: bits 16..31); MASKS: one AVX-512BW/VL masked add per
// half, else spread16.
template <int NP, bool MASKS = false>
inline void add_planes(__m256i& lo, __m256i& hi, const uint8_t* pl) {
  for (int b = 0; b < NP; ++b) {
    const uint32_t m = load_u32(pl + 4 * b);
    const auto val = static_cast<int16_t>(16 << b);
    if constexpr (MASKS) {
      lo = _mm256_mask_add_epi16(lo, static_cast<__mmask16>(m), lo, _mm256_set1_epi16(val));
      hi = _mm256_mask_add_epi16(hi, static_cast<__mmask16>(m >> 16), hi, _mm256_set1_epi16(val));
    } else {
      lo = _mm256_or_si256(lo, spread16(m & 0xFFFF, val));
      hi = _mm256_or_si256(hi, spread16(m >> 16, val));
    }
  }
}

inline int32_t pair_bits(const int16_t* x) {
  int32_t v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

// How far ahead of the group being computed the stream is requested (the hardware prefetcher
// alone left a thread at ~22 GB/s, 4 KB ahead ~25; 1536 x 576 4-bit rows read from memory).
inline constexpr int kAhead = 4096;

// One block of 8 W rows in 256-bit vectors (lane j: row j); `I` supplies dot2. A wider
// variant (I::Wide, AVX-512: two consecutive blocks in one 512-bit vector, lanes 8..15 the
// second block's rows, from I::kWideMinRows x rows) has the same members; every lane sees the
// same operations either way, so a row's result never depends on the width.
template <class I>
struct Lanes8 {
  static constexpr int kRows = 8;
  using vi = __m256i;
  using vf = __m256;
  static vi zero() { return _mm256_setzero_si256(); }
  static vf zero_f() { return _mm256_setzero_ps(); }
  // Chunk c of a group (16 bytes per block) widened to 16-bit lanes.
  static vi chunk(const uint8_t* p, long /*block_bytes*/) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static vi low4(vi v) { return _mm256_and_si256(v, _mm256_set1_epi16(0x0F)); }
  static vi high4(vi v) { return _mm256_srli_epi16(v, 4); }
  // A 5/6-bit chunk's bit planes into its widened halves (add_planes; masked adds where I
  // declares kMaskRegisters).
  template <int NP>
  static void planes(vi& lo, vi& hi, const uint8_t* pl, long /*block_bytes*/) {
    add_planes<NP, requires { I::kMaskRegisters; }>(lo, hi, pl);
  }
  static vi pair(const int16_t* x) { return _mm256_set1_epi32(pair_bits(x)); }
  static vi dot2(vi acc, vi w, vi x) { return I::dot2(acc, w, x); }
  static vi add(vi a, vi b) { return _mm256_add_epi32(a, b); }
  static vf to_float(vi v) { return _mm256_cvtepi32_ps(v); }
  static vf fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static vf set1(float x) { return _mm256_set1_ps(x); }
  template <ScaleType ST>
  static vf scales(const uint8_t* p, long /*block_bytes*/) { return load8<ST>(p); }
  static void store(float* p, vf v) { _mm256_storeu_ps(p, v); }
  // Requests the stream kAhead bytes past group g (at p; group_bytes each): one sequential
  // stream, blocks after one another.
  static void prefetch(const uint8_t* p, int /*g*/, int /*groups*/, long group_bytes, long /*block_bytes*/) {
    for (long o = 0; o < group_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead + o, _MM_HINT_T0);
  }
};

// x rows [m0, m0 + MB) against the V::kRows rows of the block(s) at p (blocks block_bytes
// apart).
template <class V, int BITS, ScaleType ST, int G, int MB, bool PREFETCH>
inline void block(const QInput& in, int m0, const uint8_t* p, long block_bytes, int k, float* out, int ldo, bool sym) {
  using vi = typename V::vi;
  using vf = typename V::vf;
  constexpr int kChunks = rows8_chunks(BITS, G), kPlanes = rows8_planes(BITS);
  const long kGroupBytes = rows8_group_bytes(BITS, G, ST, sym);
  const int groups = k / G;
  vf acc[MB], accb[MB];
  for (int mm = 0; mm < MB; ++mm) acc[mm] = accb[mm] = V::zero_f();
  for (int g = 0; g < groups; ++g, p += kGroupBytes) {
    if constexpr (PREFETCH) V::prefetch(p, g, groups, kGroupBytes, block_bytes);
    // About four independent sums in flight (vpdpwssd's latency; one or two chains of it ran
    // the 8-bit GEMV at half speed): four per x row for one row, fewer as rows add chains of
    // their own (and registers run out). Integer sums are exact, so the split never changes
    // a result.
    constexpr int C = MB >= 8 ? 1 : MB >= 4 ? 2 : 4;
    vi s[MB][C];
    for (int mm = 0; mm < MB; ++mm)
      for (int a = 0; a < C; ++a) s[mm][a] = V::zero();
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) {
      const vi v = V::chunk(p + 16 * c, block_bytes);
      if constexpr (BITS == 8) {
        for (int mm = 0; mm < MB; ++mm) {
          const int16_t* x = in.xq + static_cast<long>(m0 + mm) * k + g * G;
          s[mm][c % C] = V::dot2(s[mm][c % C], v, V::pair(x + 2 * c));
        }
      } else {
        vi lo = V::low4(v), hi = V::high4(v);
        if constexpr (kPlanes > 0) V::template planes<kPlanes>(lo, hi, p + 4 * G + 4 * kPlanes * c, block_bytes);
        for (int mm = 0; mm < MB; ++mm) {  // low nibbles into chain a, high ones into the next (if any)
          const int16_t* x = in.xq + static_cast<long>(m0 + mm) * k + g * G;
          const int a = C == 4 ? 2 * (c & 1) : 0;
          s[mm][a] = V::dot2(s[mm][a], lo, V::pair(x + 4 * c));
          s[mm][a + (C > 1)] = V::dot2(s[mm][a + (C > 1)], hi, V::pair(x + 4 * c + 2));
        }
      }
    }
    const vf sc = V::template scales<ST>(p + rows8_scale_offset(BITS, G, ST, 0), block_bytes);
    // A symmetric matrix's biases, -2^(BITS-1) x scale, exactly the stored ones of the
    // asymmetric layout (a power-of-two multiple).
    const vf bi = sym ? V::fmadd(sc, V::set1(rows8_sym_bias(BITS, 1.f)), V::zero_f())
                      : V::template scales<ST>(p + rows8_scale_offset(BITS, G, ST, 0, true), block_bytes);
    for (int mm = 0; mm < MB; ++mm) {
      vi sum = s[mm][0];
      for (int a = 1; a < C; ++a) sum = V::add(sum, s[mm][a]);
      acc[mm] = V::fmadd(V::to_float(sum), sc, acc[mm]);
      accb[mm] = V::fmadd(bi, V::set1(in.xsum[static_cast<long>(m0 + mm) * groups + g]), accb[mm]);
    }
  }
  for (int mm = 0; mm < MB; ++mm)
    V::store(out + static_cast<long>(m0 + mm) * ldo, V::fmadd(V::set1(in.xd[m0 + mm]), acc[mm], accb[mm]));
}

// Rows [n0, n1) (multiples of 8) against every row of x, kMb rows of x at a time, I::Wide::kRows
// W rows at a time where that many remain (8 otherwise); a block's stream comes from memory in
// the first pass (prefetched) and from L1/L2 in the others.
template <class I, int BITS, ScaleType ST, int G>
void rows(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  const long block_bytes = static_cast<long>(q.k / G) * rows8_group_bytes(BITS, G, ST, q.sym);
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  auto run = [&]<class V>(int n) {
    const uint8_t* p = base + static_cast<long>(n / 8) * block_bytes;
    for (int m0 = 0; m0 < in.m; m0 += I::kMb) {
      with_row_count<I::kMb>(std::min(I::kMb, in.m - m0), [&]<int MB>() {
        if (m0 == 0) block<V, BITS, ST, G, MB, true>(in, m0, p, block_bytes, q.k, out + n, ldo, q.sym);
        else block<V, BITS, ST, G, MB, false>(in, m0, p, block_bytes, q.k, out + n, ldo, q.sym);
      });
    }
  };
  int n = n0;
  if constexpr (requires { typename I::Wide; }) {
    using Wide = typename I::Wide;
    if (in.m >= I::kWideMinRows)
      for (; n + Wide::kRows <= n1; n += Wide::kRows) run.template operator()<Wide>(n);
  }
  for (; n < n1; n += 8) run.template operator()<Lanes8<I>>(n);
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
      if (bits == 5) k.rows = rows_any<I, 5, ST>;
      if (bits == 6) k.rows = rows_any<I, 6, ST>;
      if (bits == 8) k.rows = rows_any<I, 8, ST>;
      if (!k.rows) return k;
      k.xsum = true;
      k.quantize = quantize_i16_row;
      // Tasks of whole 8-row blocks (tasks of whole 16-row pairs measured ~10% slower on
      // Gemma 3's batched decode: coarser tasks balance worse).
      k.n_align = 8;
      return k;
    }
  };
};

}  // namespace mlxcpp::kernels::rows8
