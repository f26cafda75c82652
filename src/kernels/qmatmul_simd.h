// The quantized-matmul loop nest shared by the AVX2 and AVX-512 kernels; `V` supplies the
// vector type and the per-ISA decode of `V::kLanes` packed values into floats.
// Include only from a translation unit compiled for that ISA.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/qmatmul.h"
#include "kernels/scale_load.h"

namespace mlxcpp::kernels::simd {

// Byte-shuffle tables that spread `lanes` consecutive BITS-bit values of a little-endian
// bitstream (2*lanes*BITS/16 bytes, repeated in every 128-bit lane) into 32-bit lanes: lane i
// gets bytes b, b+1 of bit offset i*BITS (0x80 = zero where b+1 is past the span) and is then
// shifted right by that offset's bit position and masked.
template <int BITS, int LANES>
struct Spread {
  alignas(64) uint8_t idx[4 * LANES];
  alignas(64) int32_t shift[LANES];
  static constexpr int kBytes = LANES * BITS / 8;
  constexpr Spread() : idx{}, shift{} {
    for (int i = 0; i < LANES; ++i) {
      const int p = i * BITS, b = p / 8;
      idx[4 * i] = static_cast<uint8_t>(b);
      idx[4 * i + 1] = static_cast<uint8_t>(b + 1 < kBytes ? b + 1 : 0x80);
      idx[4 * i + 2] = idx[4 * i + 3] = 0x80;
      shift[i] = p % 8;
    }
  }
};

// sum_i p[off + i] * xs[i] over n scales or biases (the bias term of a row), V::kLanes at a time.
template <class V, ScaleType ST>
inline float dot_scales(const void* p, long off, const float* xs, int n) {
  typename V::vec acc = V::zero();
  int i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) acc = V::fma(V::template load_scales<ST>(p, off + i), V::load(xs + i), acc);
  float s = V::reduce(acc);
  for (; i < n; ++i) s += load_scale<ST, V>(p, off + i) * xs[i];
  return s;
}

// Decode streams every weight once from memory per token, and the hardware prefetchers alone
// fall behind on several interleaved rows. While a kernel computes a block of rows (contiguous
// in memory), it requests the next block's bytes a few cache lines per k step, so the misses
// overlap the arithmetic instead of queuing in one burst (a burst at the block start filled the
// miss buffers and stalled: 8-bit streamed GEMV 4.6 -> 11 GB/s on one thread with the spread
// form), and the next block's scales and biases at its start.

// Requests rows [r0, r1) of a packed matrix (weights, scales, biases) into the caches.
inline void prefetch_rows(const QMatrixView& q, long row_bytes, int r0, int r1, bool weights = true) {
  if (r1 > q.n) r1 = q.n;
  if (r0 >= r1) return;
  if (weights) {
    const auto* w = reinterpret_cast<const uint8_t*>(q.w) + static_cast<long>(r0) * row_bytes;
    for (long off = 0, n = static_cast<long>(r1 - r0) * row_bytes; off < n; off += 64) __builtin_prefetch(w + off, 0, 3);
  }
  const long per_row = static_cast<long>(q.k / q.group) * (q.stype == ScaleType::kF32 ? 4 : 2);
  for (const void* p : {q.scales, q.biases}) {
    const auto* b = static_cast<const uint8_t*>(p) + r0 * per_row;
    for (long off = 0, n = (r1 - r0) * per_row; off < n; off += 64) __builtin_prefetch(b + off, 0, 3);
  }
}

// The spread prefetch of the block after rows [n, n + NR): step() once per k step of
// kStepBytes bytes per row (NR * kStepBytes bytes of the next block each time).
enum class Prefetch { kSpread, kOnce, kNone };
template <int NR, int kStepBytes>
class NextBlockPrefetch {
 public:
  // kOnce: the whole next block at once here; kNone: nothing (a later pass over rows already
  // requested). step() only with kSpread.
  NextBlockPrefetch(const QMatrixView& q, long row_bytes, int n, Prefetch mode = Prefetch::kSpread)
      : p_(reinterpret_cast<const uint8_t*>(q.w) + static_cast<long>(n + NR) * row_bytes),
        end_(reinterpret_cast<const uint8_t*>(q.w) + static_cast<long>(q.n) * row_bytes) {
    if (mode != Prefetch::kNone) prefetch_rows(q, row_bytes, n + NR, n + 2 * NR, mode == Prefetch::kOnce);
  }
  void step() {
    constexpr int kBytes = NR * kStepBytes;
    for (int o = 0; o < kBytes; o += 64)
      if (p_ + o < end_) __builtin_prefetch(p_ + o, 0, 3);
    p_ += kBytes;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Group-sum form: per group, acc_g += q * x over the raw integers, then acc += acc_g * scale;
// the biases are added at the end as bias * sum(x over the group).
// 4-bit reads 2*kLanes values per step (low nibbles with the even x, high with the odd x);
// other widths decode kLanes values per step with V::qint.
template <class V, int BITS, ScaleType ST, int MB, int NR>
inline void block_gs(const QInput& in, const QMatrixView& q, int n, float* out, int ldo) {
  using vec = typename V::vec;
  constexpr int L = V::kLanes;
  constexpr int kStep = BITS == 4 ? 2 * L : L;
  const int groups = q.k / q.group;
  const long row_bytes = static_cast<long>(q.k) * BITS / 8;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  // A GEMM tile is swept once per block of x rows from L2: the next block, once, up front.
  NextBlockPrefetch<NR, kStep * BITS / 8> pf(q, row_bytes, n, MB == 1 ? Prefetch::kSpread : Prefetch::kOnce);
  vec acc[MB][NR];
  for (int mm = 0; mm < MB; ++mm)
    for (int r = 0; r < NR; ++r) acc[mm][r] = V::zero();
  for (int g = 0; g < groups; ++g) {
    vec ag[MB][NR];
    for (int mm = 0; mm < MB; ++mm)
      for (int r = 0; r < NR; ++r) ag[mm][r] = V::zero();
    const int k1 = (g + 1) * q.group;
    for (int k = g * q.group; k < k1; k += kStep) {
      if constexpr (MB == 1) pf.step();
      if constexpr (BITS == 4) {
        vec xe[MB], xo[MB];
        for (int mm = 0; mm < MB; ++mm) {
          xe[mm] = V::load(in.x + static_cast<long>(mm) * q.k + k);
          xo[mm] = V::load(in.x + static_cast<long>(mm) * q.k + k + L);
        }
        for (int r = 0; r < NR; ++r) {
          vec lo, hi;
          V::q4(base + (n + r) * row_bytes + k / 2, lo, hi);
          for (int mm = 0; mm < MB; ++mm) ag[mm][r] = V::fma(hi, xo[mm], V::fma(lo, xe[mm], ag[mm][r]));
        }
      } else {
        vec xv[MB];
        for (int mm = 0; mm < MB; ++mm) xv[mm] = V::load(in.x + static_cast<long>(mm) * q.k + k);
        for (int r = 0; r < NR; ++r) {
          vec w = V::template qint<BITS>(base + (n + r) * row_bytes, k);
          for (int mm = 0; mm < MB; ++mm) ag[mm][r] = V::fma(w, xv[mm], ag[mm][r]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      const vec s = V::set1(load_scale<ST, V>(q.scales, static_cast<long>(n + r) * groups + g));
      for (int mm = 0; mm < MB; ++mm) acc[mm][r] = V::fma(ag[mm][r], s, acc[mm][r]);
    }
  }
  for (int mm = 0; mm < MB; ++mm)
    for (int r = 0; r < NR; ++r) {
      const float* xs = in.xsum + static_cast<long>(mm) * groups;
      out[mm * ldo + n + r] = V::reduce(acc[mm][r]) + dot_scales<V, ST>(q.biases, static_cast<long>(n + r) * groups, xs, groups);
    }
}

template <class V, int BITS, ScaleType ST, int MB>
inline void sweep(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  constexpr int NR = MB == 1 ? 4 : V::kNrWide;
  prefetch_rows(q, static_cast<long>(q.k) * BITS / 8, n0, n0 + NR);  // the first block
  int n = n0;
  for (; n + NR <= n1; n += NR) block_gs<V, BITS, ST, MB, NR>(in, q, n, out, ldo);
  for (; n < n1; ++n) block_gs<V, BITS, ST, MB, 1>(in, q, n, out, ldo);
}

// out[mm, r] (mm < MB, r < NR) = dot(x row mm, w row r) over k floats: x rows ldx apart,
// w rows k apart.
template <class V, int MB, int NR>
inline void fgemm_block(const float* x, long ldx, const float* w, int k, float* out, long ldo) {
  using vec = typename V::vec;
  vec acc[MB][NR];
  for (int mm = 0; mm < MB; ++mm)
    for (int r = 0; r < NR; ++r) acc[mm][r] = V::zero();
  for (int kk = 0; kk < k; kk += V::kLanes) {
    vec wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = V::load(w + static_cast<long>(r) * k + kk);
    for (int mm = 0; mm < MB; ++mm) {
      const vec xv = V::load(x + mm * ldx + kk);
      for (int r = 0; r < NR; ++r) acc[mm][r] = V::fma(xv, wv[r], acc[mm][r]);
    }
  }
  for (int mm = 0; mm < MB; ++mm)
    for (int r = 0; r < NR; ++r) out[mm * ldo + r] = V::reduce(acc[mm][r]);
}

// Rows [n0, n1) of W dequantized (scale * q + bias, float32) into w [n1 - n0, k], in the order
// the kernel's x is in (4-bit: each block of 2 * kLanes de-interleaved, even elements first).
template <class V, int BITS, ScaleType ST>
void dequantize_rows(const QMatrixView& q, int n0, int n1, float* w) {
  using vec = typename V::vec;
  constexpr int L = V::kLanes;
  const int groups = q.k / q.group;
  const long row_bytes = static_cast<long>(q.k) * BITS / 8;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  for (int n = n0; n < n1; ++n) {
    const uint8_t* row = base + n * row_bytes;
    float* o = w + static_cast<long>(n - n0) * q.k;
    for (int g = 0; g < groups; ++g) {
      const vec sc = V::set1(load_scale<ST, V>(q.scales, static_cast<long>(n) * groups + g));
      const vec bi = V::set1(load_scale<ST, V>(q.biases, static_cast<long>(n) * groups + g));
      for (int k = g * q.group, k1 = k + q.group; k < k1; k += BITS == 4 ? 2 * L : L) {
        if constexpr (BITS == 4) {
          vec lo, hi;
          V::q4(row + k / 2, lo, hi);
          V::store(o + k, V::fma(lo, sc, bi));
          V::store(o + k + L, V::fma(hi, sc, bi));
        } else {
          V::store(o + k, V::fma(V::template qint<BITS>(row, k), sc, bi));
        }
      }
    }
  }
}

// Many x rows (prefill): each tile of W rows is dequantized once into an L2-sized float buffer
// and every block of x rows runs a register-blocked float kernel over it (decoding the packed
// values again for every block of x rows made 5-bit prefill decode-bound).
inline constexpr int kDequantMinRows = 8;

// W rows per float-kernel block: MB * NR accumulators + NR + 1 fit 16 (AVX2) / 32 registers.
template <class V>
inline constexpr int kGemmNr = V::kLanes == 8 ? 3 : 4;

// MB x rows (from x, k apart) against the dequantized rows [t0, t1) in w: out columns t0..t1.
template <class V, int MB>
inline void fgemm_tile(const float* x, const float* w, int t0, int t1, int k, float* out, long ldo) {
  constexpr int NR = kGemmNr<V>;
  int n = t0;
  for (; n + NR <= t1; n += NR) fgemm_block<V, MB, NR>(x, k, w + static_cast<long>(n - t0) * k, k, out + n, ldo);
  for (; n < t1; ++n) fgemm_block<V, MB, 1>(x, k, w + static_cast<long>(n - t0) * k, k, out + n, ldo);
}

template <class V, int BITS, ScaleType ST>
void rows_dequant(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  constexpr long kTileFloats = 32 * 1024;  // 128 KB of dequantized weights
  constexpr int NR = kGemmNr<V>;
  const int tile = static_cast<int>(std::max<long>(NR, kTileFloats / q.k / NR * NR));
  std::vector<float> w(static_cast<size_t>(std::min(tile, n1 - n0)) * q.k);
  for (int t0 = n0; t0 < n1; t0 += tile) {
    const int t1 = std::min(n1, t0 + tile);
    dequantize_rows<V, BITS, ST>(q, t0, t1, w.data());
    int mm = 0;
    for (; mm + V::kMb <= in.m; mm += V::kMb)
      fgemm_tile<V, V::kMb>(in.x + static_cast<long>(mm) * q.k, w.data(), t0, t1, q.k, out + static_cast<long>(mm) * ldo, ldo);
    for (; mm < in.m; ++mm)
      fgemm_tile<V, 1>(in.x + static_cast<long>(mm) * q.k, w.data(), t0, t1, q.k, out + static_cast<long>(mm) * ldo, ldo);
  }
}

// Few x rows: tiles of W rows small enough to stay in L2 while every block of x rows sweeps
// them in the packed form; from kDequantMinRows on, rows_dequant.
template <class V, int BITS, ScaleType ST>
void rows(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  if (in.m >= kDequantMinRows) {
    rows_dequant<V, BITS, ST>(in, q, n0, n1, out, ldo);
    return;
  }
  constexpr int kTile = 64;
  const int groups = q.k / q.group;
  auto at = [&](int mm) {
    return QInput{in.x + static_cast<long>(mm) * q.k, in.xsum ? in.xsum + static_cast<long>(mm) * groups : nullptr, 1};
  };
  for (int t0 = n0; t0 < n1; t0 += kTile) {
    const int t1 = t0 + kTile < n1 ? t0 + kTile : n1;
    int mm = 0;
    for (; mm + V::kMb <= in.m; mm += V::kMb) sweep<V, BITS, ST, V::kMb>(at(mm), q, t0, t1, out + static_cast<long>(mm) * ldo, ldo);
    for (; mm < in.m; ++mm) sweep<V, BITS, ST, 1>(at(mm), q, t0, t1, out + static_cast<long>(mm) * ldo, ldo);
  }
}

// The QKernel table of one ISA for one scale type (4-bit reads de-interleaved x blocks).
template <class V>
struct KernelTable {
  template <ScaleType ST>
  struct For {
    static QKernel call(int bits) {
      switch (bits) {
        case 2: return {rows<V, 2, ST>, 0, true};
        case 3: return {rows<V, 3, ST>, 0, true};
        case 4: return {rows<V, 4, ST>, 2 * V::kLanes, true};
        case 5: return {rows<V, 5, ST>, 0, true};
        case 6: return {rows<V, 6, ST>, 0, true};
        case 8: return {rows<V, 8, ST>, 0, true};
        default: return {};
      }
    }
  };
};

}  // namespace mlxcpp::kernels::simd
