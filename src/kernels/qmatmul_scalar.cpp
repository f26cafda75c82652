// Portable reference for every supported bit width; also the fallback for odd widths.
#include <cstring>
#include <vector>

#include "kernels/qmatmul.h"
#include "kernels/scale_load.h"

namespace mlxcpp::kernels {

namespace {

// Value i of a packed row (little-endian bitstream of `bits`-bit values).
inline uint32_t extract(const uint8_t* row, int64_t i, int bits) {
  const int64_t bit = i * bits;
  uint32_t word = 0;
  std::memcpy(&word, row + (bit >> 3), static_cast<size_t>(((bit & 7) + bits + 7) / 8));  // never past the value
  return (word >> (bit & 7)) & ((1u << bits) - 1);
}

// Where a kRows8 matrix keeps value i of row n: the byte and the shift (4-bit: 0 or 4).
struct Rows8Pos {
  long byte;
  int shift;
};
inline Rows8Pos rows8_pos(const QMatrixView& q, long n, int i) {
  const long gb = rows8_group_bytes(q.bits, q.group, q.stype), groups = q.k / q.group;
  const long base = (n / 8) * groups * gb + (i / q.group) * gb;
  const int j = static_cast<int>(n % 8), kk = i % q.group;
  if (q.bits == 4) return {base + (kk / 4) * 16 + 2 * j + (kk % 2), (kk % 4) >= 2 ? 4 : 0};
  return {base + (kk / 2) * 16 + 2 * j + (kk % 2), 0};
}
// Byte offset of row n's scale (bias: its bias) of group g in a kRows8 matrix.
inline long rows8_scale(const QMatrixView& q, long n, int g, bool bias = false) {
  const long gb = rows8_group_bytes(q.bits, q.group, q.stype);
  return ((n / 8) * (q.k / q.group) + g) * gb + rows8_scale_offset(q.bits, q.group, q.stype, static_cast<int>(n % 8), bias);
}

// Row n dequantized (scale * q + bias, MLX's dequantize) in either layout.
template <ScaleType ST>
void dequantize_any(const QMatrixView& q, long n, float* out) {
  const long groups = q.k / q.group;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  if (q.layout == QLayout::kRows8) {
    for (int g = 0; g < groups; ++g) {
      const float s = load_scale<ST>(base + rows8_scale(q, n, g), 0), b = load_scale<ST>(base + rows8_scale(q, n, g, true), 0);
      for (int i = g * q.group; i < (g + 1) * q.group; ++i) {
        const Rows8Pos pos = rows8_pos(q, n, i);
        const uint32_t v = (base[pos.byte] >> pos.shift) & ((1u << q.bits) - 1);
        out[i] = s * static_cast<float>(v) + b;
      }
    }
    return;
  }
  const auto* row = base + n * (static_cast<int64_t>(q.k) * q.bits / 8);
  for (int i = 0; i < q.k; ++i) {
    const long at = n * groups + i / q.group;
    const float v = static_cast<float>(extract(row, i, q.bits));
    out[i] = load_scale<ST>(q.scales, at) * v + load_scale<ST>(q.biases, at);
  }
}

// A kRows8 matrix's rows dequantized one at a time (the portable path: --isa scalar, --f32-dot).
template <ScaleType ST>
void rows_rows8(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  std::vector<float> deq(q.k);
  for (int n = n0; n < n1; ++n) {
    dequantize_any<ST>(q, n, deq.data());
    for (int mm = 0; mm < in.m; ++mm) {
      const float* xr = in.x + static_cast<int64_t>(mm) * q.k;
      float acc = 0.f;
      for (int i = 0; i < q.k; ++i) acc += deq[i] * xr[i];
      out[mm * ldo + n] = acc;
    }
  }
}

template <ScaleType ST>
void rows_generic(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
  if (q.layout == QLayout::kRows8) return rows_rows8<ST>(in, q, n0, n1, out, ldo);
  const float* x = in.x;
  const int m = in.m;
  const int groups = q.k / q.group;
  const int64_t row_bytes = static_cast<int64_t>(q.k) * q.bits / 8;
  float deq[128];
  for (int n = n0; n < n1; ++n) {
    const auto* row = reinterpret_cast<const uint8_t*>(q.w) + n * row_bytes;
    for (int mm = 0; mm < m; ++mm) out[mm * ldo + n] = 0.f;
    for (int g = 0; g < groups; ++g) {
      const long at = static_cast<long>(n) * groups + g;
      const float s = load_scale<ST>(q.scales, at), b = load_scale<ST>(q.biases, at);
      for (int j = 0; j < q.group; ++j) {
        deq[j] = s * static_cast<float>(extract(row, static_cast<int64_t>(g) * q.group + j, q.bits)) + b;
      }
      for (int mm = 0; mm < m; ++mm) {
        const float* xr = x + static_cast<int64_t>(mm) * q.k + g * q.group;
        float acc = 0.f;
        for (int j = 0; j < q.group; ++j) acc += deq[j] * xr[j];
        out[mm * ldo + n] += acc;
      }
    }
  }
}

template <ScaleType ST>
struct Scalar {
  static QKernel call(int bits) { return QKernel{(bits >= 2 && bits <= 8 && bits != 7) ? rows_generic<ST> : nullptr, 0, false}; }
};

template <ScaleType ST>
struct DequantizeRow {
  static void call(const QMatrixView& q, long n, float* out) { dequantize_any<ST>(q, n, out); }
};

}  // namespace

void dequantize_row(const QMatrixView& q, long n, float* out) { with_scale_type<DequantizeRow>(q.stype, q, n, out); }

QKernel qmatmul_kernel_scalar(int bits, ScaleType st) { return with_scale_type<Scalar>(st, bits); }

void repack_rows8(const QMatrixView& src, uint32_t* dst, int block0, int block1) {
  const int groups = src.k / src.group, sbytes = scale_bytes(src.stype);
  const long row_bytes = static_cast<long>(src.k) * src.bits / 8, gb = rows8_group_bytes(src.bits, src.group, src.stype);
  const auto* w = reinterpret_cast<const uint8_t*>(src.w);
  auto* out = reinterpret_cast<uint8_t*>(dst);
  for (int blk = block0; blk < (block1 < 0 ? src.n / 8 : block1); ++blk)
    for (int g = 0; g < groups; ++g) {
      uint8_t* o = out + (static_cast<long>(blk) * groups + g) * gb;
      // Byte pair c of the 8 rows side by side: o[16c + 2j + h]. 8-bit: the pair as it is;
      // 4-bit: values 4c + h (low nibble) and 4c + 2 + h (high) of row j, which sit in bytes 2c
      // and 2c + 1, i.e. the pair's two middle nibbles swapped.
      const uint8_t* r[8];
      for (int j = 0; j < 8; ++j) r[j] = w + (8L * blk + j) * row_bytes + static_cast<long>(g) * src.group * src.bits / 8;
      const int pairs = src.group * src.bits / 16;
      for (int c = 0; c < pairs; ++c)
        for (int j = 0; j < 8; ++j) {
          uint16_t u;
          std::memcpy(&u, r[j] + 2 * c, 2);
          if (src.bits != 8) u = static_cast<uint16_t>((u & 0xF00F) | ((u & 0x0F00) >> 4) | ((u & 0x00F0) << 4));
          std::memcpy(o + 16 * c + 2 * j, &u, 2);
        }
      for (int j = 0; j < 8; ++j) {
        const long n = 8L * blk + j;
        const long at = (n * groups + g) * sbytes;
        std::memcpy(o + rows8_scale_offset(src.bits, src.group, src.stype, j), static_cast<const uint8_t*>(src.scales) + at,
                    sbytes);
        std::memcpy(o + rows8_scale_offset(src.bits, src.group, src.stype, j, true),
                    static_cast<const uint8_t*>(src.biases) + at, sbytes);
      }
    }
}

}  // namespace mlxcpp::kernels
