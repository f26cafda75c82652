// Sampler tests: mlx-lm's tests/test_sample_utils.py exact-value cases, parameter validation,
// and bit-exact replay of the goldens written by tools/oracle/sampler_goldens.py.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "generate/sampler.h"
#include "test_support.h"

namespace mx = mlx::core;
namespace fs = std::filesystem;

// Designated initializers leave the other fields at their defaults, which is the point here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace mlxcpp {
namespace {

using Arrays = std::unordered_map<std::string, mx::array>;

std::vector<float> to_floats(const mx::array& a) {
  auto f = mx::astype(a, mx::float32);
  f.eval();
  return {f.data<float>(), f.data<float>() + f.size()};
}

double round4(double x) { return std::round(x * 10000.0) / 10000.0; }

std::vector<double> rounded(const mx::array& a) {
  std::vector<double> out;
  for (float v : to_floats(a)) out.push_back(round4(v));
  return out;
}

mx::array probs_row(std::vector<float> p) {
  int n = static_cast<int>(p.size());
  return mx::array(p.begin(), {1, n});
}

mx::array softmax_last(const mx::array& x) { return mx::softmax(x, std::vector<int>{-1}); }

bool all_close(const mx::array& a, const mx::array& b) { return mx::allclose(a, b).item<bool>(); }

// --- tests/test_sample_utils.py, exact-value cases ---

TEST(SampleUtils, ApplyTopP) {
  auto probs = probs_row({0.9f, 0.0f, 0.0f, 0.1f});
  auto logits = mx::log(probs);
  auto p = softmax_last(mx::squeeze(apply_top_p(logits, 0.3)));
  EXPECT_EQ(to_floats(p), (std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f}));
  p = softmax_last(mx::squeeze(apply_top_p(logits, 0.95)));
  EXPECT_TRUE(all_close(mx::squeeze(probs), p));

  probs = probs_row({0.0f, 0.5f, 0.4f, 0.1f});
  logits = mx::log(probs);
  p = softmax_last(mx::squeeze(apply_top_p(logits, 0.4)));
  EXPECT_EQ(to_floats(p), (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
  p = softmax_last(mx::squeeze(apply_top_p(logits, 0.6)));
  EXPECT_EQ(rounded(p), (std::vector<double>{0.0, 0.5556, 0.4444, 0.0}));
  p = softmax_last(mx::squeeze(apply_top_p(logits, 0.95)));
  EXPECT_EQ(rounded(p), (std::vector<double>{0.0, 0.5, 0.4, 0.1}));
  double sum = 0;
  for (float v : to_floats(p)) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-7);

  // Batch mode works.
  std::vector<float> batch{0.9f, 0.0f, 0.0f, 0.1f, 0.0f, 0.8f, 0.1f, 0.1f};
  logits = mx::log(mx::array(batch.begin(), {2, 4}));
  p = softmax_last(apply_top_p(logits, 0.5));
  EXPECT_EQ(to_floats(p), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(SampleUtils, ApplyMinP) {
  auto probs = probs_row({0.9f, 0.0f, 0.0f, 0.1f});
  auto logits = mx::log(probs);
  auto p = softmax_last(mx::squeeze(apply_min_p(logits, 0.8)));
  EXPECT_EQ(to_floats(p), (std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f}));
  p = softmax_last(mx::squeeze(apply_min_p(logits, 0.05)));
  EXPECT_TRUE(all_close(p, mx::squeeze(probs)));

  // Batch mode works.
  std::vector<float> batch{0.9f, 0.0f, 0.0f, 0.1f, 0.0f, 0.8f, 0.0f, 0.1f};
  logits = mx::log(mx::array(batch.begin(), {2, 4}));
  p = softmax_last(apply_min_p(logits, 0.7));
  EXPECT_EQ(to_floats(p), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(SampleUtils, ApplyTopK) {
  auto logits = mx::log(probs_row({0.9f, 0.0f, 0.0f, 0.1f}));
  auto p = softmax_last(mx::squeeze(apply_top_k(logits, 1)));
  EXPECT_EQ(to_floats(p), (std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f}));

  logits = mx::log(probs_row({0.6f, 0.0f, 0.1f, 0.3f}));
  p = softmax_last(mx::squeeze(apply_top_k(logits, 2)));
  EXPECT_EQ(rounded(p), (std::vector<double>{0.6667, 0.0, 0.0, 0.3333}));

  // Batch mode works.
  std::vector<float> batch{0.9f, 0.0f, 0.0f, 0.1f, 0.0f, 0.8f, 0.0f, 0.1f};
  logits = mx::log(mx::array(batch.begin(), {2, 4}));
  p = softmax_last(apply_top_k(logits, 1));
  EXPECT_EQ(to_floats(p), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(SampleUtils, ApplyXtc) {
  auto probs = probs_row({0.4f, 0.3f, 0.15f, 0.15f});
  auto logits = mx::log(probs);
  // The threshold.
  auto p = softmax_last(apply_xtc(logits, 1, 0.2, {}));
  EXPECT_TRUE(all_close(p, probs_row({0.0f, 0.5f, 0.25f, 0.25f})));
  p = softmax_last(apply_xtc(logits, 1, 0.1, {}));
  EXPECT_TRUE(all_close(p, probs_row({0.0f, 0.0f, 0.5f, 0.5f})));
  // The special tokens.
  p = softmax_last(apply_xtc(logits, 1, 0.1, {0}));
  EXPECT_TRUE(all_close(p, probs_row({4.0f / 7, 0.0f, 1.5f / 7, 1.5f / 7})));
  // With probability 0 the probs don't change.
  p = softmax_last(apply_xtc(logits, 0, 0.1, {0}));
  EXPECT_TRUE(all_close(p, probs));
}

// --- make_sampler behaviour and validation ---

TEST(Sampler, GreedyIsArgmaxUint32) {
  std::vector<float> v{0.1f, 2.0f, -1.0f, 3.0f, 0.0f, 0.5f};
  auto logprobs = mx::array(v.begin(), {2, 3});
  auto tokens = make_sampler({})(logprobs);
  tokens.eval();
  EXPECT_EQ(tokens.dtype(), mx::uint32);
  EXPECT_EQ(tokens.shape(), (mx::Shape{2}));
  EXPECT_EQ(tokens.data<uint32_t>()[0], 1u);
  EXPECT_EQ(tokens.data<uint32_t>()[1], 0u);
}

void expect_request_error(const SamplerParams& p, const std::string& message) {
  try {
    make_sampler(p);
    ADD_FAILURE() << "expected RequestError: " << message;
  } catch (const RequestError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(Sampler, ValidationNamesFieldAndValue) {
  expect_request_error({.temp = -0.5}, "[sampler] temp must be a finite number >= 0, got -0.5");
  expect_request_error({.temp = 1, .top_p = 1.5}, "[sampler] top_p must be in [0, 1], got 1.5");
  expect_request_error({.temp = 1, .min_p = -0.1}, "[sampler] min_p must be in [0, 1], got -0.1");
  expect_request_error({.temp = 1, .min_tokens_to_keep = 0},
                       "[sampler] min_tokens_to_keep must be >= 1, got 0");
  expect_request_error({.temp = 1, .top_k = -3}, "[sampler] top_k must be >= 0, got -3");
  expect_request_error({.temp = 1, .xtc_probability = 2},
                       "[sampler] xtc_probability must be in [0, 1], got 2");
  expect_request_error({.temp = 1, .xtc_probability = 0.5, .xtc_threshold = 0.7},
                       "[sampler] xtc_threshold must be in [0, 0.5], got 0.7");
  expect_request_error({.temp = 1, .xtc_special_tokens = {4, -1}},
                       "[sampler] xtc_special_tokens ids must be >= 0, got -1");
  expect_request_error({.temp = std::nan("")},
                       "[sampler] temp must be a finite number >= 0, got nan");
}

TEST(Sampler, TopKMustBeBelowVocabulary) {
  auto sampler = make_sampler({.temp = 1.0, .top_k = 4});
  auto logprobs = mx::zeros({1, 4});
  EXPECT_THROW(sampler(logprobs), RequestError);
  EXPECT_NO_THROW(make_sampler({.temp = 1.0, .top_k = 3})(logprobs));
}

// --- goldens from tools/oracle/sampler_goldens.py ---

const char* kRegenerate =
    "generate it with: .venv/bin/python tools/oracle/sampler_goldens.py OUTDIR "
    "and run with MLXCPP_GOLDEN_DIR=OUTDIR";

::testing::AssertionResult golden_path(const std::string& file, fs::path* out) {
  try {
    *out = test::golden_dir() / "sampler" / file;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << e.what();
  }
  if (!fs::exists(*out)) {
    return ::testing::AssertionFailure() << "missing golden " << *out << "; " << kRegenerate;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult load_arrays(const std::string& file, Arrays* out) {
  fs::path p;
  auto ok = golden_path(file, &p);
  if (ok) *out = mx::load_safetensors(p.string()).first;
  return ok;
}

::testing::AssertionResult load_cases(nlohmann::json* out) {
  fs::path p;
  auto ok = golden_path("cases.json", &p);
  if (ok) *out = nlohmann::json::parse(std::ifstream(p));
  return ok;
}

::testing::AssertionResult same_bits(const mx::array& got, const mx::array& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "dtype/shape differ: got " << got.dtype() << " "
                                         << got.shape() << ", want " << want.dtype() << " "
                                         << want.shape();
  }
  if (!mx::array_equal(got, want).item<bool>()) {
    return ::testing::AssertionFailure() << "values differ:\n got " << got << "\nwant " << want;
  }
  return ::testing::AssertionSuccess();
}

SamplerParams params_from(const nlohmann::json& j) {
  SamplerParams p;
  p.temp = j.value("temp", 0.0);
  p.top_p = j.value("top_p", 0.0);
  p.min_p = j.value("min_p", 0.0);
  p.min_tokens_to_keep = j.value("min_tokens_to_keep", 1);
  p.top_k = j.value("top_k", 0);
  p.xtc_probability = j.value("xtc_probability", 0.0);
  p.xtc_threshold = j.value("xtc_threshold", 0.1);
  p.xtc_special_tokens = j.value("xtc_special_tokens", std::vector<int>{});
  return p;
}

TEST(SamplerGolden, DefaultKeySequenceMatchesPython) {
  nlohmann::json cases;
  Arrays want;
  ASSERT_TRUE(load_cases(&cases));
  ASSERT_TRUE(load_arrays("random.safetensors", &want));
  // Python: mx.random.seed(s); randint(0, 1000000, (4,)); uniform(shape=(3,)); randint(...).
  auto randint = [] { return mx::random::randint(mx::array(0), mx::array(1000000), {4}); };
  mx::random::seed(cases.at("random_seed").get<uint64_t>());
  auto a = randint();
  auto u = mx::random::uniform(mx::array(0), mx::array(1), {3});
  auto b = randint();
  mx::random::seed(cases.at("random_seed").get<uint64_t>());
  auto again = randint();
  EXPECT_TRUE(same_bits(a, want.at("randint_a")));
  EXPECT_TRUE(same_bits(u, want.at("uniform")));
  EXPECT_TRUE(same_bits(b, want.at("randint_b")));
  EXPECT_TRUE(same_bits(again, want.at("randint_again")));
}

TEST(SamplerGolden, MakeSamplerTokensMatchMlxLm) {
  nlohmann::json cases;
  Arrays inputs, want;
  ASSERT_TRUE(load_cases(&cases));
  ASSERT_TRUE(load_arrays("inputs.safetensors", &inputs));
  ASSERT_TRUE(load_arrays("tokens.safetensors", &want));
  int draws = cases.at("draws").get<int>();
  int checked = 0;
  for (const auto& c : cases.at("sampler_cases")) {
    auto name = c.at("name").get<std::string>();
    auto sampler = make_sampler(params_from(c.at("params")));
    for (const auto& in : cases.at("sampler_inputs")) {
      auto key = name + "." + in.get<std::string>();
      mx::random::seed(c.at("seed").get<uint64_t>());
      std::vector<mx::array> tokens;
      const auto& logprobs = inputs.at("lp." + in.get<std::string>());
      for (int i = 0; i < draws; ++i) tokens.push_back(sampler(logprobs));
      EXPECT_TRUE(same_bits(mx::stack(tokens), want.at(key))) << key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(want.size()));
}

mx::array run_filter(const nlohmann::json& c, const mx::array& x) {
  const auto& a = c.at("args");
  if (a.contains("seed")) mx::random::seed(a.at("seed").get<uint64_t>());
  auto kind = c.at("kind").get<std::string>();
  if (kind == "top_p") return apply_top_p(x, a.at("top_p").get<double>());
  if (kind == "min_p") {
    return apply_min_p(x, a.at("min_p").get<double>(), a.at("min_tokens_to_keep").get<int>());
  }
  if (kind == "top_k") return apply_top_k(x, a.at("top_k").get<int>());
  if (kind == "xtc") {
    return apply_xtc(x, a.at("p").get<double>(), a.at("t").get<double>(),
                     a.at("special").get<std::vector<int>>());
  }
  if (kind == "categorical") return categorical_sampling(x, a.at("temp").get<double>());
  throw std::runtime_error("unknown filter kind " + kind);
}

TEST(SamplerGolden, FiltersMatchMlxLm) {
  nlohmann::json cases;
  Arrays inputs, want;
  ASSERT_TRUE(load_cases(&cases));
  ASSERT_TRUE(load_arrays("inputs.safetensors", &inputs));
  ASSERT_TRUE(load_arrays("filters.safetensors", &want));
  int checked = 0;
  for (const auto& c : cases.at("filter_cases")) {
    for (const auto& in : cases.at("sampler_inputs")) {
      auto key = c.at("name").get<std::string>() + "." + in.get<std::string>();
      auto got = run_filter(c, inputs.at("lp." + in.get<std::string>()));
      EXPECT_TRUE(same_bits(got, want.at(key))) << key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(want.size()));
}

}  // namespace
}  // namespace mlxcpp
