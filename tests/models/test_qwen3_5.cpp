// Qwen3.5 / Qwen3-Next beyond the parity suite: the recurrent (ArraysCache) state it keeps, its
// batch operations, the fast recurrence primitive against mlx-lm's ops, and what loading refuses.
#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include <filesystem>
#include <fstream>

#include "cache/arrays_cache.h"
#include "core/errors.h"
#include "golden_model.h"
#include "kernels/gated_delta.h"
#include "models/model.h"
#include "nn/gated_delta.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

mx::array ids(const std::vector<int>& v, int begin, int end) {
  return mx::array(v.data() + begin, {1, end - begin}, mx::int32);
}

LayerCaches clone_all(const LayerCaches& caches) {
  LayerCaches out;
  for (const auto& c : caches) out.push_back(c->clone());
  return out;
}

class Qwen35Cache : public ::testing::TestWithParam<std::string> {};

// Continuing from a saved state (a cache cloned mid-prompt) equals the uninterrupted run, bit
// for bit, and leaves the original untouched.
TEST_P(Qwen35Cache, ContinuingFromASavedStateEqualsTheUninterruptedRun) {
  auto m = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
  auto prompt = to_ints(model_golden(GetParam()).at("prompt"));
  auto caches = m.model->make_cache();
  mx::eval((*m.model)(ids(prompt, 0, 12), &caches));
  auto saved = clone_all(caches);
  auto straight = (*m.model)(ids(prompt, 12, 20), &caches);
  auto resumed = (*m.model)(ids(prompt, 12, 20), &saved);
  EXPECT_EQ(max_abs_diff(straight, resumed), 0.0f);
  // Recurrent layers are not trimmable: a state summarizes every token.
  bool recurrent = false;
  for (const auto& c : caches) {
    if (recurrent_state(c.get())) {
      recurrent = true;
      EXPECT_FALSE(c->is_trimmable());
      EXPECT_EQ(c->trim(3), 0);
      EXPECT_EQ(c->offset(), 20);
    }
  }
  EXPECT_TRUE(recurrent);
}

// Two sequences merged into a batch cache, filtered, extended and extracted keep their states.
TEST_P(Qwen35Cache, BatchMergeFilterExtractRoundTrip) {
  auto m = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
  auto prompt = to_ints(model_golden(GetParam()).at("prompt"));
  auto a = m.model->make_cache(), b = m.model->make_cache();
  mx::eval((*m.model)(ids(prompt, 0, 9), &a));
  mx::eval((*m.model)(ids(prompt, 3, 17), &b));
  for (size_t l = 0; l < a.size(); ++l) {
    auto* ra = dynamic_cast<ArraysCache*>(a[l].get());
    if (!ra) continue;
    auto* rb = dynamic_cast<ArraysCache*>(b[l].get());
    ArraysCache empty(2);
    auto batch = BatchArraysCache::merge({ra, &empty, rb});
    EXPECT_EQ(batch->batch_size(), 3);
    EXPECT_EQ(batch->offsets(), (std::vector<int>{9, 0, 14}));
    // The empty row is zeros; the others are their sequences' states.
    for (int s = 0; s < 2; ++s) {
      auto row0 = dynamic_cast<ArraysCache&>(*batch->extract(0)).slot(s);
      auto row2 = dynamic_cast<ArraysCache&>(*batch->extract(2)).slot(s);
      EXPECT_EQ(max_abs_diff(*row0, *ra->slot(s)), 0.0f);
      EXPECT_EQ(max_abs_diff(*row2, *rb->slot(s)), 0.0f);
      auto row1 = dynamic_cast<ArraysCache&>(*batch->extract(1)).slot(s);
      EXPECT_EQ(mx::max(mx::abs(*row1)).item<float>(), 0.0f);
    }
    batch->filter({2, 0});
    EXPECT_EQ(batch->offsets(), (std::vector<int>{14, 9}));
    auto first = batch->extract(0);
    EXPECT_EQ(max_abs_diff(*dynamic_cast<ArraysCache&>(*first).slot(1), *rb->slot(1)), 0.0f);
    auto other = BatchArraysCache::merge({ra});
    batch->extend(*other);
    EXPECT_EQ(batch->batch_size(), 3);
    EXPECT_EQ(max_abs_diff(*dynamic_cast<ArraysCache&>(*batch->extract(2)).slot(0), *ra->slot(0)), 0.0f);
    EXPECT_THROW(batch->extract(3), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, Qwen35Cache, ::testing::Values("qwen3_5-bf16", "qwen3-next-q4g64"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) c = (c == '-') ? '_' : c;
                           return s;
                         });

// The fast recurrence primitive against mlx-lm's per-token ops: grouped heads, a padding mask.
TEST(GatedDeltaKernel, MatchesTheOpsRecurrence) {
  const int B = 2, T = 23, Hk = 2, Hv = 4, Dk = 16, Dv = 8;
  auto q = randn({B, T, Hk, Dk}, 1, 0.3f), k = randn({B, T, Hk, Dk}, 2, 0.3f);
  auto v = randn({B, T, Hv, Dv}, 3);
  auto g = mx::sigmoid(randn({B, T, Hv}, 4)), beta = mx::sigmoid(randn({B, T, Hv}, 5));
  auto state = randn({B, Hv, Dv, Dk}, 6, 0.1f);
  // Row 1 is padding on its first 5 tokens (left-padded batch).
  auto mask = mx::greater_equal(mx::arange(T), mx::reshape(mx::array({0, 5}), {B, 1}));
  auto ctx = std::make_shared<const kernels::KernelContext>();
  for (bool masked : {false, true}) {
    auto m = masked ? std::optional<mx::array>(mask) : std::nullopt;
    auto ref = gated_delta_ops(q, k, v, g, beta, state, m);
    auto got = kernels::gated_delta(q, k, v, g, beta, state, m, ctx);
    ASSERT_TRUE(got.has_value());
    EXPECT_LT(max_abs_diff(got->second, ref.second), 1e-5f) << "state, masked=" << masked;
    // The outputs of real tokens (a padding token's output is never read).
    auto keep = mx::expand_dims(m ? *m : mx::full({B, T}, true), {2, 3});
    EXPECT_LT(max_abs_diff(mx::where(keep, got->first, mx::array(0.f)), mx::where(keep, ref.first, mx::array(0.f))),
              1e-5f)
        << "outputs, masked=" << masked;
  }
  // Not its inputs: float16 falls back to the ops.
  EXPECT_FALSE(kernels::gated_delta(mx::astype(q, mx::float16), k, v, g, beta, state, std::nullopt, ctx).has_value());
}

// A Hugging Face layout (norms stored as w - 1, [C, 1, K] conv kernels) is refused with the file
// and the tensor named, rather than loaded with its norms misread.
TEST(Qwen35Load, RefusesTheHuggingFaceLayout) {
  namespace fs = std::filesystem;
  const fs::path src = tiny_model_dir("qwen3_5-bf16");
  const fs::path dir = fs::temp_directory_path() / "mlxcpp_qwen35_hf_layout";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json");
  auto weights = mx::load_safetensors((src / "model.safetensors").string()).first;
  const std::string conv = "language_model.model.layers.0.linear_attn.conv1d.weight";
  ASSERT_TRUE(weights.count(conv));
  weights.insert_or_assign(conv, mx::moveaxis(weights.at(conv), 2, 1));
  mx::save_safetensors((dir / "model.safetensors").string(), weights);
  try {
    load_model(dir, ModelOptions::parity_mode());
    FAIL() << "loaded a Hugging Face layout";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(conv), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("convert"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
