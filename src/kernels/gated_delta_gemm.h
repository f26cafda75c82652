// C += A B for the chunked delta rule's small matrices (kernels/gated_delta.cpp: 64-token chunks
// against [Dk, Dv] states), instantiated once per ISA with its vector traits V (vec, kLanes,
// set1, load, store, fma): MR rows of C by NV vectors of columns held in registers, A(i, p)
// broadcast from a[i * a_rs + p * a_cs] (so A may be read transposed), B and C row-major. Every C
// element adds its k products in the order p = 0..k-1 whatever block it falls in, so a row's
// result does not depend on m or n. Include only from the per-ISA vector-op files.
#pragma once

#include <cmath>

namespace mlxcpp::kernels::small_gemm {

template <class V, int MR, int NV>
inline void block(int k, const float* a, long a_rs, long a_cs, const float* b, long ldb, float* c, long ldc) {
  using vec = typename V::vec;
  vec acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V::load(c + i * ldc + v * V::kLanes);
  for (int p = 0; p < k; ++p) {
    vec bv[NV];
    const float* bp = b + p * ldb;
    for (int v = 0; v < NV; ++v) bv[v] = V::load(bp + v * V::kLanes);
    const float* ap = a + p * a_cs;
    for (int i = 0; i < MR; ++i) {
      const vec av = V::set1(ap[i * a_rs]);
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fma(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) V::store(c + i * ldc + v * V::kLanes, acc[i][v]);
}

// One panel of NV vectors of columns, all m rows.
template <class V, int MR, int NV>
inline void panel(int m, int k, const float* a, long a_rs, long a_cs, const float* b, long ldb, float* c, long ldc) {
  int i = 0;
  for (; i + MR <= m; i += MR) block<V, MR, NV>(k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc);
  for (; i < m; ++i) block<V, 1, NV>(k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc);
}

template <class V, int MR, int NV>
void gemm_acc(int m, int n, int k, const float* a, long a_rs, long a_cs, const float* b, long ldb, float* c,
              long ldc) {
  constexpr int W = V::kLanes;
  int j = 0;
  for (; j + NV * W <= n; j += NV * W) panel<V, MR, NV>(m, k, a, a_rs, a_cs, b + j, ldb, c + j, ldc);
  for (; j + W <= n; j += W) panel<V, MR, 1>(m, k, a, a_rs, a_cs, b + j, ldb, c + j, ldc);
  for (; j < n; ++j) {  // fewer than kLanes columns left (never with scalar traits)
    for (int i = 0; i < m; ++i) {
      float s = c[i * ldc + j];
      for (int p = 0; p < k; ++p) s = std::fma(a[i * a_rs + p * a_cs], b[p * ldb + j], s);
      c[i * ldc + j] = s;
    }
  }
}

}  // namespace mlxcpp::kernels::small_gemm
