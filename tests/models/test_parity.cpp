// Parity: mlxcpp's logits equal mlx-lm's bit for bit (max |diff| == 0) on every tiny checkpoint,
// for a 20-token prefill, 16 greedy decode steps, a 3-chunk prefill and a rotating-cache run
// past its wrap. Goldens: tools/oracle/model_goldens.py via `make goldens`.
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "cache/rotating_kv_cache.h"
#include "golden_model.h"
#include "models/model.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = model_golden(GetParam());
    loaded_ = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
    prompt_ = to_ints(golden_.at("prompt"));
  }
  mx::array ids(const std::vector<int>& v, int begin, int end) const {
    return mx::array(v.data() + begin, {1, end - begin}, mx::int32);
  }
  // Greedy single-token steps; checks the fed tokens and returns the stacked logits.
  mx::array greedy(LayerCaches& caches, int first, int steps, const std::vector<int>& expect_tokens) {
    std::vector<mx::array> rows;
    int y = first;
    for (int i = 0; i < steps; ++i) {
      EXPECT_EQ(y, expect_tokens[i]) << "step " << i;
      auto out = (*loaded_.model)(mx::array({y}, {1, 1}, mx::int32), &caches);
      auto row = mx::reshape(out, {-1});
      rows.push_back(row);
      y = mx::argmax(row).item<uint32_t>();
    }
    return mx::stack(rows);
  }

  std::map<std::string, mx::array> golden_;
  LoadedModel loaded_;
  std::vector<int> prompt_;
};

TEST_P(Parity, PrefillAndGreedyDecode) {
  auto caches = loaded_.model->make_cache();
  auto logits = (*loaded_.model)(ids(prompt_, 0, 20), &caches);
  auto prefill = mx::squeeze(logits, 0);
  EXPECT_EQ(max_abs_diff(prefill, golden_.at("prefill_logits")), 0.0f);
  int first = mx::argmax(mx::slice(prefill, {19, 0}, {20, prefill.shape(1)})).item<uint32_t>();
  auto decode = greedy(caches, first, 16, to_ints(golden_.at("decode_tokens")));
  EXPECT_EQ(max_abs_diff(decode, golden_.at("decode_logits")), 0.0f);
}

TEST_P(Parity, ChunkedPrefill) {
  auto caches = loaded_.model->make_cache();
  std::vector<mx::array> parts;
  for (auto [a, b] : {std::pair{0, 7}, {7, 14}, {14, 20}}) {
    parts.push_back(mx::squeeze((*loaded_.model)(ids(prompt_, a, b), &caches), 0));
  }
  EXPECT_EQ(max_abs_diff(mx::concatenate(parts, 0), golden_.at("chunked_logits")), 0.0f);
}

TEST_P(Parity, RotatingCachePastWrap) {
  // Recurrent (gated-DeltaNet) layers have no rotating cache: the oracle records none for them.
  if (!golden_.count("rotating_logits")) GTEST_SKIP() << "no rotating-cache golden for this family";
  // One in place of each of make_cache's (Gemma 4's KV-shared layers have none).
  LayerCaches caches;
  const auto n = loaded_.model->make_cache().size();
  for (size_t i = 0; i < n; ++i) caches.push_back(std::make_unique<RotatingKVCache>(12, 4));
  auto logits = (*loaded_.model)(ids(prompt_, 0, 10), &caches);
  auto last = mx::reshape(mx::slice(logits, {0, 9, 0}, {1, 10, logits.shape(2)}), {-1});
  int first = mx::argmax(last).item<uint32_t>();
  auto decode = greedy(caches, first, 20, to_ints(golden_.at("rotating_tokens")));
  EXPECT_EQ(max_abs_diff(decode, golden_.at("rotating_logits")), 0.0f);
}

TEST_P(Parity, FullForwardEqualsCachedDecode) {
  // Without a cache, one forward over prompt + decoded tokens gives the same last logits.
  // Not for dynamic NTK rope: its base depends on the length of each call (as in mlx-lm), so a
  // 36-token forward and 16 one-token steps legitimately rotate differently.
  if (GetParam().find("dynamic") != std::string::npos) GTEST_SKIP() << "dynamic rope is length-dependent";
  auto tokens = prompt_;
  for (int t : to_ints(golden_.at("decode_tokens"))) tokens.push_back(t);
  auto logits = (*loaded_.model)(ids(tokens, 0, static_cast<int>(tokens.size())), nullptr);
  auto n = static_cast<int>(tokens.size());
  auto last = mx::reshape(mx::slice(logits, {0, n - 1, 0}, {1, n, logits.shape(2)}), {-1});
  auto expect = mx::reshape(mx::slice(golden_.at("decode_logits"), {15, 0}, {16, logits.shape(2)}), {-1});
  // A different op order (one long attention vs. 16 cached steps): close, not identical.
  EXPECT_LT(max_abs_diff(last, expect), 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, Parity, ::testing::ValuesIn(tiny_model_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
