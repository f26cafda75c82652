// Small float32 vector routines the block kernels are built from, one table per ISA.
#pragma once

#include "kernels/cpu_features.h"

namespace mlxcpp::kernels {

struct VecOps {
  float (*dot)(const float* a, const float* b, int n);
  void (*axpy)(float a, const float* x, float* y, int n);  // y += a * x
  float (*sum_squares)(const float* x, int n);
};

const VecOps& vec_ops(Isa isa);
const VecOps& vec_ops_scalar();
const VecOps& vec_ops_avx2();
const VecOps& vec_ops_avx512();

}  // namespace mlxcpp::kernels
