// The one-primitive RMSNorm, quantized embedding lookup and log-softmax of the fast path against
// the stock MLX ops they replace, through the ops layer (as model and generation code call them).
#include <gtest/gtest.h>
#include <mlx/fast.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include <limits>
#include <tuple>

#include "kernels/kernel_context.h"
#include "kernels/ops.h"
#include "isas.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::isas;
using mlxcpp::test::max_abs_diff;
using mlxcpp::test::randn;

namespace {

TEST(RmsNormPrimitive, MatchesFastRmsNormOnAnyLayout) {
  auto fast = std::make_shared<const KernelContext>();
  auto w = randn({96}, 2);
  auto x = randn({3, 5, 96}, 1);
  auto xt = mx::transpose(randn({96, 4}, 3));  // [4, 96], a strided view
  for (const auto& in : {x, xt}) {
    auto got = rms_norm(in, w, 1e-5f, fast);
    ASSERT_TRUE(got);
    EXPECT_STREQ(got->primitive().name(), "MlxcppRmsNorm");
    auto ref = mx::fast::rms_norm(in, w, 1e-5f);
    ASSERT_EQ(got->shape(), ref.shape());
    // The same float32 math in another summation order.
    EXPECT_LE(max_abs_diff(*got, ref), 1e-5f * std::max(1.f, mx::max(mx::abs(ref)).item<float>()));
  }
}

TEST(RmsNormPrimitive, NotBuiltWhereItDoesNotApply) {
  auto fast = std::make_shared<const KernelContext>();
  auto w = randn({16}, 2);
  EXPECT_FALSE(rms_norm(randn({2, 16}, 1), w, 1e-5f, nullptr));                      // parity mode
  EXPECT_FALSE(rms_norm(mx::astype(randn({2, 16}, 1), mx::bfloat16), w, 1e-5f, fast));  // not float32
  EXPECT_FALSE(rms_norm(randn({2, 8}, 1), w, 1e-5f, fast));                          // weight size
}

TEST(LogSoftmaxPrimitive, MatchesStockLogSumExpOverTheVocabulary) {
  auto fast = std::make_shared<const KernelContext>(KernelOptions{.threads = 2});
  for (auto shape : {mx::Shape{1, 100}, mx::Shape{2, 49152}, mx::Shape{1, 262144}, mx::Shape{2, 3, 8193}}) {
    auto x = mx::multiply(randn(shape, shape.back()), mx::array(5.f));
    // Masked logits (logits processors write -inf).
    x = mx::where(mx::equal(mx::remainder(mx::arange(shape.back()), mx::array(7)), mx::array(3)),
                  mx::array(-std::numeric_limits<float>::infinity()), x);
    auto got = log_softmax(x, fast);
    ASSERT_TRUE(got);
    EXPECT_STREQ(got->primitive().name(), "MlxcppLogSoftmax");
    auto ref = mx::subtract(x, mx::logsumexp(x, -1, true));
    auto x64 = mx::astype(x, mx::float64);
    auto exact = mx::astype(mx::subtract(x64, mx::logsumexp(x64, -1, true)), mx::float32);  // float64 math
    mx::eval({*got, ref, exact});
    auto finite = mx::isfinite(ref);
    EXPECT_TRUE(mx::array_equal(finite, mx::isfinite(*got)).item<bool>());
    auto err = [&](const mx::array& a) {
      return max_abs_diff(mx::where(finite, a, mx::array(0.f)), mx::where(finite, exact, mx::array(0.f)));
    };
    // Only logsumexp's rounding differs (ours sums in double): no further from the float64 result
    // than stock MLX's float32 sum, and within a few ulps of the largest |log-probability|.
    EXPECT_LE(err(*got), std::max(err(ref), 1e-5f)) << shape.back();
    EXPECT_LE(err(ref), 2e-4f) << shape.back();
  }
  EXPECT_FALSE(log_softmax(randn({1, 8}, 1), nullptr));                              // parity mode
  EXPECT_FALSE(log_softmax(mx::astype(randn({1, 8}, 1), mx::bfloat16), fast));        // not float32
}

// Greedy picks: the same index as mx::argmax on every ISA, with ties (the first wins), -inf,
// +0/-0 maxima, NaNs (the first NaN wins, as in MLX 0.32) and rows shorter than a vector.
TEST(ArgmaxPrimitive, EqualsMlxArgmaxWithTiesInfinitiesZerosAndNans) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<mx::array> cases;
  for (auto shape : {mx::Shape{1, 262144}, mx::Shape{3, 49157}, mx::Shape{2, 3, 33}, mx::Shape{4, 7}}) {
    // Coarse values: many ties for the maximum.
    cases.push_back(mx::round(mx::multiply(randn(shape, shape.back()), mx::array(2.f))));
  }
  cases.push_back(mx::array({-inf, -inf, -inf}, {1, 3}));
  cases.push_back(mx::array({-1.f, -0.f, 0.f, -2.f}, {1, 4}));
  cases.push_back(mx::array({-1.f, 0.f, -0.f, -2.f}, {1, 4}));
  cases.push_back(mx::array({1.f, nan, 3.f, nan, 3.f, 2.f}, {1, 6}));
  cases.push_back(mx::array({nan, 1.f, 5.f, 2.f}, {1, 4}));
  std::vector<float> long_row(100, 1.f);
  long_row[0] = nan, long_row[40] = 7.f, long_row[77] = nan, long_row[90] = 7.f;
  cases.push_back(mx::array(long_row.data(), {1, 100}, mx::float32));
  long_row[0] = 0.f;
  cases.push_back(mx::array(long_row.data(), {1, 100}, mx::float32));
  for (Isa isa : isas()) {
    auto fast = std::make_shared<const KernelContext>(KernelOptions{.isa = isa, .threads = 2});
    for (const auto& x : cases) {
      auto got = argmax_last(x, fast);
      ASSERT_TRUE(got);
      EXPECT_STREQ(got->primitive().name(), "MlxcppArgmax");
      auto ref = mx::argmax(x, -1);
      mx::eval({*got, ref});
      ASSERT_EQ(got->shape(), ref.shape());
      EXPECT_TRUE(mx::array_equal(*got, ref).item<bool>()) << isa_name(isa) << " shape " << x.shape().back();
    }
  }
  EXPECT_FALSE(argmax_last(randn({1, 8}, 1), nullptr));  // parity mode: stock argmax
}

using Param = std::tuple<int, int>;  // bits, group
class QuantizedTake : public ::testing::TestWithParam<Param> {};

TEST_P(QuantizedTake, RowsEqualStockDequantizedGather) {
  auto [bits, group] = GetParam();
  auto fast = std::make_shared<const KernelContext>();
  const int rows = 50, d = 384;
  auto q = mx::quantize(randn({rows, d}, bits * 100 + group, 0.05f), group, bits);
  mx::eval(q);
  std::vector<int> id_values{0, 49, 7, 7, -1, 23};  // -1: the last row, as take reads it
  auto ids = mx::array(id_values.data(), {2, 3}, mx::int32);
  auto wrapped = mx::where(mx::less(ids, mx::array(0)), mx::add(ids, mx::array(rows)), ids);
  for (auto dtype : {mx::float32, mx::float16, mx::bfloat16}) {
    auto s = mx::astype(q[1], dtype), b = mx::astype(q[2], dtype);
    // Stock: gather the packed rows and their scales, dequantize in float32.
    auto ref = mx::dequantize(mx::take(q[0], wrapped, 0), mx::astype(mx::take(s, wrapped, 0), mx::float32),
                              mx::astype(mx::take(b, wrapped, 0), mx::float32), group, bits);
    for (const auto& in : {ids, mx::transpose(mx::transpose(ids)), mx::astype(ids, mx::int64)}) {
      auto got = quantized_take(q[0], s, b, in, group, bits, "affine", fast);
      ASSERT_TRUE(got);
      EXPECT_STREQ(got->primitive().name(), "MlxcppQuantizedTake");
      ASSERT_EQ(got->shape(), ref.shape());
      EXPECT_EQ(max_abs_diff(*got, ref), 0.f) << "scales " << dtype;
    }
    // A strided view of ids (every other column of a wider array).
    auto wide = mx::array(std::vector<int>{0, 9, 49, 9, 7, 9, 3, 9, 2, 9, 1, 9}.data(), {2, 6}, mx::int32);
    auto strided = mx::slice(wide, {0, 0}, {2, 6}, {1, 2});
    auto got = quantized_take(q[0], s, b, strided, group, bits, "affine", fast);
    auto ref2 = mx::dequantize(mx::take(q[0], strided, 0), mx::astype(mx::take(s, strided, 0), mx::float32),
                               mx::astype(mx::take(b, strided, 0), mx::float32), group, bits);
    EXPECT_EQ(max_abs_diff(*got, ref2), 0.f) << "strided ids, scales " << dtype;
  }
}

INSTANTIATE_TEST_SUITE_P(BitsGroups, QuantizedTake,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 8), ::testing::Values(32, 64, 128)),
                         [](const auto& info) {
                           return mlxcpp::test::bits_group_name(std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST(QuantizedTakePrimitive, OutOfRangeIdsReadInsideTheTable) {
  auto fast = std::make_shared<const KernelContext>();
  auto q = mx::quantize(randn({4, 64}, 5), 64, 4);
  std::vector<int> bad{4, 1000, -1000};
  auto got = quantized_take(q[0], q[1], q[2], mx::array(bad.data(), {3}, mx::int32), 64, 4, "affine", fast);
  ASSERT_TRUE(got);
  auto ref = mx::dequantize(q[0], q[1], q[2], 64, 4);
  // Clamped to the last / first row.
  EXPECT_EQ(max_abs_diff(mx::slice(*got, {0, 0}, {2, 64}), mx::repeat(mx::slice(ref, {3, 0}, {4, 64}), 2, 0)), 0.f);
  EXPECT_EQ(max_abs_diff(mx::slice(*got, {2, 0}, {3, 64}), mx::slice(ref, {0, 0}, {1, 64})), 0.f);
}

TEST(QuantizedTakePrimitive, NotBuiltWhereItDoesNotApply) {
  auto fast = std::make_shared<const KernelContext>();
  auto q = mx::quantize(randn({4, 64}, 5), 64, 4);
  auto ids = mx::array({0, 1});
  EXPECT_FALSE(quantized_take(q[0], q[1], q[2], ids, 64, 4, "affine", nullptr));             // parity mode
  EXPECT_FALSE(quantized_take(q[0], q[1], std::nullopt, ids, 64, 4, "affine", fast));       // no biases
  EXPECT_FALSE(quantized_take(q[0], q[1], q[2], mx::array({0.f}), 64, 4, "affine", fast));  // float ids
}

}  // namespace
