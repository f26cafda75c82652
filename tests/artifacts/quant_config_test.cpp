// QuantConfig (mlx-lm utils.load_model's class_predicate + infer_quant_config) and the strict
// WeightMap: per-path overrides, inference from stored shapes, and errors naming file + tensor.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <mlx/mlx.h>

#include "artifacts/checkpoint.h"
#include "artifacts/quant_config.h"
#include "artifacts/weight_map.h"
#include "artifacts_test_util.h"
#include "core/errors.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

QuantConfig parse(const json& config) {
  return QuantConfig::from_config(JsonView(&config, "m/config.json"));
}

// A layer `path` stored quantized with `bits`/`group_size`, `in` columns and 8 rows.
void add_quantized(WeightMap& w, const std::string& path, int in, int bits, int group_size,
                   mx::Dtype scales_dtype = mx::float16) {
  w.add(path + ".weight", mx::zeros({8, in * bits / 32}, mx::uint32), "m/model.safetensors");
  w.add(path + ".scales", mx::zeros({8, in / group_size}, scales_dtype), "m/model.safetensors");
}

const json kBase = {{"quantization", {{"group_size", 64}, {"bits", 4}}}};

}  // namespace

TEST(QuantConfig, NoBlockMeansUnquantized) {
  auto q = parse({{"model_type", "llama"}});
  EXPECT_FALSE(q.enabled());
  WeightMap w;
  add_quantized(w, "x", 128, 4, 64);
  EXPECT_FALSE(q.for_layer("x", 128, w).has_value());
}

TEST(QuantConfig, DefaultsPerMode) {
  auto q = parse({{"quantization", json::object()}});
  EXPECT_EQ(q.default_spec()->group_size, 64);
  EXPECT_EQ(q.default_spec()->bits, 4);
  EXPECT_EQ(q.default_spec()->mode, "affine");
  q = parse({{"quantization", {{"mode", "mxfp8"}}}});
  EXPECT_EQ(q.default_spec()->group_size, 32);
  EXPECT_EQ(q.default_spec()->bits, 8);
}

TEST(QuantConfig, PerPathOverrides) {
  json c = kBase;
  c["quantization"]["a.q_proj"] = {{"group_size", 32}, {"bits", 8}};
  c["quantization"]["a.lm_head"] = false;
  c["quantization"]["a.k_proj"] = true;
  auto q = parse(c);
  WeightMap w;  // the override wins over whatever is (not) stored
  auto qp = q.for_layer("a.q_proj", 128, w);
  ASSERT_TRUE(qp.has_value());
  EXPECT_EQ(qp->bits, 8);
  EXPECT_EQ(qp->group_size, 32);
  EXPECT_EQ(qp->mode, "affine");
  add_quantized(w, "a.lm_head", 128, 4, 64);
  EXPECT_FALSE(q.for_layer("a.lm_head", 128, w).has_value());
  auto kp = q.for_layer("a.k_proj", 128, w);
  ASSERT_TRUE(kp.has_value());
  EXPECT_EQ(kp->bits, 4);
  EXPECT_EQ(kp->group_size, 64);
}

TEST(QuantConfig, BadOverrideNamesItsPath) {
  json c = kBase;
  c["quantization"]["model.layers.0.mlp.up_proj"] = {{"bits", 7}};
  auto msg = error_of<ConfigError>([&] { parse(c); });
  expect_contains(msg, {"m/config.json", "field 'quantization.model.layers.0.mlp.up_proj'", "bits=7"});
  c = kBase;
  c["quantization"]["p"] = {{"mode", "int2"}};
  msg = error_of<ConfigError>([&] { parse(c); });
  expect_contains(msg, {"m/config.json", "field 'quantization.p.mode'", "'int2'"});
}

TEST(QuantConfig, BadDefaultBlock) {
  auto msg = error_of<ConfigError>([] { parse({{"quantization", {{"group_size", 64}, {"bits", 7}}}}); });
  expect_contains(msg, {"m/config.json", "field 'quantization'", "bits=7"});
  msg = error_of<ConfigError>([] { parse({{"quantization", {{"group_size", 48}, {"bits", 4}}}}); });
  expect_contains(msg, {"field 'quantization'", "group_size=48"});
  msg = error_of<ConfigError>([] { parse({{"quantization", {{"mode", "mxfp4"}, {"bits", 8}}}}); });
  expect_contains(msg, {"field 'quantization'", "mxfp4"});
  msg = error_of<ConfigError>([] { parse({{"quantization", {{"bits", "4"}}}}); });
  expect_contains(msg, {"field 'quantization.bits'", "expected an integer"});
}

TEST(QuantConfig, LegacyQuantizationConfig) {
  auto q = parse({{"quantization_config", {{"quant_method", "mxfp4"}}}});
  ASSERT_TRUE(q.enabled());
  EXPECT_EQ(q.default_spec()->mode, "mxfp4");
  EXPECT_EQ(q.default_spec()->group_size, 32);
  auto msg = error_of<ConfigError>([] { parse({{"quantization_config", {{"quant_method", "gptq"}}}}); });
  expect_contains(msg, {"m/config.json", "field 'quantization_config.quant_method'", "'gptq'"});
  // An MLX "quantization" block takes precedence over the HF one.
  q = parse({{"quantization", {{"group_size", 32}, {"bits", 8}}}, {"quantization_config", {{"quant_method", "gptq"}}}});
  EXPECT_EQ(q.default_spec()->bits, 8);
}

TEST(QuantConfig, InfersBitsAndGroupSizeFromShapes) {
  auto q = parse(kBase);  // default 4/64, but the stored layers say otherwise
  WeightMap w;
  add_quantized(w, "l.affine8", 128, 8, 32);
  add_quantized(w, "l.affine3", 128, 3, 128);  // 128 * 3 / 32 = 12 words per row
  add_quantized(w, "l.mxfp4", 128, 4, 32, mx::uint8);
  add_quantized(w, "l.nvfp4", 128, 4, 16, mx::uint8);
  add_quantized(w, "l.mxfp8", 128, 8, 32, mx::uint8);
  w.add("l.plain.weight", mx::zeros({8, 128}), "m/model.safetensors");
  struct Case { const char* path; int bits, group; const char* mode; };
  for (const Case& c : {Case{"l.affine8", 8, 32, "affine"}, Case{"l.affine3", 3, 128, "affine"},
                        Case{"l.mxfp4", 4, 32, "mxfp4"}, Case{"l.nvfp4", 4, 16, "nvfp4"},
                        Case{"l.mxfp8", 8, 32, "mxfp8"}}) {
    auto s = q.for_layer(c.path, 128, w);
    ASSERT_TRUE(s.has_value()) << c.path;
    EXPECT_EQ(s->bits, c.bits) << c.path;
    EXPECT_EQ(s->group_size, c.group) << c.path;
    EXPECT_EQ(s->mode, c.mode) << c.path;
  }
  EXPECT_FALSE(q.for_layer("l.plain", 128, w).has_value());  // no scales: stored unquantized
}

TEST(QuantConfig, UninferableShapesNameTheTensor) {
  auto q = parse(kBase);
  WeightMap w;
  add_quantized(w, "l.fp2", 128, 2, 64, mx::uint8);  // uint8 scales: no fp mode has 2 bits
  auto msg = error_of<WeightError>([&] { q.for_layer("l.fp2", 128, w); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'l.fp2.scales'", "2 bits with group size 64"});
  add_quantized(w, "l.seven", 128, 7, 64);  // affine with 7 bits: MLX has no such kernel
  msg = error_of<WeightError>([&] { q.for_layer("l.seven", 128, w); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'l.seven.scales'", "bits=7"});
  w.add("l.noweight.scales", mx::zeros({8, 2}), "m/model.safetensors");
  msg = error_of<WeightError>([&] { q.for_layer("l.noweight", 128, w); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'l.noweight.weight'", "missing"});
  w.add("l.scalar.weight", mx::zeros({8, 16}, mx::uint32), "m/model.safetensors");
  w.add("l.scalar.scales", mx::array(1.0f), "m/model.safetensors");
  msg = error_of<WeightError>([&] { q.for_layer("l.scalar", 128, w); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'l.scalar.scales'", "invalid shape"});
}

TEST(QuantConfig, MixedCheckpoint) {
  auto ckpt = Checkpoint::open(golden_dir() / "models" / "llama-mixed");
  auto w = ckpt.load_weights();
  auto attn = ckpt.quant().for_layer("model.layers.0.self_attn.q_proj", 128, w);
  ASSERT_TRUE(attn.has_value());
  EXPECT_EQ(attn->bits, 8);
  EXPECT_EQ(attn->group_size, 32);
  auto mlp = ckpt.quant().for_layer("model.layers.0.mlp.up_proj", 128, w);
  ASSERT_TRUE(mlp.has_value());
  EXPECT_EQ(mlp->bits, 4);
  EXPECT_EQ(mlp->group_size, 64);
}

TEST(QuantConfig, CheckQuantSpec) {
  EXPECT_NO_THROW(check_quant_spec({64, 4, "affine"}, "x"));
  EXPECT_NO_THROW(check_quant_spec({16, 4, "nvfp4"}, "x"));
  auto msg = error_of<ConfigError>([] { check_quant_spec({64, 7, "affine"}, "f.json: field 'quantization'"); });
  expect_contains(msg, {"f.json: field 'quantization'", "bits=7"});
  msg = error_of<ConfigError>([] { check_quant_spec({32, 4, "fp3"}, "w"); });
  expect_contains(msg, {"'fp3'"});
}

TEST(WeightMap, TakeChecksNamesAndShapes) {
  WeightMap w;
  w.add("a.weight", mx::zeros({2, 3}), "m/model.safetensors");
  w.add("b.weight", mx::zeros({4}), "m/model.safetensors");
  auto msg = error_of<WeightError>([&] { w.take("a.weight", mx::Shape{3, 2}); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'a.weight'", "[2, 3]", "expected [3, 2]"});
  EXPECT_TRUE(w.has("a.weight"));  // a failed take leaves the tensor
  EXPECT_EQ(w.take("a.weight", mx::Shape{2, 3}).shape(), (mx::Shape{2, 3}));
  msg = error_of<WeightError>([&] { w.take("a.weight"); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'a.weight'", "missing"});
  msg = error_of<WeightError>([&] { w.peek("zzz"); });
  expect_contains(msg, {"m/model.safetensors", "tensor 'zzz'", "missing"});
  EXPECT_FALSE(w.take_optional("zzz").has_value());
  w.drop("zzz");
  w.drop("b.weight");
  EXPECT_EQ(w.size(), 0u);
  EXPECT_NO_THROW(w.expect_consumed());
}

TEST(WeightMap, MissingInShardedNamesEveryShard) {
  WeightMap w;
  w.add("a", mx::zeros({1}), "m/model-00001-of-00002.safetensors");
  w.add("b", mx::zeros({1}), "m/model-00002-of-00002.safetensors");
  auto msg = error_of<WeightError>([&] { w.take("c"); });
  expect_contains(msg, {"m: tensor 'c'", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}

TEST(WeightMap, DuplicateTensor) {
  WeightMap w;
  w.add("a", mx::zeros({1}), "m/model-00001-of-00002.safetensors");
  auto msg = error_of<WeightError>([&] { w.add("a", mx::zeros({1}), "m/model-00002-of-00002.safetensors"); });
  expect_contains(msg, {"m/model-00002-of-00002.safetensors: tensor 'a'", "also in m/model-00001-of-00002.safetensors"});
}

TEST(WeightMap, LeftoversAreListed) {
  WeightMap w;
  w.add("extra.weight", mx::zeros({1}), "m/model.safetensors");
  auto msg = error_of<WeightError>([&] { w.expect_consumed(); });
  expect_contains(msg, {"m/model.safetensors: tensor 'extra.weight'", "not used"});
  for (int i = 100; i < 125; ++i) w.add(fmt::format("x{}", i), mx::zeros({1}), "m/model-2.safetensors");
  msg = error_of<WeightError>([&] { w.expect_consumed(); });
  expect_contains(msg, {"m/model.safetensors: tensor 'extra.weight'", "26 unused tensors",
                        "x100 (model-2.safetensors)", "... 6 more"});
}
