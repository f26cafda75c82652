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

// n values of `bits` bits from the little-endian bitstream at src (starting at a byte).
inline void unpack(const uint8_t* src, int n, int bits, uint8_t* out) {
  uint64_t buf = 0;
  int have = 0;
  const uint64_t mask = (1u << bits) - 1;
  for (int i = 0; i < n; ++i) {
    if (have < bits) buf |= static_cast<uint64_t>(*src++) << have, have += 8;
    out[i] = static_cast<uint8_t>(buf & mask);
    buf >>= bits;
    have -= bits;
  }
}

// Value i of row n of a kRows8 matrix (qmatmul.h: the nibble or byte, then 5/6-bit planes).
inline uint32_t rows8_value(const QMatrixView& q, const uint8_t* base, long n, int i) {
  const long gb = rows8_group_bytes(q.bits, q.group, q.stype, q.sym), groups = q.k / q.group;
  const uint8_t* grp = base + (n / 8) * groups * gb + (i / q.group) * gb;
  const int j = static_cast<int>(n % 8), kk = i % q.group;
  if (q.bits == 8) return grp[(kk / 2) * 16 + 2 * j + (kk % 2)];
  const int c = kk / 4, byte = 2 * j + (kk % 2);
  const bool high = (kk % 4) >= 2;
  uint32_t v = (grp[c * 16 + byte] >> (high ? 4 : 0)) & 0xF;
  for (int b = 0; b < rows8_planes(q.bits); ++b) {
    uint32_t plane;
    std::memcpy(&plane, grp + 4L * q.group + 4L * (rows8_planes(q.bits) * c + b), 4);
    v |= ((plane >> (byte + (high ? 16 : 0))) & 1u) << (4 + b);
  }
  return v;
}
// Byte offset of row n's scale (bias: its bias) of group g in a kRows8 matrix.
inline long rows8_scale(const QMatrixView& q, long n, int g, bool bias = false) {
  const long gb = rows8_group_bytes(q.bits, q.group, q.stype, q.sym);
  return ((n / 8) * (q.k / q.group) + g) * gb + rows8_scale_offset(q.bits, q.group, q.stype, static_cast<int>(n % 8), bias);
}

// Row n dequantized (scale * q + bias, MLX's dequantize) in either layout.
template <ScaleType ST>
void dequantize_any(const QMatrixView& q, long n, float* out) {
  const long groups = q.k / q.group;
  const auto* base = reinterpret_cast<const uint8_t*>(q.w);
  if (q.layout == QLayout::kRows8) {
    for (int g = 0; g < groups; ++g) {
      const float s = load_scale<ST>(base + rows8_scale(q, n, g), 0);
      const float b = q.sym ? rows8_sym_bias(q.bits, s) : load_scale<ST>(base + rows8_scale(q, n, g, true), 0);
      for (int i = g * q.group; i < (g + 1) * q.group; ++i) {
        out[i] = s * static_cast<float>(rows8_value(q, base, n, i)) + b;
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

void repack_rows8(const QMatrixView& src, uint32_t* dst, int block0, int block1, bool sym) {
  const int groups = src.k / src.group, sbytes = scale_bytes(src.stype);
  const long row_bytes = static_cast<long>(src.k) * src.bits / 8, gb = rows8_group_bytes(src.bits, src.group, src.stype, sym);
  const auto* w = reinterpret_cast<const uint8_t*>(src.w);
  auto* out = reinterpret_cast<uint8_t*>(dst);
  for (int blk = block0; blk < (block1 < 0 ? src.n / 8 : block1); ++blk)
    for (int g = 0; g < groups; ++g) {
      uint8_t* o = out + (static_cast<long>(blk) * groups + g) * gb;
      // Byte pair c of the 8 rows side by side: o[16c + 2j + h]. 8-bit: the pair as it is;
      // 4-bit: values 4c + h (low nibble) and 4c + 2 + h (high) of row j; 5/6-bit: their low
      // four bits so, and the bits above in the chunk's planes.
      const long at0 = static_cast<long>(g) * src.group;
      if (src.bits == 4 || src.bits == 8) {
        // The pair of bytes as it is (4-bit: values 2c'..2c'+3 in bytes 2c', 2c' + 1; the
        // pair's two middle nibbles swapped).
        for (int c = 0; c < src.group * src.bits / 16; ++c)
          for (int j = 0; j < 8; ++j) {
            uint16_t u;
            std::memcpy(&u, w + (8L * blk + j) * row_bytes + at0 * src.bits / 8 + 2 * c, 2);
            if (src.bits == 4) u = static_cast<uint16_t>((u & 0xF00F) | ((u & 0x0F00) >> 4) | ((u & 0x00F0) << 4));
            std::memcpy(o + 16 * c + 2 * j, &u, 2);
          }
      } else {
        // Each row's group unpacked first (one pass over its bytes), then the chunks.
        const int planes = rows8_planes(src.bits);
        uint8_t v[8][128];
        for (int j = 0; j < 8; ++j) unpack(w + (8L * blk + j) * row_bytes + at0 * src.bits / 8, src.group, src.bits, v[j]);
        for (int c = 0; c < src.group / 4; ++c) {
          uint32_t plane[2] = {0, 0};
          for (int j = 0; j < 8; ++j)
            for (int h = 0; h < 2; ++h) {
              const uint32_t lo = v[j][4 * c + h], hi = v[j][4 * c + 2 + h];
              o[16 * c + 2 * j + h] = static_cast<uint8_t>((lo & 0xF) | (hi & 0xF) << 4);
              for (int b = 0; b < planes; ++b)
                plane[b] |= ((lo >> (4 + b)) & 1u) << (2 * j + h) | ((hi >> (4 + b)) & 1u) << (16 + 2 * j + h);
            }
          std::memcpy(o + 4L * src.group + 4L * planes * c, plane, 4L * planes);
        }
      }
      for (int j = 0; j < 8; ++j) {
        const long n = 8L * blk + j;
        const long at = (n * groups + g) * sbytes;
        std::memcpy(o + rows8_scale_offset(src.bits, src.group, src.stype, j), static_cast<const uint8_t*>(src.scales) + at,
                    sbytes);
        if (!sym) {
          std::memcpy(o + rows8_scale_offset(src.bits, src.group, src.stype, j, true),
                      static_cast<const uint8_t*>(src.biases) + at, sbytes);
        }
      }
    }
}

}  // namespace mlxcpp::kernels
