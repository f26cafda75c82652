// The row kernels inside our block primitives against the stock MLX ops they replace, on every
// ISA this CPU has (scalar and AVX2 are forced where AVX-512 exists).
#include <gtest/gtest.h>
#include <mlx/fast.h>
#include <mlx/mlx.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/block_kernels.h"
#include "kernels/kernel_context.h"
#include "isas.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::isas;
using mlxcpp::test::max_abs_diff;
using mlxcpp::test::randn;

namespace {


mx::array from(const std::vector<float>& v, mx::Shape shape) { return mx::array(v.data(), std::move(shape), mx::float32); }

TEST(BlockKernels, RmsNormMatchesFastRmsNorm) {
  for (int d : {64, 576, 100}) {
    auto x = randn({7, d}, d), w = randn({d}, d + 1);
    auto ref = mx::fast::rms_norm(x, w, 1e-5f);
    for (Isa isa : isas()) {
      std::vector<float> out(7 * d);
      rms_norm_rows(vec_ops(isa), x.data<float>(), w.data<float>(), 1e-5f, 7, d, out.data());
      EXPECT_LE(max_abs_diff(from(out, {7, d}), ref), 1e-5f) << isa_name(isa) << " d=" << d;
    }
  }
}

TEST(BlockKernels, RopeMatchesFastRope) {
  const int L = 5, heads = 3, hd = 64;
  for (bool traditional : {false, true})
    for (int dims : {64, 32})  // full and partial rotary
      for (float scale : {1.0f, 0.5f}) {
        auto x = randn({1, heads, L, hd}, dims + traditional);  // MLX layout [B, H, L, D]
        const int offset = 11;
        const double base = 10000.0;
        auto ref = mx::fast::rope(x, dims, traditional, static_cast<float>(base), scale, offset);
        RopeSpec spec{dims, traditional, scale, 1.f, {}};
        for (int i = 0; i < dims / 2; ++i) spec.inv_freq.push_back(static_cast<float>(std::pow(base, -2.0 * i / dims)));
        auto rows = mx::transpose(x, {0, 2, 1, 3});  // our layout [L, heads, hd]
        rows = mx::contiguous(rows);
        mx::eval(rows);
        std::vector<float> buf(rows.data<float>(), rows.data<float>() + rows.size());
        rope_rows(spec, buf.data(), L, heads, hd, offset);
        auto got = mx::transpose(from(buf, {1, L, heads, hd}), {0, 2, 1, 3});
        EXPECT_LE(max_abs_diff(got, ref), 2e-5f) << "traditional=" << traditional << " dims=" << dims << " scale=" << scale;
      }
}

// q [L, heads, hd] against a cache [kv_heads, cap, hd] holding offset + L keys.
// Head dims: 64 (SmolLM2), 256 (Gemma 3: several passes over the value rows), 40 (a partial
// pass) and 20 (not a multiple of 8: the plain path). A decode row attends all query heads of
// a kv head at once (3 per kv head: a pass of two rows and one of one; 4 of a single kv head:
// Gemma 3 270M), its keys split into slices over the pool and merged once there are enough
// (window 300 too); few keys and fewer kv heads than threads: one task per query head.
TEST(BlockKernels, AttentionMatchesSdpaWithGqaCausalAndWindow) {
  for (auto [heads, kv_heads] : std::vector<std::pair<int, int>>{{6, 2}, {4, 1}})
  for (auto [offset, L, hd] : std::vector<std::tuple<int, int, int>>{{0, 1, 64},
                                                                      {70, 1, 64},
                                                                      {45, 1, 256},
                                                                      {0, 9, 64},
                                                                      {20, 1, 64},
                                                                      {13, 17, 64},
                                                                      {30, 1, 256},
                                                                      {5, 3, 40},
                                                                      {22, 2, 20},
                                                                      {700, 1, 64},
                                                                      {611, 1, 256},
                                                                      {530, 1, 20},
                                                                      {3, 21, 256},
                                                                      {290, 40, 64}}) {
    for (std::optional<int> window : {std::optional<int>{}, std::optional<int>{8}, std::optional<int>{300}}) {
      const int S = offset + L, cap = S + 5;
      auto q = randn({1, heads, L, hd}, 100 + S), k = randn({1, kv_heads, S, hd}, 200 + S), v = randn({1, kv_heads, S, hd}, 300 + S);
      // Reference: explicit boolean mask (query i at position offset + i sees keys j <= pos, j > pos - window).
      auto qpos = mx::reshape(mx::add(mx::arange(L), mx::array(offset)), {L, 1});
      auto kpos = mx::reshape(mx::arange(S), {1, S});
      auto mask = mx::less_equal(kpos, qpos);
      if (window) mask = mx::logical_and(mask, mx::greater(kpos, mx::subtract(qpos, mx::array(*window))));
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      auto ref = mx::fast::scaled_dot_product_attention(q, k, v, scale, "", mask);
      // Our layouts.
      auto qr = mx::contiguous(mx::transpose(q, {0, 2, 1, 3}));
      auto pad = [&](const mx::array& a) { return mx::contiguous(mx::pad(a, {{0, 0}, {0, 0}, {0, cap - S}, {0, 0}})); };
      auto kc = pad(k), vc = pad(v);
      // A float16 cache, and its rows rounded back to float32.
      auto kh = mx::astype(kc, mx::float16), vh = mx::astype(vc, mx::float16);
      auto kr = mx::astype(kh, mx::float32), vr = mx::astype(vh, mx::float32);
      mx::eval({qr, kc, vc, ref, kh, vh, kr, vr});
      for (Isa isa : isas()) {
        KernelContext ctx(KernelOptions{isa, 2});
        std::vector<float> out(static_cast<size_t>(L) * heads * hd);
        AttentionShape s{heads, kv_heads, hd, cap, offset, L, scale, window};
        attention(ctx, s, qr.data<float>(), kc.data<float>(), vc.data<float>(), out.data());
        auto got = mx::transpose(from(out, {1, L, heads, hd}), {0, 2, 1, 3});
        EXPECT_LE(max_abs_diff(got, ref), 1e-5f) << isa_name(isa) << " heads=" << heads << "/" << kv_heads
                                                 << " offset=" << offset << " L=" << L
                                                 << " hd=" << hd << " window=" << window.value_or(0);
        // Over the float16 cache: exactly the float32 kernel's result on the rounded rows.
        std::vector<float> out_rounded(out.size()), out_half(out.size());
        attention(ctx, s, qr.data<float>(), kr.data<float>(), vr.data<float>(), out_rounded.data());
        s.kv_f16 = true;
        attention(ctx, s, qr.data<float>(), kh.data<mx::float16_t>(), vh.data<mx::float16_t>(), out_half.data());
        EXPECT_EQ(out_half, out_rounded) << isa_name(isa) << " float16 cache, heads=" << heads << "/" << kv_heads
                                         << " offset=" << offset << " L=" << L << " hd=" << hd
                                         << " window=" << window.value_or(0);
      }
    }
  }
}

// A batch of rows with their own left padding (BatchKVCache): q [B, L, heads, hd] against a
// cache [B, kv_heads, cap, hd], row b's keys from key_start[b] on (mlx-lm's create_causal_mask
// with left_padding), causal and within a window by cache row. Decode rows (one pass over
// the pool for all rows, long rows split) and prompts; a prompt's padded positions (no key of
// their own yet) are not compared.
TEST(BlockKernels, BatchedAttentionSkipsLeftPadding) {
  const int heads = 6, kv_heads = 2, B = 3;
  for (auto [offset, L, hd] : std::vector<std::tuple<int, int, int>>{
           {20, 1, 64}, {700, 1, 64}, {611, 1, 256}, {13, 17, 64}, {0, 9, 64}, {290, 40, 64}, {22, 2, 20}}) {
    const std::vector<int> lp{0, std::min(5, offset + L - 1), std::min(12, offset + L - 1)};
    for (std::optional<int> window : {std::optional<int>{}, std::optional<int>{8}, std::optional<int>{300}}) {
      const int S = offset + L, cap = S + 3;
      auto q = randn({B, heads, L, hd}, 400 + S), k = randn({B, kv_heads, S, hd}, 500 + S),
           v = randn({B, kv_heads, S, hd}, 600 + S);
      auto qpos = mx::reshape(mx::add(mx::arange(L), mx::array(offset)), {1, 1, L, 1});
      auto kpos = mx::reshape(mx::arange(S), {1, 1, 1, S});
      auto mask = mx::logical_and(mx::less_equal(kpos, qpos),
                                  mx::greater_equal(kpos, mx::reshape(mx::array(lp.data(), {B}, mx::int32), {B, 1, 1, 1})));
      if (window) mask = mx::logical_and(mask, mx::greater(kpos, mx::subtract(qpos, mx::array(*window))));
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      auto ref = mx::transpose(mx::fast::scaled_dot_product_attention(q, k, v, scale, "", mask), {0, 2, 1, 3});
      auto qr = mx::contiguous(mx::transpose(q, {0, 2, 1, 3}));
      auto pad = [&](const mx::array& a) { return mx::contiguous(mx::pad(a, {{0, 0}, {0, 0}, {0, cap - S}, {0, 0}})); };
      auto kc = pad(k), vc = pad(v);
      mx::eval({qr, kc, vc, ref});
      for (Isa isa : isas()) {
        KernelContext ctx(KernelOptions{isa, 2});
        std::vector<float> out(static_cast<size_t>(B) * L * heads * hd);
        AttentionShape s{heads, kv_heads, hd, cap, offset, L, scale, window, false, B, lp};
        attention(ctx, s, qr.data<float>(), kc.data<float>(), vc.data<float>(), out.data());
        auto got = from(out, {B, L, heads, hd});
        for (int b = 0; b < B; ++b) {
          const int l0 = std::max(0, lp[b] - offset);  // the row's first query with a key
          auto slice = [&](const mx::array& a) { return mx::slice(a, {b, l0, 0, 0}, {b + 1, L, heads, hd}); };
          EXPECT_LE(max_abs_diff(slice(got), slice(ref)), 1e-5f)
              << isa_name(isa) << " row " << b << " pad=" << lp[b] << " offset=" << offset << " L=" << L
              << " hd=" << hd << " window=" << window.value_or(0);
        }
        EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));
        // Each row bit for bit as attended alone (a batched request decodes what it decodes
        // alone), also with more threads than kv heads.
        for (int threads : {2, 5}) {
          KernelContext tctx(KernelOptions{isa, threads});
          attention(tctx, s, qr.data<float>(), kc.data<float>(), vc.data<float>(), out.data());
          for (int b = 0; b < B; ++b) {
            const long qrow = static_cast<long>(L) * heads * hd, entry = static_cast<long>(kv_heads) * cap * hd;
            std::vector<float> alone(qrow);
            AttentionShape s1{heads, kv_heads, hd, cap, offset, L, scale, window, false, 1, {&lp[b], 1}};
            attention(tctx, s1, qr.data<float>() + b * qrow, kc.data<float>() + b * entry, vc.data<float>() + b * entry,
                      alone.data());
            EXPECT_TRUE(std::equal(alone.begin(), alone.end(), out.begin() + b * qrow))
                << isa_name(isa) << " threads=" << threads << " row " << b << " offset=" << offset << " L=" << L
                << " hd=" << hd << " window=" << window.value_or(0);
          }
        }
      }
    }
  }
}

// A batched decode step's projections (qlinear with `decode`: each row one sequence's token)
// on a kRows8 matrix: up to kDecodeGemvMaxRows rows each row comes out bit for bit as alone.
TEST(BlockKernels, DecodeRowsEqualTheirOneRowProduct) {
  const int n = 64, k = 512;
  for (int bits : {4, 5, 6, 8}) {
    auto q = mx::quantize(randn({n, k}, 70 + bits, 0.05f), 32, bits);
    auto s16 = mx::astype(q[1], mx::float16), b16 = mx::astype(q[2], mx::float16);
    mx::eval({q[0], s16, b16});
    const QMatrixView mlx{q[0].data<uint32_t>(), s16.data<void>(), b16.data<void>(), n, k, bits, 32, ScaleType::kF16};
    std::vector<uint32_t> packed(static_cast<size_t>(n) * rows8_row_words(k, bits, 32, ScaleType::kF16));
    repack_rows8(mlx, packed.data());
    const QLinearView view{{packed.data(), nullptr, nullptr, n, k, bits, 32, ScaleType::kF16, QLayout::kRows8}};
    const int max_m = kDecodeGemvMaxRows;
    auto x = randn({max_m, k}, 80 + bits);
    for (Isa isa : isas()) {
      KernelContext ctx(KernelOptions{isa, 2});
      std::vector<float> one(static_cast<size_t>(max_m) * n), all(one.size());
      for (int r = 0; r < max_m; ++r) {
        qlinear(ctx, view, x.data<float>() + static_cast<long>(r) * k, 1, one.data() + static_cast<long>(r) * n);
      }
      for (int m : {2, 9, 16, max_m}) {
        qlinear(ctx, view, x.data<float>(), m, all.data(), /*decode=*/true);
        EXPECT_TRUE(std::equal(all.begin(), all.begin() + static_cast<long>(m) * n, one.begin()))
            << isa_name(isa) << " bits=" << bits << " m=" << m;
      }
    }
  }
}

// Rounding to float16 for the cache: bit-identical to MLX's astype, including ties, values
// beyond float16's range (inf), subnormals and a tail after the vectors.
TEST(BlockKernels, ToHalfMatchesMlxAstype) {
  auto x = mx::multiply(randn({1003}, 7), mx::array(3.f));
  x = mx::concatenate({x, mx::array({70000.f, -70000.f, 65519.f, 65520.f, 1e-6f, -3e-7f, 6e-8f, 1.00048828125f,
                                     1.00146484375f, 0.f, -0.f})});
  auto ref = mx::astype(x, mx::float16);
  mx::eval({x, ref});
  for (Isa isa : isas()) {
    std::vector<uint16_t> got(x.size());
    vec_ops(isa).to_half(x.data<float>(), got.data(), static_cast<long>(x.size()));
    const auto* want = reinterpret_cast<const uint16_t*>(ref.data<mx::float16_t>());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << isa_name(isa) << " x[" << i << "]";
  }
}

// Gated activations over 1003 values (a tail after the vectors), with large |g| where exp
// saturates, against float64 math: relative error, absolute below 1 (1 + tanh cancels for
// negative g in float32, whichever form computes it).
TEST(BlockKernels, GatedActivationsMatchFloat64) {
  const int n = 1010;
  auto g = mx::multiply(randn({n - 7}, 1), mx::array(4.f));
  g = mx::concatenate({g, mx::array({-120.f, -90.f, -30.f, 0.f, 30.f, 90.f, 120.f})});
  auto u = randn({n}, 2);
  mx::eval(g);
  auto g64 = mx::astype(g, mx::float64), u64 = mx::astype(u, mx::float64);
  auto one = mx::array(1.0, mx::float64);
  auto silu = mx::multiply(mx::divide(g64, mx::add(one, mx::exp(mx::negative(g64)))), u64);
  auto t = mx::multiply(mx::array(0.7978845608028654, mx::float64),
                        mx::add(g64, mx::multiply(mx::array(0.044715, mx::float64), mx::multiply(mx::multiply(g64, g64), g64))));
  auto gelu = mx::multiply(mx::multiply(mx::multiply(mx::array(0.5, mx::float64), g64), mx::add(one, mx::tanh(t))), u64);
  mx::eval({silu, gelu});
  auto err = [&](const std::vector<float>& got, const mx::array& ref) {
    auto d = mx::abs(mx::subtract(mx::astype(from(got, {n}), mx::float64), ref));
    return mx::max(mx::divide(d, mx::maximum(mx::abs(ref), one))).item<double>();
  };
  for (Isa isa : isas()) {
    std::vector<float> out(n);
    vec_ops(isa).silu_mul(g.data<float>(), u.data<float>(), out.data(), n);
    EXPECT_LE(err(out, silu), 1e-6) << isa_name(isa);
    vec_ops(isa).gelu_mul(g.data<float>(), u.data<float>(), out.data(), n);
    EXPECT_LE(err(out, gelu), 1e-6) << isa_name(isa);
  }
}

// sum(exp(x - shift)) in double against float64 math, with -inf entries (masked logits).
TEST(BlockKernels, SumExpMatchesDouble) {
  for (int n : {5, 1000, 49157}) {
    auto x = mx::multiply(randn({n}, n), mx::array(6.f));
    x = mx::where(mx::equal(mx::remainder(mx::arange(n), mx::array(5)), mx::array(2)),
                  mx::array(-std::numeric_limits<float>::infinity()), x);
    mx::eval(x);
    const float shift = mx::max(x).item<float>();
    const double exact = mx::sum(mx::exp(mx::subtract(mx::astype(x, mx::float64), mx::array(static_cast<double>(shift)))))
                             .item<double>();
    for (Isa isa : isas())
      EXPECT_NEAR(vec_ops(isa).sum_exp(x.data<float>(), n, shift) / exact, 1.0, 1e-6) << isa_name(isa) << " n=" << n;
  }
}

}  // namespace
