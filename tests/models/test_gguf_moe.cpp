// GGUF import of qwen3moe, glm4 and glm4moe end to end on tiny GGUFs written by gguf-py
// (tools/oracle/gguf_moe_goldens.py): convert_gguf gives back the source checkpoint's config
// fields and every tensor equal to gguf-py's dequantization, and the snapshot, loaded in parity
// mode, gives logits bit-identical to mlx-lm's on the snapshot an exact import gives (built by the
// oracle from the GGUF's blocks, with the source checkpoint's config).
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "../artifacts/artifacts_test_util.h"
#include "artifacts/gguf_convert.h"
#include "core/json_file.h"
#include "golden_model.h"
#include "models/model.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

fs::path goldens() { return golden_dir() / "gguf_moe"; }

class GgufMoe : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    case_ = JsonView::parse_file(goldens() / "cases.json").at(GetParam());
    report_ = convert_gguf(goldens() / case_.at("gguf").get<std::string>(), dir_.path());
  }
  static mx::array forward(const Model& m, LayerCaches& caches, const std::vector<int>& ids, int begin, int end) {
    return mx::squeeze(m(mx::array(ids.data() + begin, {1, end - begin}, mx::int32), &caches), 0);
  }

  TempDir dir_;
  json case_;
  GgufConvertReport report_;
};

TEST_P(GgufMoe, ConfigAndTensorsEqualTheSource) {
  EXPECT_EQ(report_.architecture, case_.at("arch"));
  const json config = JsonView::parse_file(dir_ / "config.json");
  for (const auto& [key, want] : case_.at("config").items()) {
    ASSERT_TRUE(config.contains(key)) << key;
    EXPECT_EQ(config.at(key), want) << key;
  }
  auto w = expect_snapshot_equals(dir_ / "model.safetensors", config, goldens() / case_.at("expected").get<std::string>());
  for (const auto& [name, _] : w) EXPECT_EQ(name.find("nextn"), std::string::npos) << name;  // MTP dropped
}

TEST_P(GgufMoe, LogitsEqualMlxLmInParityMode) {
  auto golden = load_golden_file("gguf_moe", GetParam() + ".logits", "gguf_moe_goldens.py");
  ASSERT_TRUE(golden);
  auto loaded = load_model(dir_.path().string(), ModelOptions::parity_mode());
  const Model& m = *loaded.model;
  const auto prompt = to_ints(golden->at("prompt"));

  auto caches = m.make_cache();
  auto prefill = forward(m, caches, prompt, 0, 20);
  EXPECT_EQ(max_abs_diff(prefill, golden->at("prefill_logits")), 0.0f);
  auto fed = to_ints(golden->at("decode_tokens"));
  std::vector<mx::array> steps;
  for (int i = 0; i < static_cast<int>(fed.size()); ++i) steps.push_back(forward(m, caches, fed, i, i + 1));
  EXPECT_EQ(max_abs_diff(mx::concatenate(steps, 0), golden->at("decode_logits")), 0.0f);

  auto chunked_caches = m.make_cache();
  std::vector<mx::array> parts;
  for (auto [a, b] : {std::pair{0, 7}, {7, 14}, {14, 20}}) parts.push_back(forward(m, chunked_caches, prompt, a, b));
  EXPECT_EQ(max_abs_diff(mx::concatenate(parts, 0), golden->at("chunked_logits")), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Cases, GgufMoe,
                         ::testing::Values("qwen3moe-f16", "qwen3moe-q4_0", "glm4-f16", "glm4-q4_0", "glm4moe-f16",
                                           "glm4moe-q4_0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s) if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
