// Continuous batching needs each row of a quantized product to come out bit for bit the same
// whatever the number of rows beside it (1-row GEMV, 8-row GEMV, GEMM): a request batched with
// others then generates exactly what it generates alone.
#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include "kernels/kernel_context.h"
#include "kernels/ops.h"
#include "kernels/qmatmul.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::kernels;

namespace {

class RowIndependence : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(RowIndependence, EveryRowEqualsItsOneRowProduct) {
  auto [bits, group, repack] = GetParam();
  const int n = 64, k = 512;
  auto wf = mx::random::normal({n, k}, mx::float32, 0.f, 0.05f, mx::random::key(5));
  auto q = mx::quantize(wf, group, bits);
  auto s16 = mx::astype(q[1], mx::float16), b16 = mx::astype(q[2], mx::float16);
  mx::eval({q[0], s16, b16});
  auto fast = std::make_shared<const KernelContext>();
  mx::array w = q[0], s = s16, b = b16;
  if (repack) {
    auto r = fast_path_layout(q[0], s16, b16, bits, group, fast);
    ASSERT_TRUE(r.has_value());
    w = (*r)[0], s = (*r)[1], b = (*r)[2];
  }
  const int max_m = 40;
  auto x = mx::random::normal({max_m, k}, mx::float32, 0.f, 1.f, mx::random::key(6));
  mx::eval(x);
  std::vector<mx::array> single;
  for (int r = 0; r < max_m; ++r) {
    auto y = quantized_matmul_t(mx::slice(x, {r, 0}, {r + 1, k}), w, s, b, group, bits, "affine", fast);
    mx::eval(y);
    single.push_back(y);
  }
  for (int m : {2, 3, 5, 8}) {
    auto y = quantized_matmul_t(mx::slice(x, {0, 0}, {m, k}), w, s, b, group, bits, "affine", fast);
    mx::eval(y);
    for (int r = 0; r < m; ++r) {
      EXPECT_EQ(test::max_abs_diff(mx::slice(y, {r, 0}, {r + 1, n}), single[r]), 0.f) << "m " << m << " row " << r;
    }
  }
  // Beyond 8 rows the GEMM: its rows do not depend on how many there are.
  auto all = quantized_matmul_t(x, w, s, b, group, bits, "affine", fast);
  mx::eval(all);
  for (int m : {9, 16, 17, 32, 33}) {
    auto y = quantized_matmul_t(mx::slice(x, {40 - m, 0}, {40, k}), w, s, b, group, bits, "affine", fast);
    mx::eval(y);
    EXPECT_EQ(test::max_abs_diff(y, mx::slice(all, {40 - m, 0}, {40, n})), 0.f) << "m " << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RowIndependence,
                         ::testing::Values(std::make_tuple(4, 32, true), std::make_tuple(4, 64, true),
                                           std::make_tuple(8, 32, true), std::make_tuple(4, 32, false),
                                           std::make_tuple(6, 64, false)));

}  // namespace
