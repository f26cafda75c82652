// `convert --hf` end to end: the snapshot our converter writes from a tiny bf16 checkpoint loads in
// parity mode and gives logits bit-identical to mlx-lm's on the snapshot mlx_lm.convert wrote
// from the same input (tools/oracle/convert_goldens.py: prompt, prefill, 16 decode steps).
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "../artifacts/artifacts_test_util.h"
#include "artifacts/hf_convert.h"
#include "golden_model.h"
#include "models/model.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

struct Case {
  std::string name, model;
  HfConvertOptions options;
};

Case make_case(const std::string& name, const std::string& model, std::optional<std::string> recipe = {}) {
  Case c{name, model, {}};
  c.options.quantize = true;
  c.options.bits = 4;
  c.options.group_size = 64;
  c.options.recipe = std::move(recipe);
  return c;
}

class HfConvertLogits : public ::testing::TestWithParam<Case> {};

TEST_P(HfConvertLogits, EqualMlxLmOnItsConversion) {
  const Case& c = GetParam();
  auto golden = load_golden_file("convert", c.name + ".logits", "convert_goldens.py");
  ASSERT_TRUE(golden);
  TempDir tmp;
  convert_hf(golden_dir() / "convert" / "in" / c.model, tmp / "out", c.options);
  auto loaded = load_model((tmp / "out").string(), ModelOptions::parity_mode());
  const Model& m = *loaded.model;
  const auto prompt = to_ints(golden->at("prompt"));
  auto caches = m.make_cache();
  auto prefill = mx::squeeze(m(mx::array(prompt.data(), {1, 20}, mx::int32), &caches), 0);
  EXPECT_EQ(max_abs_diff(prefill, golden->at("prefill_logits")), 0.0f);
  std::vector<mx::array> steps;
  for (int t : to_ints(golden->at("decode_tokens"))) {
    steps.push_back(mx::squeeze(m(mx::array({t}, {1, 1}, mx::int32), &caches), 0));
  }
  EXPECT_EQ(max_abs_diff(mx::concatenate(steps, 0), golden->at("decode_logits")), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Cases, HfConvertLogits,
                         ::testing::Values(make_case("llama-q4g64", "llama-bf16"),
                                           make_case("llama-mixed_3_6", "llama-bf16", "mixed_3_6"),
                                           make_case("qwen3-moe-q4g64", "qwen3-moe-bf16"),
                                           make_case("glm4-moe-q4g64", "glm4-moe-bf16"),
                                           make_case("qwen3_5-q4g64", "qwen3_5-bf16"),
                                           make_case("qwen3_5-moe-q4g64", "qwen3_5-moe-bf16"),
                                           make_case("qwen3-next-q4g64", "qwen3-next-bf16"),
                                           make_case("gemma4-text-q4g64", "gemma4-text-bf16"),
                                           make_case("gemma4-moe-q4g64", "gemma4-moe-untied-bf16"),
                                           make_case("gemma4-hf-q4g64", "gemma4-hf")),
                         [](const auto& info) {
                           std::string s = info.param.name;
                           for (auto& ch : s) {
                             if (ch == '-') ch = '_';
                           }
                           return s;
                         });

}  // namespace
