// AVX2 kernels (this file is compiled with -mavx2 -mfma -mf16c): the float GEMV/GEMM table.
#include "kernels/avx2_traits.h"

namespace mlxcpp::kernels {

QKernel qmatmul_kernel_avx2(int bits, ScaleType st) {
  return with_scale_type<simd::KernelTable<avx2::Avx2>::For>(st, bits);
}

}  // namespace mlxcpp::kernels
