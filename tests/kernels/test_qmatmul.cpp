// Our quantized matmul (every ISA path, bits, group and odd shapes) against stock MLX in float32.
#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include <tuple>

#include "core/errors.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_context.h"
#include "kernels/ops.h"
#include "kernels/qmatmul.h"
#include "isas.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::kernels;
using mlxcpp::test::isas;

namespace {

// Relative to the largest reference value: a different summation order, nothing more.
constexpr float kRelTol = 2e-5f;

struct Quantized {
  mx::array x, w, scales, biases;
};

Quantized make(int m, int n, int k, int bits, int group, uint64_t seed) {
  auto x = mx::random::normal({m, k}, mx::float32, 0.f, 1.f, mx::random::key(seed));
  auto wf = mx::random::normal({n, k}, mx::float32, 0.f, 0.05f, mx::random::key(seed + 1));
  auto q = mx::quantize(wf, group, bits);
  mx::eval({x, q[0], q[1], q[2]});
  return {x, q[0], q[1], q[2]};
}

float rel_err(const mx::array& got, const mx::array& ref) {
  float scale = mx::max(mx::abs(ref)).item<float>();
  return test::max_abs_diff(got, ref) / std::max(scale, 1e-6f);
}

// A matrix's copy in the fast path's kRows8 layout (what a model loads in fast mode).
struct Rows8Copy {
  std::vector<uint32_t> words;
  QMatrixView view;
};
Rows8Copy rows8_copy(const QMatrixView& mlx, bool sym = false) {
  Rows8Copy c;
  c.words.resize(static_cast<size_t>(mlx.n) * rows8_row_words(mlx.k, mlx.bits, mlx.group, mlx.stype, sym));
  repack_rows8(mlx, c.words.data(), 0, -1, sym);
  c.view = {c.words.data(), nullptr, nullptr, mlx.n, mlx.k, mlx.bits, mlx.group, mlx.stype, QLayout::kRows8, sym};
  return c;
}


using Param = std::tuple<int, int>;  // bits, group

class QMatmul : public ::testing::TestWithParam<Param> {};

TEST_P(QMatmul, EveryIsaMatchesStockMlx) {
  auto [bits, group] = GetParam();
  // Odd sizes: N not a multiple of 8 or of the task split, K a few groups (not a multiple of 8 or 2
  // blocks of 32), M across GEMV/GEMM (the integer GEMV takes x rows 4, 2 and 1 at a time: 7 is
  // all three).
  for (auto [m, n, k] : std::vector<std::tuple<int, int, int>>{
           {1, 1, 128}, {1, 67, 384}, {3, 130, 640}, {8, 256, 256}, {33, 77, 512}, {5, 1000, 128},
           {2, 21, 576}, {1, 9, 160}, {1, 37, 576}, {7, 45, 192}, {9, 20, 128}, {64, 200, 256},
           {1, 64, 576}, {6, 48, 384}}) {
    if (k % group != 0) continue;
    auto q = make(m, n, k, bits, group, 1000 * bits + group + m + n);
    // Scales/biases stored as float32, float16 and bfloat16 (16-bit ones read in place); the
    // reference dequantizes with the same (rounded) values in float32.
    for (auto [dtype, stype] : std::vector<std::pair<mx::Dtype, ScaleType>>{
             {mx::float32, ScaleType::kF32}, {mx::float16, ScaleType::kF16}, {mx::bfloat16, ScaleType::kBF16}}) {
      auto s = mx::astype(q.scales, dtype), b = mx::astype(q.biases, dtype);
      auto s32 = mx::astype(s, mx::float32), b32 = mx::astype(b, mx::float32);
      auto ref = mx::quantized_matmul(q.x, q.w, s32, b32, true, group, bits);
      // The integer-dot GEMV rounds x to int16 levels of step d = max|x| / 32767 (per row):
      // each product is off by at most |w| * d / 2, so |got - ref| <= d / 2 * sum_k |w[n, k]|.
      // The GEMM's step is per group g (max over the group): <= sum_g d_g / 2 * sum_g |w[n, k]|.
      auto d = mx::divide(mx::max(mx::abs(q.x), -1, true), mx::array(32767.f));
      auto wabs = mx::abs(mx::dequantize(q.w, s32, b32, group, bits));
      auto i16_bound = mx::multiply(mx::multiply(d, mx::array(0.5f)), mx::expand_dims(mx::sum(wabs, -1), 0));  // [m, n]
      auto dg = mx::divide(mx::max(mx::abs(mx::reshape(q.x, {m, k / group, group})), -1), mx::array(32767.f));
      auto wg = mx::sum(mx::reshape(wabs, {n, k / group, group}), -1);
      auto group_bound = mx::matmul(mx::multiply(dg, mx::array(0.5f)), mx::transpose(wg));  // [m, n]
      mx::eval({ref, s, b, i16_bound, group_bound});
      const float scale = std::max(mx::max(mx::abs(ref)).item<float>(), 1e-6f);
      for (Isa isa : isas()) {
        for (int threads : {1, 2}) {
          for (bool int_dot : {true, false}) {
            KernelContext ctx(KernelOptions{isa, threads, false, int_dot});
            std::vector<float> out(static_cast<size_t>(m) * n, -1.f);
            QMatrixView view{q.w.data<uint32_t>(), s.data<void>(), b.data<void>(), n, k, bits, group, stype};
            qmatmul(ctx, q.x.data<float>(), m, view, out.data());
            auto got = mx::array(out.data(), {m, n}, mx::float32);
            bool group_steps = false;
            const bool i16 = qmatmul_int16(ctx, bits, m, &group_steps);
            // Beyond the stated rounding bound, only float summation-order differences.
            const auto& bound = group_steps ? group_bound : i16_bound;
            auto excess = i16 ? mx::max(mx::subtract(mx::abs(mx::subtract(got, ref)), bound)).item<float>()
                              : test::max_abs_diff(got, ref);
            EXPECT_LE(excess / scale, kRelTol) << isa_name(isa) << " threads=" << threads << " int_dot=" << int_dot
                                               << " m=" << m << " n=" << n << " k=" << k << " scales=" << dtype;
            if (!rows8_supported(bits, group, n)) continue;
            // The same matrix in the fast path's kRows8 layout, with the same bounds.
            const Rows8Copy packed = rows8_copy(view);
            const QMatrixView& view8 = packed.view;
            std::vector<float> out8(static_cast<size_t>(m) * n, -1.f);
            qmatmul(ctx, q.x.data<float>(), m, view8, out8.data());
            auto got8 = mx::array(out8.data(), {m, n}, mx::float32);
            const bool i16r = qmatmul_int16(ctx, bits, m, &group_steps, QLayout::kRows8);
            const auto& bound8 = group_steps ? group_bound : i16_bound;
            auto excess8 = i16r ? mx::max(mx::subtract(mx::abs(mx::subtract(got8, ref)), bound8)).item<float>()
                                : test::max_abs_diff(got8, ref);
            EXPECT_LE(excess8 / scale, kRelTol) << "rows8 " << isa_name(isa) << " threads=" << threads << " m=" << m
                                                << " n=" << n << " k=" << k << " scales=" << dtype;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BitsGroups, QMatmul,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 8), ::testing::Values(32, 64, 128)),
                         [](const auto& info) {
                           return test::bits_group_name(std::get<0>(info.param), std::get<1>(info.param));
                         });

// The kRows8 layout holds exactly the MLX layout's values: every row dequantizes bit for bit alike.
TEST(Rows8, RepackKeepsEveryValue) {
  for (int bits : {4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (auto [dtype, stype] : std::vector<std::pair<mx::Dtype, ScaleType>>{
               {mx::float32, ScaleType::kF32}, {mx::float16, ScaleType::kF16}, {mx::bfloat16, ScaleType::kBF16}}) {
        const int n = 24, k = 384;
        auto q = make(1, n, k, bits, group, 77 + bits + group);
        auto s = mx::astype(q.scales, dtype), b = mx::astype(q.biases, dtype);
        mx::eval({s, b});
        const QMatrixView view{q.w.data<uint32_t>(), s.data<void>(), b.data<void>(), n, k, bits, group, stype};
        ASSERT_EQ(rows8_k(rows8_row_words(k, bits, group, stype), bits, group, stype), k);
        const Rows8Copy packed = rows8_copy(view);
        const QMatrixView& view8 = packed.view;
        std::vector<float> a(k), r(k);
        for (int row = 0; row < n; ++row) {
          dequantize_row(view, row, a.data());
          dequantize_row(view8, row, r.data());
          ASSERT_EQ(a, r) << "bits=" << bits << " group=" << group << " row=" << row << " scales=" << dtype;
        }
      }
}

// A batched decode step's GEMV gives each row exactly what that row gets alone, whatever the
// number of rows (x rows a pass, chains per row, 8 or 16 W rows a vector all vary with it) and
// however the pool splits the W rows (n = 136: 17 blocks of 8 rows, tasks of 4 or 2 blocks and
// a last one of 1).
TEST(Rows8, DecodeRowsEqualTheirSoloProducts) {
  const int n = 136, k = 256, max_m = 12;
  for (int bits : {4, 5, 6, 8})
    for (auto [dtype, stype] : std::vector<std::pair<mx::Dtype, ScaleType>>{{mx::float32, ScaleType::kF32},
                                                                              {mx::float16, ScaleType::kF16}}) {
      auto q = make(max_m, n, k, bits, 32, 500 + bits);
      auto s = mx::astype(q.scales, dtype), b = mx::astype(q.biases, dtype);
      mx::eval({s, b});
      const QMatrixView view{q.w.data<uint32_t>(), s.data<void>(), b.data<void>(), n, k, bits, 32, stype};
      const Rows8Copy packed = rows8_copy(view);
      const QMatrixView& view8 = packed.view;
      for (Isa isa : isas()) {
        for (int threads : {1, 2}) {
          KernelContext ctx(KernelOptions{isa, threads});
          std::vector<float> solo(static_cast<size_t>(max_m) * n);
          for (int r = 0; r < max_m; ++r)
            qmatmul(ctx, q.x.data<float>() + static_cast<long>(r) * k, 1, view8, solo.data() + static_cast<long>(r) * n, true);
          for (int m = 2; m <= max_m; ++m) {
            std::vector<float> got(static_cast<size_t>(m) * n, -1.f);
            qmatmul(ctx, q.x.data<float>(), m, view8, got.data(), true);
            for (long i = 0; i < static_cast<long>(m) * n; ++i) {
              ASSERT_EQ(got[i], solo[i]) << isa_name(isa) << " threads=" << threads << " bits=" << bits
                                         << " scales=" << dtype << " m=" << m << " row=" << i / n << " col=" << i % n;
            }
          }
        }
      }
    }
}

// A symmetric matrix (every bias -2^(bits-1) x its scale: GGUF's Q4_0 / Q8_0 converted) in the
// kRows8 layout without biases gives exactly what the layout with them gives, on every ISA,
// kernel (decode GEMV, few-rows GEMV, GEMM) and scale type; fast_path_layout finds such
// matrices (an empty int8 biases array marks them) and the ops read them.
TEST(Rows8, SymmetricMatricesStoreNoBiases) {
  const int n = 72, k = 256;
  for (int bits : {4, 5, 6, 8})
    for (auto [dtype, stype] : std::vector<std::pair<mx::Dtype, ScaleType>>{
             {mx::float32, ScaleType::kF32}, {mx::float16, ScaleType::kF16}, {mx::bfloat16, ScaleType::kBF16}}) {
      auto q = make(40, n, k, bits, 32, 700 + bits);
      auto s = mx::astype(q.scales, dtype);
      auto b = mx::multiply(s, mx::array(-static_cast<float>(1 << (bits - 1)), dtype));  // exact: a power of two
      mx::eval({s, b});
      const QMatrixView view{q.w.data<uint32_t>(), s.data<void>(), b.data<void>(), n, k, bits, 32, stype};
      const Rows8Copy full = rows8_copy(view), sym = rows8_copy(view, true);
      EXPECT_EQ(sym.words.size() * rows8_group_bytes(bits, 32, stype), full.words.size() * rows8_group_bytes(bits, 32, stype, true));
      std::vector<float> r1(k), r2(k);
      for (long r : {0L, 9L, 71L}) {
        dequantize_row(full.view, r, r1.data());
        dequantize_row(sym.view, r, r2.data());
        ASSERT_EQ(r1, r2) << bits << " row " << r;
      }
      for (Isa isa : isas())
        for (int m : {1, 3, 8, 12, 40})
          for (bool decode : {false, true}) {
            KernelContext ctx(KernelOptions{isa, 2});
            std::vector<float> a(static_cast<size_t>(m) * n), c(static_cast<size_t>(m) * n, -1.f);
            qmatmul(ctx, q.x.data<float>(), m, full.view, a.data(), decode);
            qmatmul(ctx, q.x.data<float>(), m, sym.view, c.data(), decode);
            ASSERT_EQ(a, c) << isa_name(isa) << " bits=" << bits << " scales=" << dtype << " m=" << m << " decode=" << decode;
          }
      auto fast = std::make_shared<const KernelContext>();
      if (rows8_planes(bits) > 0 && !(fast->isa() == Isa::kAvx512 && has_avx512_vnni())) continue;
      auto r = fast_path_layout(q.w, s, b, bits, 32, fast);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ((*r)[2].dtype(), mx::int8);
      EXPECT_EQ((*r)[0].shape(1), rows8_row_words(k, bits, 32, stype, true));
      auto got = quantized_matmul_t(q.x, (*r)[0], (*r)[1], (*r)[2], 32, bits, "affine", fast);
      auto same = quantized_matmul_t(q.x, q.w, s, b, 32, bits, "affine", fast);
      EXPECT_LE(rel_err(got, same), 1e-5f) << bits;
      // One group a row (4-bit g32: 144 bytes a block, 18 a row): not whole words, biases kept.
      auto q1 = make(1, 16, 32, bits, 32, 800 + bits);
      auto s1 = mx::astype(q1.scales, dtype);
      auto b1 = mx::multiply(s1, mx::array(-static_cast<float>(1 << (bits - 1)), dtype));
      if (auto one = fast_path_layout(q1.w, s1, b1, bits, 32, fast)) {
        EXPECT_EQ((*one)[2].dtype() == mx::int8,
                  rows8_group_bytes(bits, 32, stype, true) % 32 == 0) << bits;
      }
      // An asymmetric matrix keeps its biases.
      auto a = fast_path_layout(q.w, s, mx::add(b, mx::array(0.5f, dtype)), bits, 32, fast);
      ASSERT_TRUE(a.has_value());
      EXPECT_EQ((*a)[2].dtype(), dtype);
    }
}

// Load time: fast_path_layout repacks exactly where the integer kernels run and cover the
// matrix; the repacked arrays give the MLX layout's product through the primitive and refuse
// stock ops with an error.
TEST(Rows8, FastPathLayoutWhereTheIntegerKernelsRun) {
  auto fast = std::make_shared<const KernelContext>();
  // 5/6-bit: only where the AVX-512 VNNI GEMV reads them (fast_path_layout).
  const bool planes = fast->isa() == Isa::kAvx512 && has_avx512_vnni();
  for (int bits : {4, 5, 6, 8}) {
    auto q = make(3, 64, 256, bits, 32, 21 + bits);
    if (rows8_planes(bits) > 0 && !planes) {
      EXPECT_FALSE(fast_path_layout(q.w, mx::astype(q.scales, mx::float16), mx::astype(q.biases, mx::float16), bits, 32,
                                    fast));
      continue;
    }
    auto s16 = mx::astype(q.scales, mx::float16), b16 = mx::astype(q.biases, mx::float16);
    auto r = fast_path_layout(q.w, s16, b16, bits, 32, fast);
    ASSERT_TRUE(r.has_value()) << bits;
    EXPECT_EQ((*r)[0].shape(), (mx::Shape{64, rows8_row_words(256, bits, 32, ScaleType::kF16)}));
    EXPECT_EQ((*r)[1].size(), 0u);
    EXPECT_EQ((*r)[1].dtype(), mx::float16);
    auto got = quantized_matmul_t(q.x, (*r)[0], (*r)[1], (*r)[2], 32, bits, "affine", fast);
    auto same = quantized_matmul_t(q.x, q.w, s16, b16, 32, bits, "affine", fast);  // MLX layout, same kernels' rounding
    EXPECT_LE(rel_err(got, same), 1e-5f) << bits;
    EXPECT_THROW(quantized_matmul_t(q.x, (*r)[0], (*r)[1], (*r)[2], 32, bits, "affine", nullptr), mlxcpp::Error);
    auto ids = mx::array({3, 0, 63}, {3}, mx::int32);
    auto rows = quantized_take((*r)[0], (*r)[1], (*r)[2], ids, 32, bits, "affine", fast);
    ASSERT_TRUE(rows.has_value());
    auto ref_rows =
        mx::take(mx::dequantize(q.w, mx::astype(s16, mx::float32), mx::astype(b16, mx::float32), 32, bits), ids, 0);
    EXPECT_EQ(test::max_abs_diff(*rows, ref_rows), 0.f) << bits;
    EXPECT_THROW(quantized_take((*r)[0], (*r)[1], (*r)[2], ids, 32, bits, "affine", nullptr), mlxcpp::Error);
  }
  // Not repacked: 3 bits, rows not a multiple of 8, --mlx-layout, --f32-dot, the scalar ISA, parity.
  auto q = make(3, 64, 256, 4, 32, 21);
  auto s16 = mx::astype(q.scales, mx::float16), b16 = mx::astype(q.biases, mx::float16);
  auto q3 = make(1, 64, 256, 3, 32, 22);
  EXPECT_FALSE(fast_path_layout(q3.w, mx::astype(q3.scales, mx::float16), mx::astype(q3.biases, mx::float16), 3, 32, fast));
  auto q60 = make(1, 60, 256, 4, 32, 23);
  EXPECT_FALSE(fast_path_layout(q60.w, q60.scales, q60.biases, 4, 32, fast));
  for (auto opts : {KernelOptions{.repack = false}, KernelOptions{.int_dot = false}, KernelOptions{.isa = Isa::kScalar}})
    EXPECT_FALSE(fast_path_layout(q.w, s16, b16, 4, 32, std::make_shared<const KernelContext>(opts)));
  auto q5 = make(1, 64, 256, 5, 32, 24);
  EXPECT_FALSE(fast_path_layout(q5.w, mx::astype(q5.scales, mx::float16), mx::astype(q5.biases, mx::float16), 5, 32,
                                std::make_shared<const KernelContext>(KernelOptions{.isa = Isa::kAvx2})));
  EXPECT_FALSE(fast_path_layout(q.w, s16, b16, 4, 32, nullptr));
}

// Through the ops layer as an MLX primitive: batched 3-D input, strided (transposed) and bf16 x.
TEST(QMatmulPrimitive, GraphInputsOfAnyLayout) {
  auto fast = std::make_shared<const KernelContext>(KernelOptions{.int_dot = false});  // float products: tight bound
  auto q = make(24, 96, 256, 4, 64, 7);
  auto x3 = mx::reshape(q.x, {2, 12, 256});
  auto xt = mx::transpose(mx::reshape(q.x, {24, 256}), {0, 1});  // a view
  auto xs = mx::slice(mx::reshape(q.x, {12, 512}), {0, 0}, {12, 512}, {1, 2});  // strided columns
  for (const auto& x : {x3, xt, xs, mx::astype(x3, mx::bfloat16)}) {
    auto ref = mx::quantized_matmul(mx::astype(x, mx::float32), q.w, q.scales, q.biases, true, 64, 4);
    auto got = quantized_matmul_t(x, q.w, q.scales, q.biases, 64, 4, "affine", fast);
    ASSERT_EQ(got.shape(), ref.shape());
    EXPECT_LE(rel_err(got, ref), kRelTol);
  }
}

TEST(QMatmulPrimitive, SixteenBitScalesAreReadInPlace) {
  auto fast = std::make_shared<const KernelContext>(KernelOptions{.int_dot = false});  // float products: tight bound
  auto q = make(2, 16, 64, 4, 64, 9);
  for (auto dtype : {mx::float16, mx::bfloat16}) {
    auto s16 = mx::astype(q.scales, dtype), b16 = mx::astype(q.biases, dtype);
    auto got = quantized_matmul_t(q.x, q.w, s16, b16, 64, 4, "affine", fast);
    ASSERT_TRUE(got.has_primitive());
    EXPECT_STREQ(got.primitive().name(), "MlxcppQuantizedMatmul");
    auto ref = mx::quantized_matmul(q.x, q.w, mx::astype(s16, mx::float32), mx::astype(b16, mx::float32), true, 64, 4);
    EXPECT_LE(rel_err(got, ref), kRelTol) << dtype;
  }
}

TEST(QMatmulPrimitive, FallsBackToStockWhereNotCovered) {
  auto fast = std::make_shared<const KernelContext>();
  auto q = make(2, 16, 64, 4, 64, 9);
  // Scales and biases of different types are not ours: the stock op runs on float32 copies
  // (the same result as MLX on those, exactly).
  auto s16 = mx::astype(q.scales, mx::bfloat16), b16 = mx::astype(q.biases, mx::float16);
  auto got = quantized_matmul_t(q.x, q.w, s16, b16, 64, 4, "affine", fast);
  ASSERT_TRUE(got.has_primitive());
  EXPECT_STRNE(got.primitive().name(), "MlxcppQuantizedMatmul");
  auto ref = mx::quantized_matmul(q.x, q.w, mx::astype(s16, mx::float32), mx::astype(b16, mx::float32), true, 64, 4);
  EXPECT_EQ(test::max_abs_diff(got, ref), 0.f);
}

TEST(KernelScales, KeepsSixteenBitAndNarrowsExactFloat32) {
  // 13 rows: the vector loops' tails run too.
  auto q = make(2, 13, 64, 4, 64, 11);
  // float32 values that are float16 values (GGUF block scales) narrow exactly.
  auto s = mx::astype(mx::astype(q.scales, mx::float16), mx::float32);
  auto b = mx::astype(mx::astype(q.biases, mx::float16), mx::float32);
  mx::eval({s, b});
  for (Isa isa : isas()) {
    SCOPED_TRACE(isa_name(isa));
    KernelContext ctx(KernelOptions{isa, 1});
    auto kept = kernel_scales(s, b, ctx);
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(kept->first.dtype(), mx::float16);
    EXPECT_EQ(kept->second.dtype(), mx::float16);
    EXPECT_EQ(test::max_abs_diff(mx::astype(kept->first, mx::float32), s), 0.f);
    EXPECT_EQ(test::max_abs_diff(mx::astype(kept->second, mx::float32), b), 0.f);
    // One inexact value anywhere (the first, one in the vector body, the last) keeps float32.
    for (int at : {0, 5, 12}) {
      std::vector<float> bv(b.data<float>(), b.data<float>() + b.size());
      bv[at] += 1e-6f * std::max(1.f, std::abs(bv[at]));
      mx::array b2(bv.data(), b.shape(), mx::float32);
      EXPECT_FALSE(kernel_scales(s, b2, ctx).has_value()) << "inexact bias at " << at;
      std::vector<float> sv(s.data<float>(), s.data<float>() + s.size());
      sv[at] = std::nanf("");
      EXPECT_FALSE(kernel_scales(mx::array(sv.data(), s.shape(), mx::float32), b, ctx).has_value()) << "NaN at " << at;
    }
    // General float32 scales stay float32 (nullopt); 16-bit ones are kept as they are.
    EXPECT_FALSE(kernel_scales(q.scales, q.biases, ctx).has_value());
    auto bf = kernel_scales(mx::astype(q.scales, mx::bfloat16), mx::astype(q.biases, mx::bfloat16), ctx);
    ASSERT_TRUE(bf.has_value());
    EXPECT_EQ(bf->first.dtype(), mx::bfloat16);
    EXPECT_FALSE(kernel_scales(mx::astype(q.scales, mx::bfloat16), q.biases, ctx).has_value());
  }
}

}  // namespace
