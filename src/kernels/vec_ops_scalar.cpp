#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

namespace {

float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void axpy(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}
float sum_squares(const float* x, int n) { return dot(x, x, n); }

}  // namespace

const VecOps& vec_ops_scalar() {
  static const VecOps ops{dot, axpy, sum_squares};
  return ops;
}

const VecOps& vec_ops(Isa isa) {
  if (isa == Isa::kAvx512) return vec_ops_avx512();
  if (isa == Isa::kAvx2) return vec_ops_avx2();
  return vec_ops_scalar();
}

}  // namespace mlxcpp::kernels
