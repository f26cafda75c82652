// mxfp4 weights as affine 5- and 8-bit ones (kernels/microscaled.h): every value equal, whatever the
// scale exponent (tiny and large groups, zeros, both signs), and the result symmetric (biases
// -2^(bits-1) * scale), the form the integer kernels store without biases.
#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include "kernels/microscaled.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::randn;

namespace {

TEST(Mxfp4AsAffine, SameValuesExactly) {
  // Rows of very different magnitudes: the e8m0 exponents span a wide range.
  auto x = mx::multiply(randn({6, 128}, 4), mx::reshape(mx::array({1e-30f, 1e-6f, 1.f, 3.f, 1e4f, 0.f}), {6, 1}));
  auto q = mx::quantize(x, 32, 4, "mxfp4");
  ASSERT_EQ(q.size(), 2u);
  auto want = mx::dequantize(q[0], q[1], std::nullopt, 32, 4, "mxfp4", std::nullopt, mx::float32);
  for (int bits : {5, 8}) {
    auto a = mxfp4_as_affine(q[0], q[1], bits);
    ASSERT_TRUE(a);
    auto got = mx::dequantize((*a)[0], (*a)[1], (*a)[2], 32, bits, "affine", std::nullopt, mx::float32);
    EXPECT_TRUE(mx::array_equal(got, want).item<bool>()) << bits;
    const float zero = static_cast<float>(1 << (bits - 1));
    EXPECT_TRUE(mx::array_equal((*a)[2], mx::multiply((*a)[1], mx::array(-zero))).item<bool>()) << bits;
  }
}

TEST(Mxfp4AsAffine, OtherShapesDeclined) {
  auto q = mx::quantize(randn({2, 64}, 1), 32, 4, "mxfp4");
  EXPECT_FALSE(mxfp4_as_affine(q[1], q[1], 5));                            // not uint32 words
  EXPECT_FALSE(mxfp4_as_affine(q[0], mx::astype(q[1], mx::float32), 5));  // not e8m0 scales
  EXPECT_FALSE(mxfp4_as_affine(mx::reshape(q[0], {-1}), q[1], 5));       // not a matrix
  EXPECT_FALSE(mxfp4_as_affine(q[0], q[1], 4));                           // 25 levels need 5 bits
}

}  // namespace
