// `convert --hf` against mlx_lm.convert on the tiny checkpoints (tools/oracle/convert_goldens.py):
// every safetensors file byte for byte (tensors, their order and the header), config.json and
// model.safetensors.index.json byte for byte; and the inputs it must refuse, leaving no folder.
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "artifacts/hf_convert.h"
#include "artifacts/py_json.h"
#include "artifacts_test_util.h"
#include "core/errors.h"
#include "core/json_file.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

fs::path goldens() { return golden_dir() / "convert"; }

// convert()'s keywords as our options.
HfConvertOptions options_of(const json& args) {
  HfConvertOptions o;
  o.quantize = args.value("quantize", false);
  o.dequantize = args.value("dequantize", false);
  if (args.contains("q_bits")) o.bits = args["q_bits"].get<int>();
  if (args.contains("q_group_size")) o.group_size = args["q_group_size"].get<int>();
  o.mode = args.value("q_mode", std::string("affine"));
  if (args.contains("dtype")) o.dtype = args["dtype"].get<std::string>();
  if (args.contains("quant_predicate")) o.recipe = args["quant_predicate"].get<std::string>();
  return o;
}

std::vector<std::string> safetensors_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void expect_same_tensors(const fs::path& got_file, const fs::path& want_file) {
  auto got = mx::load_safetensors(got_file.string());
  auto want = mx::load_safetensors(want_file.string());
  EXPECT_EQ(got.second, want.second) << "metadata";
  std::set<std::string> got_names, want_names;
  for (const auto& [k, _] : got.first) got_names.insert(k);
  for (const auto& [k, _] : want.first) want_names.insert(k);
  ASSERT_EQ(got_names, want_names);
  for (const auto& [name, w] : want.first) {
    const auto& g = got.first.at(name);
    EXPECT_EQ(g.dtype(), w.dtype()) << name;
    ASSERT_EQ(g.shape(), w.shape()) << name;
    auto gc = mx::contiguous(g), wc = mx::contiguous(w);
    mx::eval(gc, wc);
    EXPECT_EQ(std::memcmp(gc.data<char>(), wc.data<char>(), wc.nbytes()), 0) << name << ": bytes differ";
  }
}

class HfConvert : public ::testing::TestWithParam<std::string> {};

TEST_P(HfConvert, OutputEqualsMlxLmConvert) {
  const json cases = JsonView::parse_file(goldens() / "cases.json");
  ASSERT_TRUE(cases.contains(GetParam())) << "run tools/oracle/convert_goldens.py";
  const json& c = cases.at(GetParam());
  TempDir tmp;
  const fs::path out = tmp / "out";
  auto options = options_of(c.at("args"));
  if (c.contains("max_shard_bytes")) options.max_shard_bytes = c.at("max_shard_bytes").get<uint64_t>();
  EXPECT_FALSE(convert_hf(goldens() / "in" / c.at("model").get<std::string>(), out, options).order_guessed);
  const fs::path want = goldens() / "out" / GetParam();
  EXPECT_EQ(read_bytes(out / "config.json"), read_bytes(want / "config.json"));
  EXPECT_EQ(read_bytes(out / "model.safetensors.index.json"), read_bytes(want / "model.safetensors.index.json"));
  ASSERT_EQ(safetensors_files(out), safetensors_files(want));
  for (const auto& f : safetensors_files(want)) {
    expect_same_tensors(out / f, want / f);
    EXPECT_TRUE(read_bytes(out / f) == read_bytes(want / f)) << f << ": same tensors, other file bytes (layout)";
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (auto& ch : s) {
    if (ch == '-') ch = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HfConvert,
    ::testing::Values("llama-q4g64", "llama-q8g32", "llama-q2g32", "llama-q3g128", "llama-q5g64", "llama-q6g32",
                      "llama-default", "llama-mixed_2_6", "llama-mixed_3_4", "llama-mixed_3_6", "llama-mixed_4_6",
                      "llama-mxfp4", "llama-nvfp4", "llama-mxfp8", "llama-float16", "llama-float32-q4g64",
                      "llama-dequantize", "mistral-bias-q4g64", "qwen2-q4g64", "qwen3-q4g64", "gemma3-text-q4g64",
                      "gemma3-nested-q4g64", "phi3-q4g64", "minicpm-q4g64", "minicpm-mixed_3_6", "olmo2-q4g64",
                      "granite-q4g64", "ministral3-q4g64", "mistral3-llama-q4g64", "qwen3-moe-q4g64",
                      "qwen3-moe-mixed_3_6", "qwen3-moe-mxfp4", "qwen3-moe-dequantize", "glm4-q4g64",
                      "glm4-moe-q4g64", "glm4-moe-float32", "glm4-moe-dequantize", "qwen3-moe-mixed-dequantize",
                      "smollm3-dequantize", "llama-swa-q4g64", "qwen3-untied-dequantize", "llama-mixed-requantize",
                      "llama-torch-dtype", "llama-sanitize", "qwen3-moe-hf-q4g64", "glm4-moe-hf-bf16", "mistral3-hf-q4g64",
                      "gemma3-vision-q4g64", "minicpm-headless-q4g64", "llama-sharded-q8g32", "gemma3-text-dtype-float32",
                      "qwen3_5-q4g64", "qwen3_5-mixed_3_6", "qwen3_5-float16", "qwen3_5-mxfp4", "qwen3_5-dequantize",
                      "qwen3_5-moe-dequantize", "qwen3_5-moe-q4g64", "qwen3_5-moe-mixed_2_6", "qwen3_5-moe-float32",
                      "qwen3-next-q4g64", "qwen3-next-float16", "qwen3-next-dequantize", "qwen3_5-hf-bf16",
                      "qwen3_5-hf-q4g64", "qwen3_5-moe-hf-q4g64", "qwen3-next-hf-bf16", "qwen3-next-hf-q4g64",
                      "gemma4-text-q4g64", "gemma4-text-mixed_3_6", "gemma4-text-float16", "gemma4-text-dequantize",
                      "gemma4-moe-q4g64", "gemma4-moe-mixed_2_6", "gemma4-moe-dequantize", "gemma4-hf-bf16", "gemma4-hf-q4g64",
                      "gemma4-text-hf-q4g64", "gemma4-moe-hf-q4g64"),
    case_name);

TEST(PythonJson, FloatsAsRepr) {
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(1e-6), "1e-06");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(10000.0), "10000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(0.0625), "0.0625");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(123456789.125), "123456789.125");
}

TEST(PythonJson, IndentAndEscapes) {
  nlohmann::ordered_json j = {{"b", {1, 2}}, {"a", nlohmann::ordered_json::object()}, {"s", "\xc3\xa9\n"}, {"e", nlohmann::ordered_json::array()}};
  EXPECT_EQ(python_json_dump(j), "{\n    \"b\": [\n        1,\n        2\n    ],\n    \"a\": {},\n    \"s\": \"\\u00e9\\n\",\n    \"e\": []\n}");
}

// --- inputs it must refuse: the error names the file or field, and no output folder is left.

class HfConvertErrors : public ::testing::Test {
 protected:
  void SetUp() override { in_ = copy_model("llama-bf16", tmp_.path()); }
  template <class E>
  std::string refused(const HfConvertOptions& o = {}) {
    auto msg = error_of<E>([&] { convert_hf(in_, tmp_ / "out", o); });
    EXPECT_FALSE(fs::exists(tmp_ / "out"));
    for (const auto& e : fs::directory_iterator(tmp_.path())) {
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
    }
    return msg;
  }
  TempDir tmp_;
  fs::path in_;
};

TEST_F(HfConvertErrors, LlamaTruncatedSafetensors) {
  auto bytes = read_bytes(in_ / "model.safetensors");
  write_bytes(in_ / "model.safetensors", bytes.substr(0, bytes.size() - 1000));
  expect_contains(refused<WeightError>(), {"model.safetensors", "truncated"});
}

TEST_F(HfConvertErrors, LlamaUnsupportedDtype) {
  write_safetensors(in_ / "model-extra.safetensors", {{"model.extra.weight", {{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}}},
                    std::string(16, '\0'));
  expect_contains(refused<WeightError>(), {"model-extra.safetensors", "model.extra.weight", "I64"});
}

TEST_F(HfConvertErrors, Mxfp4With8Bits) {
  HfConvertOptions o;
  o.quantize = true;
  o.mode = "mxfp4";
  o.bits = 8;
  expect_contains(refused<ConfigError>(o), {"mxfp4", "bits=8"});
}

TEST_F(HfConvertErrors, RecipeWithoutAffine) {
  HfConvertOptions o;
  o.quantize = true;
  o.mode = "nvfp4";
  o.recipe = "mixed_3_6";
  expect_contains(refused<ConfigError>(o), {"mixed_3_6", "affine"});
}

TEST_F(HfConvertErrors, FolderWithoutConfigIsNoSnapshot) {
  fs::remove(in_ / "config.json");
  expect_contains(refused<ConfigError>(), {"llama-bf16", "not a model snapshot", "config.json"});
}

TEST_F(HfConvertErrors, FolderWithoutWeightsIsNoSnapshot) {
  fs::remove(in_ / "model.safetensors");
  fs::remove(in_ / "model.safetensors.index.json");
  expect_contains(refused<WeightError>(), {"not a model snapshot", "safetensors"});
}

TEST_F(HfConvertErrors, PerExpertHfLayout) {
  write_safetensors(in_ / "model-extra.safetensors",
                    {{"model.layers.0.mlp.experts.0.up_proj.weight", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}},
                    std::string(4, '\0'));
  fs::remove(in_ / "model.safetensors.index.json");
  expect_contains(refused<WeightError>(), {"model.layers.0.mlp.experts.0.up_proj.weight", "mlx_lm.convert"});
}

TEST_F(HfConvertErrors, Qwen3MoeHfLayoutMissingExpert) {
  in_ = tmp_ / "qwen3-moe-hf";
  fs::copy(goldens() / "in" / "qwen3-moe-hf", in_, fs::copy_options::recursive);
  auto w = mx::load_safetensors((in_ / "model.safetensors").string()).first;
  w.erase("model.layers.1.mlp.experts.5.down_proj.weight");
  mx::save_safetensors((in_ / "model.safetensors").string(), w, {{"format", "mlx"}});
  expect_contains(refused<WeightError>(), {"model.layers.1.mlp.experts.5.down_proj.weight", "missing", "8 experts"});
}

TEST_F(HfConvertErrors, Qwen3_5MoeFusedExpertsWithoutDownProj) {
  in_ = tmp_ / "qwen3_5-moe-hf";
  fs::copy(goldens() / "in" / "qwen3_5-moe-hf", in_, fs::copy_options::recursive);
  auto w = mx::load_safetensors((in_ / "model.safetensors").string()).first;
  w.erase("model.language_model.layers.2.mlp.experts.down_proj");
  mx::save_safetensors((in_ / "model.safetensors").string(), w, {{"format", "mlx"}});
  expect_contains(refused<WeightError>(), {"language_model.model.layers.2.mlp.experts.down_proj", "missing", "gate_up_proj"});
}

TEST_F(HfConvertErrors, Qwen3NextHfLayoutMissingExpert) {
  in_ = tmp_ / "qwen3-next-hf";
  fs::copy(goldens() / "in" / "qwen3-next-hf", in_, fs::copy_options::recursive);
  auto w = mx::load_safetensors((in_ / "model.safetensors").string()).first;
  w.erase("model.layers.3.mlp.experts.7.gate_proj.weight");
  mx::save_safetensors((in_ / "model.safetensors").string(), w, {{"format", "mlx"}});
  expect_contains(refused<WeightError>(), {"model.layers.3.mlp.experts.7.gate_proj.weight", "missing", "8 experts"});
}

TEST_F(HfConvertErrors, Gemma4FusedExpertsOfOddWidth) {
  in_ = tmp_ / "gemma4-moe-hf";
  fs::copy(goldens() / "in" / "gemma4-moe-hf", in_, fs::copy_options::recursive);
  auto w = mx::load_safetensors((in_ / "model.safetensors").string()).first;
  const std::string name = "model.language_model.layers.3.experts.gate_up_proj";
  const mx::array fused = w.at(name);
  w.insert_or_assign(name, mx::slice(fused, {0, 0, 0}, {fused.shape(0), fused.shape(1) - 1, fused.shape(2)}));
  mx::save_safetensors((in_ / "model.safetensors").string(), w, {{"format", "pt"}});
  expect_contains(refused<WeightError>(), {"language_model.model.layers.3.experts.gate_up_proj", "2*moe_intermediate"});
}

TEST_F(HfConvertErrors, QuantizeAndDequantize) {
  HfConvertOptions o;
  o.quantize = o.dequantize = true;
  expect_contains(refused<ConfigError>(o), {"--dequantize"});
}

TEST_F(HfConvertErrors, NonEmptyOutputFolder) {
  fs::create_directories(tmp_ / "out");
  write_bytes(tmp_ / "out" / "keep.txt", "x");
  auto msg = error_of<ConfigError>([&] { convert_hf(in_, tmp_ / "out", {}); });
  expect_contains(msg, {"out", "not an empty folder", "mlx_lm.convert"});
  EXPECT_EQ(read_bytes(tmp_ / "out" / "keep.txt"), "x");
}

TEST_F(HfConvertErrors, UnknownModelTypeConvertsWithGuessedOrder) {
  auto config = read_bytes(in_ / "config.json");
  const std::string from = "\"model_type\": \"llama\"";
  config.replace(config.find(from), from.size(), "\"model_type\": \"llama_like\"");
  write_bytes(in_ / "config.json", config);
  auto r = convert_hf(in_, tmp_ / "out", {});
  EXPECT_TRUE(r.order_guessed);
  EXPECT_EQ(r.model_type, "llama_like");
  EXPECT_TRUE(fs::exists(tmp_ / "out" / "model.safetensors"));
}

TEST_F(HfConvertErrors, OutputWithTrailingSlash) {
  convert_hf(in_, (tmp_ / "out").string() + "/", {});
  EXPECT_TRUE(fs::exists(tmp_ / "out" / "model.safetensors"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_ / "out"), fs::directory_iterator()), 4);  // no staging folder inside
}

TEST_F(HfConvertErrors, EmptyOutputFolderIsFilled) {
  fs::create_directories(tmp_ / "out");
  convert_hf(in_, tmp_ / "out", {});
  EXPECT_TRUE(fs::exists(tmp_ / "out" / "model.safetensors"));
}

}  // namespace
