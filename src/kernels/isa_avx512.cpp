// AVX-512 kernels (this file is compiled with -mavx512f -mavx512bw -mavx512vl -mfma).
// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (_mm512_undefined_* self-init)
// once inlined into the float16-scale kernels; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/gated_delta_gemm.h"
#include "kernels/qmatmul_simd.h"
#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

namespace {

struct Avx512 {
  using vec = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kMb = 4;      // x rows per block in prefill
  static constexpr int kNrWide = 2;  // W rows per block when kMb x rows share each decode
  static vec zero() { return _mm512_setzero_ps(); }
  static vec set1(float v) { return _mm512_set1_ps(v); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce(vec v) { return _mm512_reduce_add_ps(v); }

  static float f16(uint16_t bits) { return _cvtsh_ss(bits); }

  // kLanes scales (or biases) from element i, as floats.
  template <ScaleType ST>
  static vec load_scales(const void* p, long i) {
    if constexpr (ST == ScaleType::kF32) {
      return _mm512_loadu_ps(static_cast<const float*>(p) + i);
    } else {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i));
      if constexpr (ST == ScaleType::kF16) return _mm512_cvtph_ps(h);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }

  // 32 packed 4-bit values (16 bytes): low nibbles (even elements) and high nibbles (odd).
  static void q4(const uint8_t* p, vec& lo, vec& hi) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0xF)));
    hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
  }

  // kLanes values starting at element k of a packed row, as integer-valued floats.
  template <int BITS>
  static vec qint(const uint8_t* row, int k) {
    __m512i q;
    if constexpr (BITS == 8) {
      q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k)));
    } else {
      // The 2*BITS bytes of sixteen values (a masked load never reads past them), spread to
      // lanes by one byte shuffle.
      static constexpr simd::Spread<BITS, kLanes> sp{};
      const __m128i raw = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (2 * BITS)) - 1), row + k * BITS / 8);
      q = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw), _mm512_load_si512(sp.idx));
      q = _mm512_srlv_epi32(q, _mm512_load_si512(sp.shift));
      q = _mm512_and_si512(q, _mm512_set1_epi32((1 << BITS) - 1));
    }
    return _mm512_cvtepi32_ps(q);
  }
};

}  // namespace

QKernel qmatmul_kernel_avx512(int bits, ScaleType st) {
  return with_scale_type<simd::KernelTable<Avx512>::For>(st, bits);
}

namespace {

float dot512(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  if (i < n) {
    __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}
void axpy512(float a, const float* x, float* y, int n) {
  const __m512 av = _mm512_set1_ps(a);
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}
float sumsq512(const float* x, int n) { return dot512(x, x, n); }

// 8-bit rows 16 elements at a time (groups are multiples of 32); other widths are AVX2's.
// 8-bit and 4-bit rows (groups a multiple of 16) without per-row calls; 2-bit ones row by row.
template <int Bits>
__m512 unpack16(const uint8_t* p) {
  if constexpr (Bits == 8) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  } else {  // 8 bytes, element 2i in byte i's low nibble, 2i + 1 in its high one
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i lo = _mm_and_si128(b, _mm_set1_epi16(0x0F)), hi = _mm_srli_epi16(b, 4);
    const __m128i bytes = _mm_or_si128(lo, _mm_slli_epi16(hi, 8));  // lo0 hi0 lo1 hi1 ...
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
  }
}

// Group (a multiple of 16) as a template argument where it is one of the usual sizes (the inner
// loop then unrolled), else 0 and read from `group`.
template <int Bits, int Group>
void dequant_rows_t(const uint8_t* packed, long packed_stride, int n, int d, int group_arg, const void* scales,
                    const void* biases, long scale_stride, bool f16, float* out) {
  const int group = Group ? Group : group_arg;
  const auto* sh = static_cast<const uint16_t*>(scales);
  const auto* bh = static_cast<const uint16_t*>(biases);
  const auto* sf = static_cast<const float*>(scales);
  const auto* bf = static_cast<const float*>(biases);
  const int groups = d / group;
  for (int j = 0; j < n; ++j) {
    const uint8_t* src = packed + j * packed_stride;
    float* dst = out + static_cast<long>(j) * d;
    for (int g = 0; g < groups; ++g) {
      const long sg = j * scale_stride + g;
      const __m512 sv = _mm512_set1_ps(f16 ? _cvtsh_ss(sh[sg]) : sf[sg]);
      const __m512 bv = _mm512_set1_ps(f16 ? _cvtsh_ss(bh[sg]) : bf[sg]);
      const uint8_t* gs = src + g * group * Bits / 8;
      float* gd = dst + g * group;
      for (int i = 0; i < group; i += 16) _mm512_storeu_ps(gd + i, _mm512_fmadd_ps(unpack16<Bits>(gs + i * Bits / 8), sv, bv));
    }
  }
}

template <int Bits>
bool dequant_rows_bits(const uint8_t* packed, long packed_stride, int n, int d, int group, const void* scales,
                       const void* biases, long scale_stride, bool f16, float* out) {
  switch (group) {
    case 32: dequant_rows_t<Bits, 32>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out); return true;
    case 64: dequant_rows_t<Bits, 64>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out); return true;
    case 128: dequant_rows_t<Bits, 128>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out); return true;
    default:
      if (group % 16 != 0) return false;
      dequant_rows_t<Bits, 0>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out);
      return true;
  }
}

void dequant_rows512(const uint8_t* packed, long packed_stride, int n, int bits, int d, int group, const void* scales,
                     const void* biases, long scale_stride, bool f16, float* out) {
  if (bits == 8 && dequant_rows_bits<8>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out)) return;
  if (bits == 4 && dequant_rows_bits<4>(packed, packed_stride, n, d, group, scales, biases, scale_stride, f16, out)) return;
  vec_ops_avx2().dequant_rows(packed, packed_stride, n, bits, d, group, scales, biases, scale_stride, f16, out);
}

}  // namespace

const VecOps& vec_ops_avx512() {
  // The exp-based routines are AVX2's (AVX-512 CPUs have it).
  const VecOps& a2 = vec_ops_avx2();
  static const VecOps ops{axpy512,     sumsq512,    a2.attend_group,   a2.attend_tile,   a2.sum_exp,
                          a2.silu_mul, a2.gelu_mul, a2.attend_group_h, a2.attend_tile_h, a2.to_half,
                          a2.from_half, a2.to_half_exact, a2.max_value, a2.delta_rule_row, dequant_rows512,
                          small_gemm::gemm_acc<Avx512, 4, 4>,
                          has_avx512_vnni() ? attend_group_q512 : a2.attend_group_q};
  return ops;
}

}  // namespace mlxcpp::kernels
