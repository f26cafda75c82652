// Portable reference for every supported bit width; also the fallback for odd widths.
#include <cstring>

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

template <ScaleType ST>
void rows_generic(const QInput& in, const QMatrixView& q, int n0, int n1, float* out, int ldo) {
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
  static void call(const QMatrixView& q, long n, float* out) {
    const auto* row = reinterpret_cast<const uint8_t*>(q.w) + n * (static_cast<int64_t>(q.k) * q.bits / 8);
    const long groups = q.k / q.group;
    for (int i = 0; i < q.k; ++i) {
      const long at = n * groups + i / q.group;
      const float v = static_cast<float>(extract(row, i, q.bits));
      out[i] = load_scale<ST>(q.scales, at) * v + load_scale<ST>(q.biases, at);
    }
  }
};

}  // namespace

void dequantize_row(const QMatrixView& q, long n, float* out) { with_scale_type<DequantizeRow>(q.stype, q, n, out); }

QKernel qmatmul_kernel_scalar(int bits, ScaleType st) { return with_scale_type<Scalar>(st, bits); }

}  // namespace mlxcpp::kernels
