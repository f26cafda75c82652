// The integer-dot prefill GEMM on AVX2 (this file is compiled with -mavx2 -mfma -mf16c):
// vpmaddwd + vpaddd, 16 multiply-adds per pair of instructions where a float32 FMA does 8 (on
// a Zen 4 core the pair sustains more than twice the FMA's rate). Loop nest and layouts:
// gemm_i16.h.
#include "kernels/avx2_traits.h"
#include "kernels/gemm_i16.h"

namespace mlxcpp::kernels {

namespace {

using avx2::Avx2;

struct Avx2I16 {
  static constexpr int kCols = 16;  // two vectors of 8 int32 lanes
  static constexpr int kMb = 3;     // 6 int32 + 6 float accumulators, two weight vectors (some spill)

  static float f16(uint16_t bits) { return _cvtsh_ss(bits); }

  // Row values [0, k) as int16 in natural order.
  template <int BITS>
  static void decode_row(const uint8_t* row, int k, int16_t* dst) {
    if constexpr (BITS == 8) {
      for (int i = 0; i < k; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i))));
    } else if constexpr (BITS == 4) {
      // Byte j holds values 2j (low nibble) and 2j + 1 (high): one int32 lane is one pair.
      const __m256i lo = _mm256_set1_epi32(0xF), hi = _mm256_set1_epi32(0xF0);
      for (int i = 0; i < k; i += 16) {
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i / 2)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                            _mm256_or_si256(_mm256_and_si256(b, lo), _mm256_slli_epi32(_mm256_and_si256(b, hi), 12)));
      }
    } else {
      // Eight values sit in BITS bytes; a byte shuffle spreads them to lanes (as Avx2::qint).
      static constexpr simd::Spread<BITS, 8> sp{};
      const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.idx));
      const __m256i shift = _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.shift));
      const __m256i mask = _mm256_set1_epi32((1 << BITS) - 1);
      for (int i = 0; i < k; i += 8) {
        uint64_t raw = 0;
        std::memcpy(&raw, row + i * BITS / 8, BITS);
        const __m256i bytes = _mm256_broadcastsi128_si256(_mm_cvtsi64_si128(static_cast<long long>(raw)));
        const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(bytes, idx), shift), mask);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)));
      }
    }
  }

  // Each group of a row of x as int16 levels of its own step, with the step and sum(x) per
  // group: the decode GEMV's row quantization applied to each group as a row of its own.
  static void quantize_groups(const float* x, int k, int group, int16_t* q, float* step, float* xsum) {
    for (int g = 0; g < k / group; ++g) {
      const long o = static_cast<long>(g) * group;
      quantize_i16_row(x + o, group, group, q + o, step + g, xsum + g);
    }
  }

  // Vectors for gemm_i16::block.
  using vi = __m256i;
  using vf = __m256;
  static constexpr int kLanes = 8;
  static vi izero() { return _mm256_setzero_si256(); }
  static vi iload(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static vi bcast(int32_t v) { return _mm256_set1_epi32(v); }
  static vi dot2(vi acc, vi x, vi w) { return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w)); }
  static vf fzero() { return _mm256_setzero_ps(); }
  static vf fload(const float* p) { return _mm256_loadu_ps(p); }
  static vf fset1(float v) { return _mm256_set1_ps(v); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static vf cvt(vi v) { return _mm256_cvtepi32_ps(v); }
  // The first n lanes (all from 8 on, none at n <= 0).
  static void store(float* p, vf v, int n) {
    if (n >= 8) {
      _mm256_storeu_ps(p, v);
    } else if (n > 0) {
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), v);
    }
  }
};

}  // namespace

QKernel qmatmul_kernel_avx2_i16_gemm(int bits, ScaleType st) {
  return with_scale_type<gemm_i16::Table<Avx2I16>::For>(st, bits);
}

}  // namespace mlxcpp::kernels
