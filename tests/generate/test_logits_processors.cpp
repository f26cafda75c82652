// Logits-processor tests: mlx-lm's presence/frequency exact-value cases, validation, and
// bit-exact replay of the goldens written by tools/oracle/sampler_goldens.py.
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "generate/logits_processors.h"
#include "test_support.h"

namespace mx = mlx::core;
namespace fs = std::filesystem;

// Designated initializers leave the other fields at their defaults, which is the point here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace mlxcpp {
namespace {

using Arrays = std::unordered_map<std::string, mx::array>;

mx::array int_tokens(const std::vector<int>& t) {
  return mx::array(t.begin(), {static_cast<int>(t.size())}, mx::int32);
}

float at(const mx::array& a, int row, int col) {
  return mx::slice(a, {row, col}, {row + 1, col + 1}).item<float>();
}

// --- tests/test_sample_utils.py ---

TEST(SampleUtils, PresencePenaltyAppliesOnce) {
  auto tokens = int_tokens({0, 0, 0, 1, 1});
  auto result = make_presence_penalty(0.5f, 5)(tokens, mx::zeros({1, 4}));
  EXPECT_FLOAT_EQ(at(result, 0, 0), -0.5f);
  EXPECT_FLOAT_EQ(at(result, 0, 1), -0.5f);
  EXPECT_FLOAT_EQ(at(result, 0, 2), 0.0f);
  EXPECT_FLOAT_EQ(at(result, 0, 3), 0.0f);
}

TEST(SampleUtils, FrequencyPenaltyIsProportional) {
  auto tokens = int_tokens({0, 0, 0, 1, 1});
  auto result = make_frequency_penalty(0.5f, 5)(tokens, mx::zeros({1, 4}));
  EXPECT_FLOAT_EQ(at(result, 0, 0), -1.5f);
  EXPECT_FLOAT_EQ(at(result, 0, 1), -1.0f);
  EXPECT_FLOAT_EQ(at(result, 0, 2), 0.0f);
  EXPECT_FLOAT_EQ(at(result, 0, 3), 0.0f);
}

// --- behaviour and validation ---

TEST(LogitsProcessors, ListFollowsMlxLmConditions) {
  EXPECT_TRUE(make_logits_processors({}).empty());
  EXPECT_TRUE(
      make_logits_processors({.repetition_penalty = 0.0f, .presence_penalty = 0.0f}).empty());
  EXPECT_EQ(make_logits_processors({.logit_bias = {{1, 2.0f}}, .frequency_penalty = 0.1f}).size(),
            2u);
}

TEST(LogitsProcessors, RepetitionPenaltyIsSignAware) {
  std::vector<float> v{2.0f, -2.0f, 1.0f};
  auto out = make_repetition_penalty(2.0f, 20)(int_tokens({0, 1}), mx::array(v.begin(), {1, 3}));
  EXPECT_FLOAT_EQ(at(out, 0, 0), 1.0f);
  EXPECT_FLOAT_EQ(at(out, 0, 1), -4.0f);
  EXPECT_FLOAT_EQ(at(out, 0, 2), 1.0f);
}

TEST(LogitsProcessors, EmptyHistoryLeavesLogits) {
  auto logits = mx::ones({2, 5});
  auto none = int_tokens({});
  for (const auto& p : make_logits_processors(
           {.repetition_penalty = 1.5f, .presence_penalty = 1.0f, .frequency_penalty = 1.0f})) {
    EXPECT_TRUE(mx::array_equal(p(none, logits), logits).item<bool>());
  }
}

void expect_request_error(const LogitsProcessorParams& p, const std::string& message) {
  try {
    make_logits_processors(p);
    ADD_FAILURE() << "expected RequestError: " << message;
  } catch (const RequestError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(LogitsProcessors, ValidationNamesFieldAndValue) {
  expect_request_error({.repetition_penalty = -1.5f},
                       "[logits_processors] repetition_penalty must be >= 0, got -1.5");
  expect_request_error({.repetition_penalty = 1.1f, .repetition_context_size = -2},
                       "[logits_processors] repetition_context_size must be >= 0, got -2");
  expect_request_error({.presence_context_size = -1},
                       "[logits_processors] presence_context_size must be >= 0, got -1");
  expect_request_error({.frequency_context_size = -7},
                       "[logits_processors] frequency_context_size must be >= 0, got -7");
  expect_request_error({.logit_bias = {{-3, 1.0f}}},
                       "[logits_processors] logit_bias token id must be >= 0, got -3");
  expect_request_error({.logit_bias = {{3, 1.0f}, {3, 2.0f}}},
                       "[logits_processors] logit_bias lists token id 3 twice");
}

TEST(LogitsProcessors, LogitBiasOutOfVocabularyIsRequestError) {
  auto bias = make_logit_bias({{7, 1.0f}});
  EXPECT_THROW(bias(int_tokens({}), mx::zeros({1, 4})), RequestError);
}

// --- goldens from tools/oracle/sampler_goldens.py ---

::testing::AssertionResult golden_path(const std::string& file, fs::path* out) {
  try {
    *out = test::golden_dir() / "sampler" / file;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << e.what();
  }
  if (!fs::exists(*out)) {
    return ::testing::AssertionFailure()
           << "missing golden " << *out
           << "; generate it with: .venv/bin/python tools/oracle/sampler_goldens.py OUTDIR "
              "and run with MLXCPP_GOLDEN_DIR=OUTDIR";
  }
  return ::testing::AssertionSuccess();
}

LogitsProcessorParams params_from(const nlohmann::json& j) {
  LogitsProcessorParams p;
  for (const auto& kv : j.value("logit_bias", nlohmann::json::array())) {
    p.logit_bias.emplace_back(kv.at(0).get<int>(), kv.at(1).get<float>());
  }
  auto opt = [&j](const char* key) -> std::optional<float> {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    return j.at(key).get<float>();
  };
  p.repetition_penalty = opt("repetition_penalty");
  p.presence_penalty = opt("presence_penalty");
  p.frequency_penalty = opt("frequency_penalty");
  p.repetition_context_size = j.value("repetition_context_size", 20);
  p.presence_context_size = j.value("presence_context_size", 20);
  p.frequency_context_size = j.value("frequency_context_size", 20);
  return p;
}

TEST(LogitsProcessorsGolden, MatchMlxLmExactly) {
  fs::path cases_path, inputs_path, want_path;
  ASSERT_TRUE(golden_path("cases.json", &cases_path));
  ASSERT_TRUE(golden_path("inputs.safetensors", &inputs_path));
  ASSERT_TRUE(golden_path("processors.safetensors", &want_path));
  auto cases = nlohmann::json::parse(std::ifstream(cases_path));
  Arrays inputs = mx::load_safetensors(inputs_path.string()).first;
  Arrays want = mx::load_safetensors(want_path.string()).first;

  int checked = 0;
  for (const auto& c : cases.at("processor_cases")) {
    auto name = c.at("name").get<std::string>();
    auto processors = make_logits_processors(params_from(c.at("params")));
    EXPECT_EQ(processors.size(), c.at("n").get<size_t>()) << name;
    for (const auto& in : cases.at("processor_inputs")) {
      for (const auto& [h_name, hist] : cases.at("histories").items()) {
        auto key = name + "." + in.get<std::string>() + "." + h_name;
        auto tokens = int_tokens(hist.get<std::vector<int>>());
        auto out = inputs.at("lg." + in.get<std::string>());
        for (const auto& p : processors) out = p(tokens, out);
        const auto& expected = want.at(key);
        ASSERT_EQ(out.dtype(), expected.dtype()) << key;
        ASSERT_EQ(out.shape(), expected.shape()) << key;
        EXPECT_EQ(test::max_abs_diff(out, expected), 0.0f) << key;
        EXPECT_TRUE(mx::array_equal(out, expected).item<bool>()) << key;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(want.size()));
}

}  // namespace
}  // namespace mlxcpp
