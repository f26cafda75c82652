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

// kRows8 GEMV operations: vpdpwssd on 256-bit vectors (AVX-512VL: 32 registers, 4 x rows a
// pass).
struct VnniRows8 {
  static constexpr int kMb = 4;
  static __m256i dot2(__m256i acc, __m256i w, __m256i x) { return _mm256_dpwssd_epi32(acc, w, x); }
};

}  // namespace

QKernel qmatmul_kernel_vnni_rows8(int bits, ScaleType st) { return with_scale_type<rows8::Table<VnniRows8>::For>(st, bits); }

QKernel qmatmul_kernel_avx512_i16_gemm(int bits, ScaleType st) {
  return with_scale_type<gemm_i16::Table<Vnni512>::For>(st, bits);
}

}  // namespace mlxcpp::kernels
