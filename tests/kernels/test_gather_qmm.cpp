// The experts' quantized products (gather_qmm) of the fast path against stock mx.gather_qmm in
// float32: the mixture-of-experts layout mlx-lm's SwitchGLU uses, explicit x indices, every
// bits x group, float32/float16/bfloat16 scales, and both of our GEMV paths.
#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include <tuple>

#include "kernels/kernel_context.h"
#include "kernels/moe_ops.h"
#include "kernels/ops.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::max_abs_diff;
using mlxcpp::test::randn;

namespace {

struct Experts {
  mx::array w, scales, biases;
};

// E experts of [n, k], quantized one by one (mx.quantize on the stacked [E, n, k] does the same).
Experts experts(int e, int n, int k, int bits, int group, uint64_t seed) {
  auto q = mx::quantize(randn({e, n, k}, seed, 0.05f), group, bits);
  mx::eval(q);
  return {q[0], q[1], q[2]};
}

// Relative to the largest reference value. The float GEMM/GEMV: summation order only; the int16
// GEMV (<= 2 rows per expert) rounds x to 1/32767 of its row maximum.
float rel_err(const mx::array& got, const mx::array& ref) {
  return max_abs_diff(got, ref) / std::max(mx::max(mx::abs(ref)).item<float>(), 1e-6f);
}

using Param = std::tuple<int, int>;  // bits, group
class GatherQmm : public ::testing::TestWithParam<Param> {};

TEST_P(GatherQmm, MatchesStockGatherQmm) {
  auto [bits, group] = GetParam();
  const int n = 40, k = group == 32 ? 160 : 256, E = 5;
  auto ex = experts(E, n, k, bits, group, 100 * bits + group);
  // SwitchGLU: x [B, L, 1, 1, k], indices [B, L, top_k] -> out [B, L, top_k, 1, n]; decode (L 1)
  // and a prompt (L 6, experts repeated across tokens).
  struct Case {
    mx::array x;
    std::optional<mx::array> lhs, rhs;
  };
  std::vector<Case> cases;
  for (int L : {1, 6}) {
    std::vector<int> ids;
    for (int i = 0; i < 2 * L * 2; ++i) ids.push_back((i * 3 + L) % E);
    cases.push_back({randn({2, L, 1, 1, k}, L), std::nullopt, mx::array(ids.data(), {2, L, 2}, mx::int32)});
  }
  // Explicit x indices (uint32), 3 rows of x each: x [4, 3, k], pairs (lhs, rhs) broadcast [2, 3].
  cases.push_back({randn({4, 3, k}, 9), mx::array({3u, 0u, 2u}, {1, 3}, mx::uint32),
                   mx::array({4, 4, 1, 0, 2, 4}, {2, 3}, mx::int32)});
  // No indices: every x batch against every expert, broadcast ([E, 1, k] x [E experts]).
  cases.push_back({randn({E, 1, k}, 11), std::nullopt, std::nullopt});
  for (auto dtype : {mx::float32, mx::float16, mx::bfloat16}) {
    auto s = mx::astype(ex.scales, dtype), b = mx::astype(ex.biases, dtype);
    auto s32 = mx::astype(s, mx::float32), b32 = mx::astype(b, mx::float32);
    for (bool int_dot : {false, true}) {
      auto fast = std::make_shared<const KernelContext>(KernelOptions{.threads = 2, .int_dot = int_dot});
      for (size_t c = 0; c < cases.size(); ++c) {
        const auto& cs = cases[c];
        auto ref = mx::gather_qmm(cs.x, ex.w, s32, b32, cs.lhs, cs.rhs, true, group, bits);
        auto got = gather_qmm_t(cs.x, ex.w, s, b, cs.lhs, cs.rhs, group, bits, "affine", fast);
        EXPECT_STREQ(got.primitive().name(), "MlxcppGatherQmm");
        ASSERT_EQ(got.shape(), ref.shape()) << "case " << c;
        EXPECT_LE(rel_err(got, ref), int_dot ? 1e-3f : 2e-5f) << "case " << c << " scales " << dtype << " int_dot " << int_dot;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BitsGroups, GatherQmm,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 8), ::testing::Values(32, 64, 128)),
                         [](const auto& info) {
                           return mlxcpp::test::bits_group_name(std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST(GatherQmmPrimitive, IndicesOutsideTheTablesAreClampedAndOtherCasesStayStock) {
  auto fast = std::make_shared<const KernelContext>();
  auto ex = experts(3, 16, 64, 4, 32, 7);
  auto x = randn({2, 1, 64}, 8);
  // Expert -1 is the last (as take reads it), 9 clamps to the last; x index 5 clamps to 1.
  auto got = gather_qmm_t(x, ex.w, ex.scales, ex.biases, mx::array({0, 5}, {2}, mx::int32),
                          mx::array({-1, 9}, {2}, mx::int32), 32, 4, "affine", fast);
  auto ref = mx::gather_qmm(x, ex.w, ex.scales, ex.biases, mx::array({0, 1}, {2}, mx::int32),
                            mx::array({2, 2}, {2}, mx::int32), true, 32, 4);
  EXPECT_LE(rel_err(got, ref), 1e-3f);
  // Parity mode, or a layout our kernels do not cover (1-bit): stock MLX's op.
  auto rhs = mx::array({1, 2}, {2}, mx::int32);
  EXPECT_STRNE(gather_qmm_t(x, ex.w, ex.scales, ex.biases, std::nullopt, rhs, 32, 4, "affine", nullptr).primitive().name(),
               "MlxcppGatherQmm");
  // Index types our primitive does not read (int16), and an empty x: stock.
  EXPECT_STRNE(gather_qmm_t(x, ex.w, ex.scales, ex.biases, std::nullopt, mx::astype(rhs, mx::int16), 32, 4, "affine", fast)
                   .primitive()
                   .name(),
               "MlxcppGatherQmm");
  // An empty x (stock MLX 0.32.4 stops the process with SIGFPE there), both modes.
  for (const auto& mode_ctx : {fast, std::shared_ptr<const KernelContext>{}}) {
    auto empty = gather_qmm_t(mx::zeros({2, 0, 64}), ex.w, ex.scales, ex.biases, std::nullopt, rhs, 32, 4, "affine", mode_ctx);
    EXPECT_EQ(empty.shape(), (mx::Shape{2, 0, 16}));
    mx::eval(empty);
  }
  auto q1 = mx::quantize(randn({3, 16, 64}, 9, 0.05f), 32, 1);
  EXPECT_STRNE(gather_qmm_t(x, q1[0], q1[1], q1[2], std::nullopt, rhs, 32, 1, "affine", fast).primitive().name(),
               "MlxcppGatherQmm");
}

}  // namespace

namespace {

// The MoE primitive (moe_glu) on a prompt longer than its chunk of tokens: every token's row is
// bit for bit what it is in a shorter call (a chunk boundary, like the batch's other tokens,
// changes no row), and close to the stock composition of gather_qmm, SiLU and the weighted sum.
TEST(MoeGlu, ChunkedPromptRowsEqualShorterCalls) {
  auto fast = std::make_shared<const KernelContext>();
  const int E = 8, top_k = 2, d = 64, h = 32, T = 1100;
  auto layout = [&](int n, int k, uint64_t seed) {
    auto q = experts(E, n, k, 4, 32, seed);
    auto r = experts_layout(q.w, q.scales, q.biases, 4, 32, fast);
    EXPECT_TRUE(r.has_value());
    return std::make_pair(ExpertsLinear{(*r)[0], (*r)[1], (*r)[2], E, n, k, 4, 32}, q);
  };
  auto [gate, gq] = layout(h, d, 11);
  auto [up, uq] = layout(h, d, 12);
  auto [down, dq] = layout(d, h, 13);
  auto x = randn({1, T, d}, 14, 1.f);
  auto inds = mx::astype(mx::random::randint(0, E, {1, T, top_k}, mx::int32, mx::random::key(15)), mx::uint32);
  auto scores = mx::random::uniform({1, T, top_k}, mx::float32, mx::random::key(16));
  mx::eval({x, inds, scores});
  auto all = moe_glu(x, inds, scores, gate, up, down, fast);
  ASSERT_TRUE(all.has_value());
  const int cut = 600;
  auto part = [&](int a, int b) {
    auto r = moe_glu(mx::slice(x, {0, a, 0}, {1, b, d}), mx::slice(inds, {0, a, 0}, {1, b, top_k}),
                     mx::slice(scores, {0, a, 0}, {1, b, top_k}), gate, up, down, fast);
    return *r;
  };
  auto joined = mx::concatenate({part(0, cut), part(cut, T)}, 1);
  EXPECT_EQ(max_abs_diff(*all, joined), 0.f);
  // Stock: per pair gate/up/down through mx.gather_qmm, silu(g) * u, then sum_j scores_j * y_j.
  auto xe = mx::expand_dims(x, {-2, -3});
  auto gq32 = [&](const Experts& q, const mx::array& in) {
    return mx::gather_qmm(in, q.w, q.scales, q.biases, std::nullopt, inds, true, 32, 4);
  };
  auto g = gq32(gq, xe), u = gq32(uq, xe);
  auto y = mx::squeeze(gq32(dq, mx::multiply(mx::multiply(g, mx::sigmoid(g)), u)), -2);
  auto ref = mx::sum(mx::multiply(y, mx::expand_dims(scores, -1)), -2);
  EXPECT_LE(rel_err(*all, ref), 2e-3f);
  // Gemma 4's experts: GELU-tanh(g) * u (mlx's gelu_approx) instead of SiLU.
  auto gelu = moe_glu(x, inds, scores, gate, up, down, fast, GluActivation::kGeluApprox);
  ASSERT_TRUE(gelu.has_value());
  auto t = mx::tanh(mx::multiply(mx::array(0.7978845608f), mx::add(g, mx::multiply(mx::array(0.044715f),
                                                                                    mx::power(g, mx::array(3.f))))));
  auto yg = mx::squeeze(gq32(dq, mx::multiply(mx::multiply(mx::multiply(mx::array(0.5f), g),
                                                           mx::add(mx::array(1.f), t)), u)), -2);
  auto ref_gelu = mx::sum(mx::multiply(yg, mx::expand_dims(scores, -1)), -2);
  EXPECT_LE(rel_err(*gelu, ref_gelu), 2e-3f);
  EXPECT_GT(max_abs_diff(*gelu, *all), 1e-3f);  // a different activation indeed
}

}  // namespace
