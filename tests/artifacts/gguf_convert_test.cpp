// GGUF import end to end on tiny llama GGUFs written by gguf-py (tools/oracle/gguf_goldens.py):
// every tensor of the snapshot, dequantized by MLX, equals gguf-py's dequantization with the
// Q/K permutation undone, bit for bit; the snapshot opens as a Checkpoint; bad inputs fail clearly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <mlx/io.h>
#include <mlx/mlx.h>

#include "artifacts/checkpoint.h"
#include "artifacts/gguf_convert.h"
#include "artifacts_test_util.h"
#include "core/errors.h"
#include "core/json_file.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

fs::path gguf_goldens() { return golden_dir() / "gguf"; }

fs::path vocab_dir() {
  const char* env = std::getenv("MLXCPP_GGUF_VOCAB_DIR");
  return env ? env : "/work/shared/fixtures/gguf-vocab";
}

class GgufConvert : public ::testing::TestWithParam<std::string> {
 protected:
  TempDir dir_;
};

}  // namespace

TEST_P(GgufConvert, TensorsEqualGgufPyDequantization) {
  const json cases = JsonView::parse_file(gguf_goldens() / "cases.json");
  const json& c = cases.at(GetParam());
  auto report = convert_gguf(gguf_goldens() / c.at("gguf").get<std::string>(), dir_.path());
  const std::string arch = c.at("arch");
  EXPECT_EQ(report.architecture, arch);

  const json config = JsonView::parse_file(dir_ / "config.json");
  EXPECT_EQ(config.at("model_type"), arch);
  EXPECT_EQ(config.at("num_attention_heads"), 4);
  EXPECT_EQ(config.at("num_key_value_heads"), 2);
  EXPECT_EQ(config.at("hidden_size"), 128);
  EXPECT_EQ(config.at("head_dim"), arch == "qwen3" ? 48 : 32);
  // phi3-longrope-bf16 and olmo2-bf16 are untied; minicpm never is (the embedding is written as lm_head too).
  EXPECT_EQ(config.at("tie_word_embeddings"), arch != "phi3" && arch != "minicpm" && arch != "olmo2");
  EXPECT_EQ(config.at("vocab_size"), 512);
  if (arch == "minicpm") {  // scales of minicpm-bf16 back from the GGUF's float32 keys
    EXPECT_EQ(config.at("scale_emb"), 12.0);
    EXPECT_EQ(config.at("dim_model_base"), 48);
    // residual_scale = scale_depth / sqrt(3) survives the float32 round trip.
    EXPECT_EQ(static_cast<float>(config.at("scale_depth").get<double>() / std::sqrt(3.0)),
              static_cast<float>(1.4 / std::sqrt(3.0)));
  }
  if (arch == "granite") {  // granite-bf16's multipliers back from the GGUF's float32 keys
    EXPECT_EQ(config.at("embedding_multiplier"), 12.0);
    EXPECT_EQ(config.at("attention_multiplier"), 0.0625);
    EXPECT_EQ(static_cast<float>(config.at("residual_multiplier").get<double>()), 0.22f);
    EXPECT_EQ(config.at("logits_scaling"), 3.0);
  }
  if (arch == "phi3") {  // rope factors from the rope_factors_* tensors, 24 of 32 dims rotated
    const json tiny = JsonView::parse_file(golden_dir() / "models" / "phi3-longrope-bf16" / "config.json");
    EXPECT_EQ(config.at("partial_rotary_factor"), 0.75);
    EXPECT_EQ(config.at("original_max_position_embeddings"), 64);
    const json& rs = config.at("rope_scaling");
    EXPECT_EQ(rs.at("type"), "longrope");
    for (const char* key : {"long_factor", "short_factor"}) {
      const json& want = tiny.at("rope_scaling").at(key);
      ASSERT_EQ(rs.at(key).size(), want.size()) << key;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(rs.at(key)[i].get<float>(), want[i].get<float>()) << key << " " << i;
      }
    }
  }

  expect_snapshot_equals(dir_ / "model.safetensors", config, gguf_goldens() / c.at("expected").get<std::string>());
  if (GetParam() == "q4_0") {  // matrices Q4_0 (default), the embedding Q8_0 (override)
    const json& q = config.at("quantization");
    EXPECT_EQ(q.at("bits"), 4);
    EXPECT_EQ(q.at("group_size"), 32);
    EXPECT_EQ(q.at("model.embed_tokens").at("bits"), 8);
  }
  if (GetParam() == "f16") {
    EXPECT_FALSE(config.contains("quantization"));
  }

  // Our own loader accepts the snapshot, and the tokenizer files are there.
  auto ck = Checkpoint::open(dir_.path());
  EXPECT_EQ(ck.model_type(), arch);
  const json tok = JsonView::parse_file(dir_ / "tokenizer.json");
  EXPECT_EQ(tok.at("model").at("type"), "BPE");
  EXPECT_EQ(tok.at("added_tokens").at(0).at("content"), "<|endoftext|>");
}

INSTANTIATE_TEST_SUITE_P(Cases, GgufConvert,
                         ::testing::Values("q8_0", "q4_0", "f16", "qwen3-q8_0", "phi3-q8_0", "minicpm-q4_0",
                                           "olmo2-q8_0", "granite-q8_0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s) if (ch == '-') ch = '_';
                           return s;
                         });

TEST(GgufConvertErrors, UnsupportedArchitectureIsNamed) {
  auto file = vocab_dir() / "ggml-vocab-gpt-2.gguf";
  if (!fs::exists(file)) GTEST_SKIP() << "no fixture " << file;
  TempDir dir;
  auto msg = error_of<ConfigError>([&] { convert_gguf(file, dir.path()); });
  expect_contains(msg, {file.string(), "general.architecture", "unsupported architecture 'gpt2'", "llama"});
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
}

TEST(GgufConvertErrors, UnsupportedTokenizerIsNamed) {
  auto file = vocab_dir() / "ggml-vocab-bert-bge.gguf";
  if (!fs::exists(file)) GTEST_SKIP() << "no fixture " << file;
  TempDir dir;
  GgufConvertOptions o;
  o.tokenizer_only = true;
  auto msg = error_of<ConfigError>([&] { convert_gguf(file, dir.path(), o); });
  expect_contains(msg, {"tokenizer.ggml.model", "'bert' is not supported", "gpt2, llama"});
}

TEST(GgufConvertErrors, CorruptFileIsAWeightError) {
  TempDir dir;
  auto file = dir / "bad.gguf";
  std::string bytes = read_bytes(gguf_goldens() / "tiny-llama-q8_0.gguf");
  write_bytes(file, bytes.substr(0, bytes.size() / 2));
  auto msg = error_of<WeightError>([&] { convert_gguf(file, dir / "out"); });
  expect_contains(msg, {file.string(), "past the end"});
}
