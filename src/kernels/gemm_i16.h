// The integer-dot prefill GEMM's loop nest, shared by the AVX-512 VNNI and AVX2 kernels; `I`
// supplies the vectors (kLanes int32 / float lanes, the int16 pair dot product dot2 and a few
// float ops), the column block (kCols = 2 * kLanes W rows), the x rows per register block (kMb),
// the decode of a packed row to int16 and the activations' quantization. Include only from a
// translation unit compiled for that ISA.
//
// x: each group of 32/64/128 values of a row rounded to int16 levels of its own step (the
// group's max|x| / 32767), so an outlier coarsens only its group. W: each tile of rows decoded
// once to int16 and laid out for the register blocks: for each block of kCols rows, each pair of
// k values (k even) holds kCols int32 lanes, lane r = the row's values k (low half) and k + 1
// (high half): exactly the operand an int16 pair dot product (vpdpwssd / vpmaddwd) multiplies
// with a broadcast pair of x. Scales and biases become float32 [block][group][kCols]. Per group
// the register block sums exact int32 products (|xq| <= 32767, q <= 255, at most 64 pairs) and
// converts once: out += sum * step * scale + sum(x) * bias.
#pragma once

#include <algorithm>
#include <memory>

#include "kernels/gemv_rows8.h"
#include "kernels/qmatmul.h"
#include "kernels/row_count.h"
#include "kernels/scale_load.h"

namespace mlxcpp::kernels::gemm_i16 {

template <class I>
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

// Rows [t0, t1) of a kRows8 matrix into the tile: its chunks widened to 16-bit lanes are the
// tile's int32 pairs for 8 rows (t0 and t1 are multiples of 8: of the column block and of the
// matrix's rows); one vector op per 16 values, where the MLX layout decodes a row at a time and
// scatters its pairs (5-bit: ~11% of a 16-client Gemma 3 serve's samples).
template <class I, int BITS, ScaleType ST>
void widen_rows8(const QMatrixView& q, int t0, int t1, Tile<I>& t) {
  constexpr int C = I::kCols;
  const int pairs = q.k / 2, groups = q.k / q.group;
  const long gb = rows8_group_bytes(BITS, q.group, ST, q.sym);
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  const int blocks = (t1 - t0 + C - 1) / C;
  for (int nb = 0; nb < blocks; ++nb) {
    auto* w = reinterpret_cast<int16_t*>(t.w.get() + static_cast<long>(nb) * pairs * C);
    float* s = t.s.get() + static_cast<long>(nb) * groups * C;
    float* b = t.b.get() + static_cast<long>(nb) * groups * C;
    for (int r0 = 0; r0 < C; r0 += 8) {
      const int n = t0 + nb * C + r0;
      if (n >= t1) {
        for (int p = 0; p < pairs; ++p) std::fill_n(w + 2 * (static_cast<long>(p) * C + r0), 16, int16_t{0});
        for (int g = 0; g < groups; ++g) std::fill_n(s + g * C + r0, 8, 0.f), std::fill_n(b + g * C + r0, 8, 0.f);
        continue;
      }
      const uint8_t* src = base + static_cast<long>(n / 8) * groups * gb;
      for (int g = 0; g < groups; ++g, src += gb) {
        // Chunk c widened to 16 int16: 4/5/6-bit pairs p and p + 1 (low, high nibbles and their
        // planes), 8-bit pair p.
        constexpr int kPlanes = rows8_planes(BITS);
        for (int c = 0; c < rows8_chunks(BITS, q.group); ++c) {
          const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * c)));
          if constexpr (BITS == 8) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 2 * ((static_cast<long>(g) * q.group / 2 + c) * C + r0)), v);
          } else {
            __m256i lo = _mm256_and_si256(v, _mm256_set1_epi16(0x0F)), hi = _mm256_srli_epi16(v, 4);
            rows8::add_planes<kPlanes>(lo, hi, src + 4L * q.group + 4L * kPlanes * c);
            const long p = (static_cast<long>(g) * q.group + 4 * c) / 2;
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 2 * (p * C + r0)), lo);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 2 * ((p + 1) * C + r0)), hi);
          }
        }
        for (int j = 0; j < 8; ++j) {
          s[g * C + r0 + j] = load_scale<ST, I>(src + rows8_scale_offset(BITS, q.group, ST, j), 0);
          b[g * C + r0 + j] = q.sym ? rows8_sym_bias(BITS, s[g * C + r0 + j])
                                    : load_scale<ST, I>(src + rows8_scale_offset(BITS, q.group, ST, j, true), 0);
        }
      }
    }
  }
}

// Rows [t0, t1) of q into the tile (rows past t1 up to a whole block are zero).
template <class I, int BITS, ScaleType ST>
void widen(const QMatrixView& q, int t0, int t1, Tile<I>& t) {
  if constexpr (rows8_bits(BITS)) {
    if (q.layout == QLayout::kRows8) return widen_rows8<I, BITS, ST>(q, t0, t1, t);
  }
  constexpr int C = I::kCols;
  const int pairs = q.k / 2, groups = q.k / q.group;
  const long row_bytes = static_cast<long>(q.k) * BITS / 8;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  const int blocks = (t1 - t0 + C - 1) / C;
  for (int nb = 0; nb < blocks; ++nb) {
    int32_t* w = t.w.get() + static_cast<long>(nb) * pairs * C;
    float* s = t.s.get() + static_cast<long>(nb) * groups * C;
    float* b = t.b.get() + static_cast<long>(nb) * groups * C;
    for (int r = 0; r < C; ++r) {
      const int n = t0 + nb * C + r;
      if (n >= t1) {
        for (int p = 0; p < pairs; ++p) w[p * C + r] = 0;
        for (int g = 0; g < groups; ++g) s[g * C + r] = b[g * C + r] = 0.f;
        continue;
      }
      I::template decode_row<BITS>(base + n * row_bytes, q.k, t.row.get());
      const auto* pr = reinterpret_cast<const int32_t*>(t.row.get());
      for (int p = 0; p < pairs; ++p) w[p * C + r] = pr[p];
      for (int g = 0; g < groups; ++g) {
        s[g * C + r] = load_scale<ST, I>(q.scales, static_cast<long>(n) * groups + g);
        b[g * C + r] = load_scale<ST, I>(q.biases, static_cast<long>(n) * groups + g);
      }
    }
  }
}

// MB x rows against one block of kCols = 2 * kLanes widened W rows. xp: the rows' int16 pairs
// (ldx pairs apart); xd, xs: step and sum of x [MB][groups]; cols: the block's columns to store.
template <class I, int MB, int GP>
void block(const int32_t* xp, long ldx, const float* xd, const float* xs, int groups, const int32_t* w, const float* s,
           const float* b, float* out, long ldo, int cols) {
  using vi = typename I::vi;
  using vf = typename I::vf;
  constexpr int L = I::kLanes, C = I::kCols;
  static_assert(C == 2 * L);
  vf f[MB][2];
  for (int m = 0; m < MB; ++m) f[m][0] = f[m][1] = I::fzero();
  for (int g = 0; g < groups; ++g) {
    vi acc[MB][2];
    for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = I::izero();
    const int32_t* wg = w + static_cast<long>(g) * GP * C;
    const int32_t* xg = xp + g * GP;
#pragma GCC unroll 4
    for (int p = 0; p < GP; ++p) {
      const vi w0 = I::iload(wg + p * C), w1 = I::iload(wg + p * C + L);
      for (int m = 0; m < MB; ++m) {
        const vi xv = I::bcast(xg[m * ldx + p]);
        acc[m][0] = I::dot2(acc[m][0], xv, w0);
        acc[m][1] = I::dot2(acc[m][1], xv, w1);
      }
    }
    const vf s0 = I::fload(s + g * C), s1 = I::fload(s + g * C + L);
    const vf b0 = I::fload(b + g * C), b1 = I::fload(b + g * C + L);
    for (int m = 0; m < MB; ++m) {
      const vf d = I::fset1(xd[m * groups + g]), sum = I::fset1(xs[m * groups + g]);
      f[m][0] = I::fma(sum, b0, I::fma(I::mul(I::cvt(acc[m][0]), d), s0, f[m][0]));
      f[m][1] = I::fma(sum, b1, I::fma(I::mul(I::cvt(acc[m][1]), d), s1, f[m][1]));
    }
  }
  for (int m = 0; m < MB; ++m) {
    I::store(out + m * ldo, f[m][0], cols);
    I::store(out + m * ldo + L, f[m][1], cols - L);
  }
}

// x rows [m0, m0 + mb) (mb <= kMb) against block nb of the tile (columns c.. of out).
template <class I, int GP>
void run_block(const QInput& in, const QMatrixView& q, int m0, int mb, const Tile<I>& t, int nb, int c, int cols,
               float* out, int ldo) {
  constexpr int C = I::kCols;
  const int pairs = q.k / 2, groups = q.k / q.group;
  const auto* xp = reinterpret_cast<const int32_t*>(in.xq) + static_cast<long>(m0) * pairs;
  const float* xd = in.xd + static_cast<long>(m0) * groups;
  const float* xs = in.xsum + static_cast<long>(m0) * groups;
  const int32_t* w = t.w.get() + static_cast<long>(nb) * pairs * C;
  const float* s = t.s.get() + static_cast<long>(nb) * groups * C;
  const float* b = t.b.get() + static_cast<long>(nb) * groups * C;
  float* o = out + static_cast<long>(m0) * ldo + c;
  with_row_count<I::kMb>(mb, [&]<int MB>() { block<I, MB, GP>(xp, pairs, xd, xs, groups, w, s, b, o, ldo, cols); });
}

template <class I, int BITS, ScaleType ST, int GP>
void rows_gemm(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  constexpr int C = I::kCols;
  // Tiles of about 192 KB of widened weights (L2).
  constexpr long kTileBytes = 192 * 1024;
  const int tile = std::max<int>(C, static_cast<int>(kTileBytes / (2L * q.k)) / C * C);
  Tile<I> t(std::min(tile, (n1 - n0 + C - 1) / C * C), q.k, q.k / q.group);
  for (int t0 = n0; t0 < n1; t0 += tile) {
    const int t1 = std::min(n1, t0 + tile);
    widen<I, BITS, ST>(q, t0, t1, t);
    auto each_block = [&](int m0, int c) {
      run_block<I, GP>(in, q, m0, std::min(I::kMb, in.m - m0), t, (c - t0) / C, c, std::min(C, t1 - c), out, ldo);
    };
    // Each block of W rows (L1-resident where it fits: 16 rows of k = 640 are 20 KB) against
    // every block of x rows: x rows stream from L2 and give more multiply-adds per byte than
    // the W block would (AVX2's 3 x 16 block: a pair of x values feeds 16 products, a pair of
    // W values 3). 512 x 2048 x 640 on 1 thread, AVX2 45-48 -> 56-66 GMAC/s than with the x rows
    // outer; AVX-512 (6 x 32) unchanged within noise.
    for (int c = t0; c < t1; c += C)
      for (int m0 = 0; m0 < in.m; m0 += I::kMb) each_block(m0, c);
  }
}

template <class I, int BITS, ScaleType ST>
void rows_any(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  with_group(q.group, [&]<int G>() { rows_gemm<I, BITS, ST, G / 2>(in, q, n0, n1, out, ldo); });
}

// The QKernel table of one ISA (2..8 bits except 7).
template <class I>
struct Table {
  template <ScaleType ST>
  struct For {
    static QKernel call(int bits) {
      QKernel k;
      switch (bits) {
        case 2: k.rows = rows_any<I, 2, ST>; break;
        case 3: k.rows = rows_any<I, 3, ST>; break;
        case 4: k.rows = rows_any<I, 4, ST>; break;
        case 5: k.rows = rows_any<I, 5, ST>; break;
        case 6: k.rows = rows_any<I, 6, ST>; break;
        case 8: k.rows = rows_any<I, 8, ST>; break;
        default: return {};
      }
      k.xsum = true;
      k.quantize = I::quantize_groups;
      k.group_steps = true;
      k.n_align = I::kCols;
      return k;
    }
  };
};

}  // namespace mlxcpp::kernels::gemm_i16
