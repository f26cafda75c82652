// A whole decoder stack in one primitive (kernels::decoder_stack) against the same layers run
// one block primitive at a time (attention_block, then mlp_block): the same kernels in the same
// order, so hidden states and caches must agree exactly. Llama-like layers (SwiGLU, rope, GQA)
// and Gemma-like ones (q/k norms, post-norms, GeGLU, sliding window), decode and prompt rows,
// two sequences, caches updated in place or copied, weights held or taken as inputs, stacks
// deep enough to go in several runs.
#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include <cmath>

#include "kernels/kernel_context.h"
#include "kernels/ops.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;
using mlxcpp::test::max_abs_diff;
using mlxcpp::test::randn;

namespace {

constexpr int kD = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kHidden = 96, kCap = 24;

BlockLinear qlinear(int n, int k, int bits, int group, uint64_t seed, bool bias = false) {
  auto q = mx::quantize(randn({n, k}, seed, 0.05f), group, bits);
  std::optional<mx::array> b;
  if (bias) b = randn({n}, seed + 1, 0.1f);
  mx::eval(q);
  if (b) mx::eval(*b);
  return {q[0], q[1], q[2], b, bits, group};
}

mx::array norm_weight(uint64_t seed) {
  auto w = mx::add(mx::array(1.f), randn({kD}, seed, 0.1f));
  mx::eval(w);
  return w;
}

std::shared_ptr<const RopeSpec> rope_spec() {
  auto r = std::make_shared<RopeSpec>();
  r->dims = kHeadDim;
  for (int i = 0; i < kHeadDim / 2; ++i) r->inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / kHeadDim)));
  return r;
}

struct LayerWeights {
  mx::array in_norm, mlp_norm;
  BlockLinear q, k, v, o, gate, up, down;
  std::optional<mx::array> q_norm, k_norm, post_attn, post_mlp;
  std::optional<int> window;
  GluActivation act;
};

LayerWeights layer(int i, bool gemma) {
  const uint64_t s = 1000 * (i + 1);
  LayerWeights w{norm_weight(s),
                 norm_weight(s + 1),
                 qlinear(kHeads * kHeadDim, kD, 4, 32, s + 2, !gemma),
                 qlinear(kKvHeads * kHeadDim, kD, 4, 32, s + 3, !gemma),
                 qlinear(kKvHeads * kHeadDim, kD, 8, 64, s + 4, !gemma),
                 qlinear(kD, kHeads * kHeadDim, 4, 64, s + 5),
                 qlinear(kHidden, kD, 4, 32, s + 6),
                 qlinear(kHidden, kD, 4, 32, s + 7),
                 qlinear(kD, kHidden, 8, 32, s + 8),
                 std::nullopt,
                 std::nullopt,
                 std::nullopt,
                 std::nullopt,
                 std::nullopt,
                 gemma ? GluActivation::kGeluApprox : GluActivation::kSilu};
  if (gemma) {
    auto hn = [&](uint64_t seed) {
      auto a = mx::add(mx::array(1.f), randn({kHeadDim}, seed, 0.1f));
      mx::eval(a);
      return a;
    };
    w.q_norm = hn(s + 9);
    w.k_norm = hn(s + 10);
    w.post_attn = norm_weight(s + 11);
    w.post_mlp = norm_weight(s + 12);
    if (i % 2 == 0) w.window = 3;  // sliding-window layers, as Gemma 3's local ones
  }
  return w;
}

DecoderLayerInputs inputs(const LayerWeights& w, const mx::array& kc, const mx::array& vc, int offset,
                          bool exclusive) {
  AttentionBlockArgs a{kHeads, kKvHeads, kHeadDim, offset, 1e-5f, 0.25f, w.window, rope_spec(), exclusive,
                       w.q_norm, w.k_norm, w.post_attn};
  return {{w.in_norm, w.q, w.k, w.v, w.o, {kc, vc}, a},
          {w.mlp_norm, 1e-5f, w.gate, w.up, w.down, w.act, w.post_mlp}};
}

// Fresh caches [B, kv_heads, cap, head_dim] with `offset` rows written (evaluated, their own buffers).
std::vector<mx::array> caches(int layers, int batch, int offset) {
  std::vector<mx::array> out;
  for (int i = 0; i < 2 * layers; ++i) {
    auto c = mx::zeros({batch, kKvHeads, kCap - offset, kHeadDim}, mx::float32);
    if (offset > 0) c = mx::concatenate({randn({batch, kKvHeads, offset, kHeadDim}, 77 + i), c}, 2);
    out.push_back(mx::copy(c));
  }
  mx::eval(out);
  return out;
}

struct Case {
  bool gemma;
  int batch, L, offset;
  bool exclusive;
  int layers = 3;
};

class DecoderStack : public ::testing::TestWithParam<Case> {};

TEST_P(DecoderStack, EqualsTheBlocksOneByOne) {
  const auto c = GetParam();
  const int layers = c.layers;
  auto fast = std::make_shared<const KernelContext>();
  std::vector<LayerWeights> w;
  for (int i = 0; i < layers; ++i) w.push_back(layer(i, c.gemma));
  auto h = randn({c.batch, c.L, kD}, 5);
  mx::eval(h);

  // One block primitive at a time.
  auto ref_caches = caches(layers, c.batch, c.offset);
  auto x = h;
  std::vector<mx::array> ref_out;
  for (int i = 0; i < layers; ++i) {
    auto in = inputs(w[i], ref_caches[2 * i], ref_caches[2 * i + 1], c.offset, false);
    auto att = attention_block(x, in.attn, fast);
    ASSERT_TRUE(att);
    auto m = in.mlp;
    auto mlp = mlp_block((*att)[0], m.norm_w, m.eps, m.gate, m.up, m.down, fast, m.act, m.post_norm);
    ASSERT_TRUE(mlp);
    x = *mlp;
    ref_out.push_back((*att)[1]);
    ref_out.push_back((*att)[2]);
  }
  ref_out.push_back(x);
  mx::eval(ref_out);

  // The stack: updates its own caches in place when told they are exclusive, else copies them.
  auto stack_caches = caches(layers, c.batch, c.offset);
  auto before = stack_caches[0];
  std::vector<DecoderLayerInputs> in;
  for (int i = 0; i < layers; ++i) {
    in.push_back(inputs(w[i], stack_caches[2 * i], stack_caches[2 * i + 1], c.offset, c.exclusive));
  }
  auto out = decoder_stack(h, in, fast);
  ASSERT_TRUE(out);
  ASSERT_EQ(out->size(), 1u + 2 * layers);
  // Evaluated weights are held by the primitive: its inputs are h and the caches. Past 31
  // outputs the layers go in runs of 15 (two caches each), each run's h the next one's input.
  const int last_run = layers <= 15 ? layers : (layers - 1) % 15 + 1;
  EXPECT_EQ((*out)[0].inputs().size(), 1u + 2 * last_run);
  if (layers > 15) EXPECT_STREQ((*out)[0].inputs()[0].primitive().name(), "MlxcppDecoderStack");
  const auto copies_before = fast->cache_copies();
  mx::eval(*out);
  EXPECT_EQ(fast->cache_copies() - copies_before, c.exclusive ? 0 : 2 * layers);
  EXPECT_EQ(max_abs_diff((*out)[0], ref_out.back()), 0.f);
  for (int i = 0; i < 2 * layers; ++i) EXPECT_EQ(max_abs_diff((*out)[1 + i], ref_out[i]), 0.f) << "cache " << i;
  // In place: the output shares the input buffer; copied: the input is untouched.
  EXPECT_EQ((*out)[1].data<float>() == before.data<float>(), c.exclusive);
}

INSTANTIATE_TEST_SUITE_P(Layers, DecoderStack,
                         ::testing::Values(Case{false, 1, 1, 5, true}, Case{false, 1, 6, 0, true},
                                           Case{false, 2, 1, 7, false}, Case{true, 1, 1, 9, true},
                                           Case{true, 2, 4, 3, false}, Case{true, 1, 7, 0, true},
                                           Case{false, 1, 1, 5, true, 20}, Case{true, 2, 3, 4, false, 31}));

// A weight not evaluated yet is an input (so MLX computes it first); the result is the same.
TEST(DecoderStackInputs, LazyWeightsAreInputs) {
  auto fast = std::make_shared<const KernelContext>();
  auto w = layer(0, false);
  auto h = randn({1, 1, kD}, 6);
  mx::eval(h);
  auto c1 = caches(1, 1, 4), c2 = caches(1, 1, 4);
  auto ref = decoder_stack(h, {inputs(w, c1[0], c1[1], 4, false)}, fast);
  auto lazy = w;
  lazy.mlp_norm = mx::multiply(w.mlp_norm, mx::array(1.f));  // not evaluated
  auto got = decoder_stack(h, {inputs(lazy, c2[0], c2[1], 4, false)}, fast);
  ASSERT_TRUE(ref && got);
  EXPECT_EQ((*got)[0].inputs().size(), 4u);
  mx::eval((*ref)[0], (*got)[0]);
  EXPECT_EQ(max_abs_diff((*got)[0], (*ref)[0]), 0.f);
}

// Layouts the kernels don't cover: no stack (the caller runs the layers one by one).
TEST(DecoderStackInputs, UncoveredLayerGivesNone) {
  auto fast = std::make_shared<const KernelContext>();
  auto w = layer(0, false);
  auto h = randn({1, 1, kD}, 6);
  auto c = caches(1, 1, 2);
  auto bad = w;
  bad.in_norm = mx::ones({kD + 1});
  EXPECT_FALSE(decoder_stack(h, {inputs(bad, c[0], c[1], 2, false)}, fast));
  EXPECT_FALSE(decoder_stack(mx::astype(h, mx::float16), {inputs(w, c[0], c[1], 2, false)}, fast));
  EXPECT_FALSE(decoder_stack(h, {}, fast));
  EXPECT_FALSE(decoder_stack(h, {inputs(w, c[0], c[1], 2, false)}, nullptr));
}

}  // namespace
