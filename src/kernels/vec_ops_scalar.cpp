#include "kernels/vec_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <mlx/types/half_types.h>

#include "kernels/gated_delta_gemm.h"
#include "kernels/scale_load.h"

namespace mlxcpp::kernels {

namespace {

// A cache value as float32 (float16 ones are bit patterns).
inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t h) { return PortableHalf::f16(h); }

template <class T>
float dot(const float* a, const T* b, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += a[i] * to_f32(b[i]);
  return s;
}
template <class T>
void axpy(float a, const T* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * to_f32(x[i]);
}

void to_half(const float* x, uint16_t* y, long n) {
  for (long i = 0; i < n; ++i) {
    const mlx::core::float16_t h(x[i]);
    std::memcpy(y + i, &h, sizeof h);
  }
}
void from_half(const uint16_t* x, float* y, long n) {
  for (long i = 0; i < n; ++i) {
    mlx::core::float16_t h;
    std::memcpy(&h, x + i, sizeof(h));
    y[i] = static_cast<float>(h);
  }
}

bool to_half_exact(const float* x, uint16_t* y, long n) {
  bool exact = true;
  for (long i = 0; i < n; ++i) {
    const mlx::core::float16_t h(x[i]);
    std::memcpy(y + i, &h, sizeof h);
    exact = exact && static_cast<float>(h) == x[i];
  }
  return exact;
}
float sum_squares(const float* x, int n) { return dot(x, x, n); }


template <class T>
void attend(const float* q, const T* k, const T* v, int hd, int first, int last, float scale, float* scores,
            float* out, float* part) {
  const int n = last - first + 1;
  k += static_cast<long>(first) * hd;
  v += static_cast<long>(first) * hd;
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) mx = std::max(mx, scores[j] = dot(q, k + static_cast<long>(j) * hd, hd) * scale);
  float sum = 0.f;
  for (int j = 0; j < n; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
  std::fill(out, out + hd, 0.f);
  const float inv = part ? 1.0f : 1.0f / sum;
  for (int j = 0; j < n; ++j) axpy(scores[j] * inv, v + static_cast<long>(j) * hd, out, hd);
  if (part) part[0] = mx, part[1] = sum;
}

template <class T>
void attend_group(const float* q, int G, const T* k, const T* v, int hd, int first, int last, float scale,
                  float* scores, float* out, float* part) {
  const long n = last - first + 1;
  for (int h = 0; h < G; ++h) {
    attend(q + static_cast<long>(h) * hd, k, v, hd, first, last, scale, scores + h * n, out + static_cast<long>(h) * hd,
           part ? part + 2 * h : nullptr);
  }
}

template <class T>
void attend_tile(const float* q, long q_stride, int G, int P, const int* first, const int* last, const T* k,
                 const T* v, int hd, float scale, float* scores, float* out, long out_stride) {
  for (int p = 0; p < P; ++p)
    attend_group(q + p * q_stride, G, k, v, hd, first[p], last[p], scale, scores, out + p * out_stride, nullptr);
}

double sum_exp(const float* x, long n, float shift) {
  double s = 0;
  for (long i = 0; i < n; ++i) s += std::exp(x[i] - shift);
  return s;
}

void silu_mul(const float* g, const float* u, float* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void gelu_mul(const float* g, const float* u, float* y, long n) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  for (long i = 0; i < n; ++i) {
    const float x = g[i];
    y[i] = 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x))) * u[i];
  }
}

float max_value(const float* x, long n) {
  float m = x[0];
  for (long i = 0; i < n; ++i) {
    if (x[i] != x[i]) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

float delta_rule_row(float* row, const float* k, const float* q, float g, float v, float beta, int n, bool keep) {
  float sk = 0.f;
  for (int i = 0; i < n; ++i) sk += row[i] * k[i];
  const float delta = (v - g * sk) * beta;
  float out = 0.f;
  for (int i = 0; i < n; ++i) {
    const float r = g * row[i] + delta * k[i];
    if (keep) row[i] = r;
    out += r * q[i];
  }
  return out;
}

// One float as a "vector" for the small GEMM (left to the compiler to vectorize).
struct Scalar {
  using vec = float;
  static constexpr int kLanes = 1;
  static float set1(float v) { return v; }
  static float load(const float* p) { return *p; }
  static void store(float* p, float v) { *p = v; }
  static float fma(float a, float b, float c) { return a * b + c; }
};

void dequant_rows(const uint8_t* packed, long packed_stride, int n, int bits, int d, int group, const void* scales,
                  const void* biases, long scale_stride, bool f16, float* out) {
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  auto at = [&](const void* p, long g) {
    return f16 ? static_cast<float>(static_cast<const mlx::core::float16_t*>(p)[g]) : static_cast<const float*>(p)[g];
  };
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = packed + j * packed_stride;
    float* o = out + static_cast<long>(j) * d;
    for (int g = 0; g < d / group; ++g) {
      const float s = at(scales, j * scale_stride + g), b = at(biases, j * scale_stride + g);
      for (int i = g * group; i < (g + 1) * group; ++i) {
        const unsigned q = (row[i / per_byte] >> ((i % per_byte) * bits)) & mask;
        o[i] = static_cast<float>(q) * s + b;
      }
    }
  }
}

}  // namespace

const VecOps& vec_ops_scalar() {
  static const VecOps ops{axpy<float>,
                          sum_squares,
                          attend_group<float>,
                          attend_tile<float>,
                          sum_exp,
                          silu_mul,
                          gelu_mul,
                          attend_group<uint16_t>,
                          attend_tile<uint16_t>,
                          to_half,
                          from_half,
                          to_half_exact,
                          max_value,
                          delta_rule_row,
                          dequant_rows,
                          small_gemm::gemm_acc<Scalar, 4, 4>,
                          nullptr};
  return ops;
}

const VecOps& vec_ops(Isa isa) {
  if (isa == Isa::kAvx512) return vec_ops_avx512();
  if (isa == Isa::kAvx2) return vec_ops_avx2();
  return vec_ops_scalar();
}

}  // namespace mlxcpp::kernels
