// Attention over a quantized KV cache (kernels/quant_attention.h) against stock MLX on the same
// numbers: the cache dequantized with mx::dequantize, then mx::fast::scaled_dot_product_attention.
// Every ISA; 2/4/8 bits; float32 and float16 scales; GQA; a decode step whose keys are split over
// slices (merged parts), a causal prompt in several query blocks and tiles, a batch of rows,
// sliding windows; a strided view of a longer cache buffer (as QuantizedKVCache hands out).
#include <array>
#include <cmath>

#include <gtest/gtest.h>
#include <mlx/fast.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include "isas.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_context.h"
#include "kernels/quant_attention.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::isas;
using mlxcpp::test::max_abs_diff;
using mlxcpp::test::randn;

namespace {

struct Case {
  int B, Hq, Hkv, L, S, D, group, bits;
  mx::Dtype scale_dtype;
  int window = 0;
};

void check(const Case& c, Isa isa) {
  KernelOptions o;
  o.isa = isa;
  auto fast = std::make_shared<const KernelContext>(o);
  const int cap = c.S + 40;  // the cache's buffer is longer: the kernel gets a view of its rows
  auto q = randn({c.B, c.Hq, c.L, c.D}, 1);
  auto quant = [&](uint64_t seed) {
    auto x = randn({c.B, c.Hkv, cap, c.D}, seed);
    auto t = mx::quantize(x, c.group, c.bits);
    auto head = [&](const mx::array& a) {
      auto stop = a.shape();
      stop[2] = c.S;
      return mx::slice(a, {0, 0, 0, 0}, stop);
    };
    return std::array<mx::array, 3>{head(t[0]), head(mx::astype(t[1], c.scale_dtype)),
                                    head(mx::astype(t[2], c.scale_dtype))};
  };
  auto k = quant(2), v = quant(3);
  const mx::array kq[3] = {k[0], k[1], k[2]}, vq[3] = {v[0], v[1], v[2]};
  const float scale = 1.f / std::sqrt(static_cast<float>(c.D));
  auto got = quantized_kv_attention(q, kq, vq, scale, /*causal=*/true, c.group, c.bits, fast, c.window);
  ASSERT_TRUE(got);
  EXPECT_STREQ(got->primitive().name(), "MlxcppQuantAttention");
  auto deq = [&](const std::array<mx::array, 3>& t) {
    return mx::dequantize(t[0], mx::astype(t[1], mx::float32), mx::astype(t[2], mx::float32), c.group, c.bits);
  };
  std::optional<mx::array> mask;
  if (c.L > 1 || c.window > 0) {  // query l sees keys 0..S - L + l (the last `window` of them)
    auto qi = mx::expand_dims(mx::arange(c.S - c.L, c.S), 1), ki = mx::expand_dims(mx::arange(c.S), 0);
    mask = mx::greater_equal(qi, ki);
    if (c.window > 0) mask = mx::logical_and(*mask, mx::less(qi, mx::add(ki, mx::array(c.window))));
  }
  auto ref = mx::fast::scaled_dot_product_attention(q, deq(k), deq(v), scale, "", mask);
  ASSERT_EQ(got->shape(), ref.shape());
  // AVX-512 VNNI decode steps take the key dots on the query rounded to int16 (|q|max / 65534
  // an element, ~1e-5 of a score here: 1/1000 of what 8-bit keys' own rounding moves it); the
  // float paths sum the dequantized rows in another order than MLX only.
  const bool int16_query = isa == Isa::kAvx512 && has_avx512_vnni() && c.L == 1 &&
                           ((c.bits == 8 && c.group % 32 == 0) || (c.bits == 4 && c.group % 64 == 0));
  EXPECT_LE(max_abs_diff(*got, ref), int16_query ? 2e-4f : 2e-5f) << "isa " << static_cast<int>(isa) << " bits " << c.bits << " L " << c.L
                                            << " S " << c.S;
}

TEST(QuantAttention, MatchesDequantizedStockAttention) {
  const std::vector<Case> cases = {
      {1, 9, 3, 1, 1000, 64, 64, 8, mx::float16},   // decode, keys split into slices, SmolLM2's heads
      {1, 4, 2, 1, 37, 32, 32, 4, mx::float32},     // decode, one slice, a partial tile
      {2, 4, 4, 1, 600, 128, 128, 2, mx::float16},  // a batch, no GQA
      {1, 8, 2, 40, 300, 64, 32, 4, mx::float32},   // a prompt: 3 query blocks, 3 tiles
      {2, 6, 3, 5, 5, 32, 32, 8, mx::float16},      // a first prompt chunk (S == L)
      {1, 9, 3, 1, 1000, 64, 64, 8, mx::float16, 512},  // sliding window, decode: the last 512 keys
      {1, 8, 2, 40, 300, 64, 32, 4, mx::float32, 24},   // sliding window across query blocks and tiles
      // Decode steps read as packed (VecOps::attend_group_q): 4-bit at group 64 (AVX-512 VNNI's
      // nibble layout), 6 query rows a kv head at 8-bit group 32 (blocks of 3 and 4 rows, 4 groups a
      // row, float32 scales), head_dim 256 at group 128, a short row whose keys end mid-block.
      {1, 8, 2, 1, 700, 64, 64, 4, mx::float16},
      {1, 12, 2, 1, 333, 128, 32, 8, mx::float32},
      {1, 8, 1, 1, 513, 256, 128, 4, mx::float16},
      {2, 4, 2, 1, 50, 64, 64, 8, mx::float32},
  };
  for (Isa isa : isas()) {
    for (const auto& c : cases) check(c, isa);
  }
}

TEST(QuantAttention, NotBuiltWhereItDoesNotApply) {
  auto fast = std::make_shared<const KernelContext>();
  auto q = randn({1, 4, 1, 32}, 1);
  auto t = mx::quantize(randn({1, 2, 8, 32}, 2), 32, 4);
  const mx::array kq[3] = {t[0], t[1], t[2]};
  EXPECT_FALSE(quantized_kv_attention(q, kq, kq, 1.f, true, 32, 4, nullptr));                      // parity mode
  EXPECT_FALSE(quantized_kv_attention(mx::astype(q, mx::float16), kq, kq, 1.f, true, 32, 4, fast));  // f16 queries
  EXPECT_FALSE(quantized_kv_attention(q, kq, kq, 1.f, true, 32, 8, fast));  // bits other than stored
  EXPECT_FALSE(quantized_kv_attention(randn({1, 3, 1, 32}, 1), kq, kq, 1.f, true, 32, 4, fast));  // 3 heads over 2
  EXPECT_FALSE(quantized_kv_attention(q, kq, kq, 1.f, /*causal=*/false, 32, 4, fast, /*window=*/4));  // window, no causal
}

}  // namespace

namespace mlxcpp::kernels {
namespace {

// The fused block's own quantization of new cache rows (quantize_affine) is mx.quantize's, bit
// for bit: packed words, scales and biases, float32 and float16 scales, 2/4/8 bits, groups of
// 32/64/128, rows with a constant group (zero range) and all-negative groups among them.
TEST(QuantizeAffine, EqualsMxQuantize) {
  for (int bits : {2, 4, 8}) {
    for (int group : {32, 64, 128}) {
      for (auto dt : {mx::float32, mx::float16}) {
        const int rows = 7, d = 256;
        auto x = mx::multiply(mlxcpp::test::randn({rows, d}, bits * 1000 + group), mx::array(3.f));
        x = mx::concatenate({x, mx::full({1, d}, 0.5f), mx::negative(mx::abs(mlxcpp::test::randn({1, d}, 9)))}, 0);
        x = mx::astype(mx::astype(x, dt), mx::float32);  // float16 scales come from float16 rows in MLX
        auto want = mx::quantize(mx::astype(x, dt), group, bits);
        mx::eval(x);
        mx::eval(want);
        const int n = x.shape(0);
        std::vector<uint32_t> w(static_cast<size_t>(n) * d * bits / 32);
        std::vector<float> sf(static_cast<size_t>(n) * d / group), bf(sf.size());
        std::vector<mx::float16_t> sh(sf.size()), bh(sf.size());
        const bool f16 = dt == mx::float16;
        for (int r = 0; r < n; ++r) {
          const long g0 = static_cast<long>(r) * d / group;
          quantize_affine(x.data<float>() + static_cast<long>(r) * d, d, group, bits, w.data() + r * d * bits / 32,
                          f16 ? static_cast<void*>(sh.data() + g0) : sf.data() + g0,
                          f16 ? static_cast<void*>(bh.data() + g0) : bf.data() + g0, f16);
        }
        auto as_f32 = [&](const std::vector<float>& f, const std::vector<mx::float16_t>& h) {
          return f16 ? mx::astype(mx::array(h.data(), {n, d / group}, mx::float16), mx::float32)
                     : mx::array(f.data(), {n, d / group}, mx::float32);
        };
        const std::string at = "bits " + std::to_string(bits) + " group " + std::to_string(group) + (f16 ? " f16" : "");
        EXPECT_TRUE(mx::array_equal(mx::array(w.data(), want[0].shape(), mx::uint32), want[0]).item<bool>()) << at;
        EXPECT_TRUE(mx::array_equal(as_f32(sf, sh), mx::astype(want[1], mx::float32)).item<bool>()) << at;
        EXPECT_TRUE(mx::array_equal(as_f32(bf, bh), mx::astype(want[2], mx::float32)).item<bool>()) << at;
      }
    }
  }
}

// The same kernel over plain float32 caches (float_kv_attention): a cache's used rows as a view of
// a larger buffer, grouped heads, a causal prompt over older keys and a single decode query,
// against MLX's attention.
TEST(FloatKvAttention, MatchesStockAttention) {
  for (Isa isa : mlxcpp::test::isas()) {
    KernelOptions o;
    o.isa = isa;
    auto fast = std::make_shared<const KernelContext>(o);
    for (int L : {1, 37}) {
      const int B = 2, Hq = 8, Hkv = 2, D = 64, S = 300, cap = 512;
      auto q = mlxcpp::test::randn({B, Hq, L, D}, 1);
      auto kbuf = mlxcpp::test::randn({B, Hkv, cap, D}, 2), vbuf = mlxcpp::test::randn({B, Hkv, cap, D}, 3);
      auto k = mx::slice(kbuf, {0, 0, 0, 0}, {B, Hkv, S, D}), v = mx::slice(vbuf, {0, 0, 0, 0}, {B, Hkv, S, D});
      const bool causal = L > 1;
      auto got = float_kv_attention(q, k, v, 0.125f, causal, fast);
      ASSERT_TRUE(got.has_value());
      auto want = causal ? mx::fast::scaled_dot_product_attention(q, k, v, 0.125f, "causal")
                         : mx::fast::scaled_dot_product_attention(q, k, v, 0.125f);
      EXPECT_LT(mlxcpp::test::max_abs_diff(*got, want), 2e-5f) << isa_name(isa) << " L=" << L;
    }
  }
  auto fast = std::make_shared<const KernelContext>();
  auto q = mlxcpp::test::randn({1, 4, 1, 32}, 1), k = mlxcpp::test::randn({1, 2, 8, 32}, 2);
  EXPECT_FALSE(float_kv_attention(mx::astype(q, mx::float16), k, k, 1.f, false, fast));
  EXPECT_FALSE(float_kv_attention(mlxcpp::test::randn({1, 3, 1, 32}, 1), k, k, 1.f, false, fast));  // 3 over 2 heads
}

}  // namespace
}  // namespace mlxcpp::kernels
