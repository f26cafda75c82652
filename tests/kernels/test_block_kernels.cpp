// The row kernels inside our block primitives against the stock MLX ops they replace, on every
// ISA this CPU has (scalar and AVX2 are forced where AVX-512 exists).
#include <gtest/gtest.h>
#include <mlx/fast.h>
#include <mlx/mlx.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/block_kernels.h"
#include "kernels/kernel_context.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::max_abs_diff;
using mlxcpp::test::randn;

namespace {

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(i)) out.push_back(i);
  return out;
}

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
