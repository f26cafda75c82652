// The real gemma-3-270m-it (converted from the GGUF Q4_K_M): parity mode bit-identical to
// mlx-lm (tools/oracle/real_gemma3_goldens.py) on a 16-token prefill and 16 greedy steps; the
// fast path (fused Gemma blocks) against parity over 552 teacher-forced tokens.
// Skipped unless `make models` fetched the snapshot and the golden was recorded.
#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include <cstdio>
#include <filesystem>

#include "fast_vs_parity.h"
#include "models/model.h"
#include "test_support.h"

namespace mx = mlx::core;
namespace fs = std::filesystem;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

fs::path model_dir() { return source_dir() / "models" / "gemma-3-270m-it"; }
fs::path golden_file() { return golden_dir() / "real" / "gemma3.safetensors"; }

#define SKIP_WITHOUT_DATA()                                                                               \
  if (!fs::exists(model_dir() / "config.json") || !fs::exists(golden_file())) {                           \
    GTEST_SKIP() << "needs " << model_dir() << " (make models) and " << golden_file()                     \
                 << " (tools/oracle/real_gemma3_goldens.py)";                                             \
  }

TEST(RealGemma3, ParityPrefillAndGreedyAreBitIdentical) {
  SKIP_WITHOUT_DATA();
  const auto dir = model_dir();
  auto g = mx::load_safetensors(golden_file().string()).first;
  auto loaded = load_model(dir, ModelOptions::parity_mode());
  const auto& m = *loaded.model;
  {
    auto caches = m.make_cache();
    auto logits = m(mx::expand_dims(g.at("text_prompt"), 0), &caches);
    EXPECT_EQ(max_abs_diff(mx::squeeze(logits, 0), g.at("text_logits")), 0.0f);
  }
  auto caches = m.make_cache();
  auto prefill = m(mx::expand_dims(g.at("france_prompt"), 0), &caches);
  int y = mx::argmax(mx::reshape(mx::slice(prefill, {0, prefill.shape(1) - 1, 0}, {1, prefill.shape(1), prefill.shape(2)}), {-1})).item<int>();
  auto tokens = g.at("greedy_tokens");
  auto expect = g.at("greedy_logits");
  for (int i = 0; i < static_cast<int>(tokens.size()); ++i) {
    ASSERT_EQ(y, mx::slice(tokens, {i}, {i + 1}).item<int>()) << "greedy step " << i;
    auto got = mx::reshape(m(mx::array(&y, {1, 1}, mx::int32), &caches), {-1});
    auto want = mx::reshape(mx::slice(expect, {i, 0}, {i + 1, expect.shape(1)}), {-1});
    ASSERT_EQ(max_abs_diff(got, want), 0.0f) << "greedy step " << i;
    y = mx::argmax(got).item<int>();
  }
}

TEST(RealGemma3, FastPathMatchesParityOnTeacherForcedTokens) {
  SKIP_WITHOUT_DATA();
  auto ids = mx::load_safetensors(golden_file().string()).first.at("text_ids");
  ASSERT_EQ(ids.size(), 552u);
  const int prefill = 488;  // 64 decode steps that cross the 512-token sliding window
  auto parity = load_model(model_dir(), ModelOptions::parity_mode());
  auto ref = teacher_forced(*parity.model, ids, prefill);
  auto fast = load_model(model_dir());
  auto got = teacher_forced(*fast.model, ids, prefill);
  const auto a = agreement(ref, got);
  std::printf("gemma3 fast vs parity over 552 tokens: mean KL %.3g nats/token, max KL %.3g, top-1 agreement %.4f\n",
              a.mean_kl, a.max_kl, a.top1);
  EXPECT_LE(a.mean_kl, 1e-3f);
  EXPECT_GE(a.top1, 0.99f);
}

}  // namespace
