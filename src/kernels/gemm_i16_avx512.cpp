// The integer-dot prefill GEMM on AVX-512 VNNI (this file is compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni -mfma -mf16c): vpdpwssd, 32 multiply-adds an instruction where a
// float32 FMA does 16 (one Zen 4 core: 115 vs 58 GMAC/s). Loop nest and layouts: gemm_i16.h.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/gemm_i16.h"
#include "kernels/gemv_rows8.h"
#include "kernels/qmatmul_simd.h"

namespace mlxcpp::kernels {

namespace {

struct Vnni512 {
  static constexpr int kCols = 32;  // two vectors of 16 int32 lanes
  static constexpr int kMb = 6;     // 12 int32 + 12 float accumulators, two weight vectors

  static float f16(uint16_t bits) { return _cvtsh_ss(bits); }

  // Row values [0, k) as int16 in natural order.
  template <int BITS>
  static void decode_row(const uint8_t* row, int k, int16_t* dst) {
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

  // Each group of a row of x as int16 levels of its own step, with the step and sum(x) per group.
  static void quantize_groups(const float* x, int k, int group, int16_t* q, float* step, float* xsum) {
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

  // Vectors for gemm_i16::block.
  using vi = __m512i;
  using vf = __m512;
  static constexpr int kLanes = 16;
  static vi izero() { return _mm512_setzero_si512(); }
  static vi iload(const int32_t* p) { return _mm512_loadu_si512(p); }
  static vi bcast(int32_t v) { return _mm512_set1_epi32(v); }
  static vi dot2(vi acc, vi x, vi w) { return _mm512_dpwssd_epi32(acc, x, w); }
  static vf fzero() { return _mm512_setzero_ps(); }
  static vf fload(const float* p) { return _mm512_loadu_ps(p); }
  static vf fset1(float v) { return _mm512_set1_ps(v); }
  static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static vf cvt(vi v) { return _mm512_cvtepi32_ps(v); }
  // The first n lanes (all from 16 on, none at n <= 0).
  static void store(float* p, vf v, int n) {
    _mm512_mask_storeu_ps(p, n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1), v);
  }
};

// Two consecutive kRows8 blocks in 512-bit vectors (lanes 0..7 the first block's rows, 8..15
// the second's): on Zen 4 vpdpwssd retires one 256-bit or one 512-bit vector per cycle (55 vs
// 106 GMAC/s a core), so a batched decode's GEMV, compute-bound beyond a few x rows, runs
// nearly twice as fast this way. The same lane operations as rows8::Lanes8.
struct Lanes16 {
  static constexpr int kRows = 16;
  using vi = __m512i;
  using vf = __m512;
  static vi zero() { return _mm512_setzero_si512(); }
  static vf zero_f() { return _mm512_setzero_ps(); }
  static vi chunk(const uint8_t* p, long block_bytes) {
    const __m256i two = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + block_bytes)), 1);
    return _mm512_cvtepu8_epi16(two);
  }
  static vi low4(vi v) { return _mm512_and_si512(v, _mm512_set1_epi16(0x0F)); }
  static vi high4(vi v) { return _mm512_srli_epi16(v, 4); }
  // The pair's planes: lanes 0..15 of a half are the first block's, 16..31 the second's.
  template <int NP>
  static void planes(vi& lo, vi& hi, const uint8_t* pl, long block_bytes) {
    for (int b = 0; b < NP; ++b) {
      const uint32_t m0 = rows8::load_u32(pl + 4 * b), m1 = rows8::load_u32(pl + block_bytes + 4 * b);
      const auto val = _mm512_set1_epi16(static_cast<int16_t>(16 << b));
      lo = _mm512_mask_add_epi16(lo, _cvtu32_mask32((m0 & 0xFFFF) | (m1 << 16)), lo, val);
      hi = _mm512_mask_add_epi16(hi, _cvtu32_mask32((m0 >> 16) | (m1 & 0xFFFF0000u)), hi, val);
    }
  }
  static vi pair(const int16_t* x) { return _mm512_set1_epi32(rows8::pair_bits(x)); }
  static vi dot2(vi acc, vi w, vi x) { return _mm512_dpwssd_epi32(acc, w, x); }
  static vi add(vi a, vi b) { return _mm512_add_epi32(a, b); }
  static vf to_float(vi v) { return _mm512_cvtepi32_ps(v); }
  static vf fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static vf set1(float x) { return _mm512_set1_ps(x); }
  template <ScaleType ST>
  static vf scales(const uint8_t* p, long block_bytes) {
    const __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(rows8::load8<ST>(p)));
    return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(rows8::load8<ST>(p + block_bytes)), 1));
  }
  static void store(float* p, vf v) { _mm512_storeu_ps(p, v); }
  // Two streams (the pair's blocks, block_bytes apart), read group by group together: the
  // group kAhead bytes of the pair ahead of g, which past the pair's last group is in the next
  // pair (two blocks on).
  static void prefetch(const uint8_t* p, int g, int groups, long group_bytes, long block_bytes) {
    const int ahead = g + static_cast<int>(std::max(1L, rows8::kAhead / (2 * group_bytes)));
    const char* a = reinterpret_cast<const char*>(p) + (ahead - g) * group_bytes + (ahead >= groups ? block_bytes : 0);
    for (long o = 0; o < group_bytes; o += 64) {
      _mm_prefetch(a + o, _MM_HINT_T0);
      _mm_prefetch(a + block_bytes + o, _MM_HINT_T0);
    }
  }
};

// kRows8 GEMV operations: vpdpwssd (AVX-512VL: 32 registers, 8 x rows a pass), 16 W rows a
// pass (Lanes16) and 8 for a last odd block.
struct VnniRows8 {
  static constexpr int kMb = 8;
  static constexpr bool kMaskRegisters = true;  // 5/6-bit planes by masked adds
  static __m256i dot2(__m256i acc, __m256i w, __m256i x) { return _mm256_dpwssd_epi32(acc, w, x); }
  using Wide = Lanes16;
  // Fewer x rows keep 256-bit vectors: the GEMV is then bandwidth-bound, and the two-block
  // stream read ~1.5x slower from L3/memory at one row.
  static constexpr int kWideMinRows = 4;
};

}  // namespace

QKernel qmatmul_kernel_vnni_rows8(int bits, ScaleType st) { return with_scale_type<rows8::Table<VnniRows8>::For>(st, bits); }

QKernel qmatmul_kernel_avx512_i16_gemm(int bits, ScaleType st) {
  return with_scale_type<gemm_i16::Table<Vnni512>::For>(st, bits);
}

}  // namespace mlxcpp::kernels
