// The real gemma-3-270m-it (converted from the GGUF Q4_K_M): parity mode bit-identical to
// mlx-lm (tools/oracle/real_gemma3_goldens.py) on a 16-token prefill and 16 greedy steps.
// Skipped unless `make models` fetched the snapshot and the golden was recorded.
#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include <filesystem>

#include "models/model.h"
#include "test_support.h"

namespace mx = mlx::core;
namespace fs = std::filesystem;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

TEST(RealGemma3, ParityPrefillAndGreedyAreBitIdentical) {
  const auto dir = source_dir() / "models" / "gemma-3-270m-it";
  const auto file = golden_dir() / "real" / "gemma3.safetensors";
  if (!fs::exists(dir / "config.json") || !fs::exists(file)) {
    GTEST_SKIP() << "needs " << dir << " (make models) and " << file << " (tools/oracle/real_gemma3_goldens.py)";
  }
  auto g = mx::load_safetensors(file.string()).first;
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

}  // namespace
