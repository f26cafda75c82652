// Checkpoint folders: config.json / generation_config.json / index errors name the file and
// the field; weight-file errors name the file (and tensor); sharded == single file.
#include <gtest/gtest.h>

#include <set>

#include <mlx/io.h>
#include <mlx/mlx.h>

#include "artifacts/checkpoint.h"
#include "artifacts/safetensors.h"
#include "artifacts_test_util.h"
#include "core/errors.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

json read_json(const fs::path& f) { return json::parse(read_bytes(f)); }
void write_json(const fs::path& f, const json& j) { write_bytes(f, j.dump(2)); }

class CheckpointTest : public ::testing::Test {
 protected:
  TempDir tmp_;
  fs::path model_ = copy_model("llama-q4g64", tmp_.path());
  fs::path config_ = model_ / "config.json";

  void edit_config(const std::function<void(json&)>& edit) {
    json c = read_json(config_);
    edit(c);
    write_json(config_, c);
  }
  std::string config_error() {
    return error_of<ConfigError>([&] { Checkpoint::open(model_); });
  }
};

}  // namespace

TEST_F(CheckpointTest, OpensATinyCheckpoint) {
  auto c = Checkpoint::open(model_);
  EXPECT_EQ(c.model_type(), "llama");
  EXPECT_EQ(c.config_file(), config_);
  EXPECT_TRUE(c.quant().enabled());
  EXPECT_EQ(c.quant().default_spec()->bits, 4);
  EXPECT_EQ(c.quant().default_spec()->group_size, 64);
  ASSERT_EQ(c.weight_files().size(), 1u);
  EXPECT_EQ(c.weight_files()[0].filename(), "model.safetensors");
  EXPECT_EQ(c.load_weights().size(), mx::load_safetensors((model_ / "model.safetensors").string()).first.size());
}

TEST_F(CheckpointTest, NotAFolder) {
  auto msg = error_of<ConfigError>([&] { Checkpoint::open(tmp_ / "nope"); });
  expect_contains(msg, {(tmp_ / "nope").string(), "not a model folder"});
  msg = error_of<ConfigError>([&] { Checkpoint::open(config_); });
  expect_contains(msg, {config_.string(), "not a model folder"});
}

TEST_F(CheckpointTest, MissingConfig) {
  fs::remove(config_);
  expect_contains(config_error(), {config_.string(), "does not exist"});
}

TEST_F(CheckpointTest, ConfigNotJson) {
  write_bytes(config_, "{\"model_type\": \"llama\",");
  expect_contains(config_error(), {config_.string(), "invalid JSON"});
}

TEST_F(CheckpointTest, ConfigNotAnObject) {
  write_bytes(config_, "[\"llama\"]");
  expect_contains(config_error(), {config_.string(), "JSON object"});
}

TEST_F(CheckpointTest, MissingOrIllTypedModelType) {
  edit_config([](json& c) { c.erase("model_type"); });
  expect_contains(config_error(), {config_.string(), "field 'model_type'", "missing"});
  edit_config([](json& c) { c["model_type"] = 3; });
  expect_contains(config_error(), {config_.string(), "field 'model_type'", "expected a string"});
}

TEST_F(CheckpointTest, BadQuantizationBlock) {
  edit_config([](json& c) { c["quantization"]["bits"] = 7; });
  expect_contains(config_error(), {config_.string(), "field 'quantization'", "bits=7"});
  edit_config([](json& c) { c["quantization"] = 4; });
  expect_contains(config_error(), {config_.string(), "field 'quantization'", "expected an object"});
  edit_config([](json& c) { c["quantization"] = {{"group_size", "64"}, {"bits", 4}}; });
  expect_contains(config_error(), {"field 'quantization.group_size'", "expected an integer"});
  edit_config([](json& c) { c["quantization"] = {{"group_size", 64}, {"bits", 4}, {"mode", "int3"}}; });
  expect_contains(config_error(), {"field 'quantization.mode'", "'int3' is not supported"});
}

TEST_F(CheckpointTest, EosIds) {
  auto gen = model_ / "generation_config.json";
  edit_config([](json& c) { c["eos_token_id"] = 2; });
  write_json(gen, {{"eos_token_id", {5, 6}}});
  EXPECT_EQ(Checkpoint::open(model_).eos_token_ids(), (std::vector<int64_t>{5, 6}));
  write_json(gen, json::object());
  EXPECT_EQ(Checkpoint::open(model_).eos_token_ids(), (std::vector<int64_t>{2}));
  edit_config([](json& c) { c["eos_token_id"] = "</s>"; });
  expect_contains(config_error(), {config_.string(), "field 'eos_token_id'"});
}

TEST_F(CheckpointTest, BadGenerationConfig) {
  auto gen = model_ / "generation_config.json";
  write_bytes(gen, "{oops");
  expect_contains(config_error(), {gen.string(), "invalid JSON"});
  write_bytes(gen, "3");
  expect_contains(config_error(), {gen.string(), "JSON object"});
  write_json(gen, {{"eos_token_id", {1, "x"}}});
  expect_contains(config_error(), {gen.string(), "field 'eos_token_id'", "\"x\""});
}

TEST_F(CheckpointTest, NoSafetensorsFiles) {
  fs::remove(model_ / "model.safetensors");
  fs::remove(model_ / "model.safetensors.index.json");
  write_bytes(model_ / "weights.npz", "x");  // not model*.safetensors
  auto msg = error_of<WeightError>([&] { Checkpoint::open(model_); });
  expect_contains(msg, {model_.string(), "no model*.safetensors"});
}

TEST_F(CheckpointTest, GlobsWithoutAnIndex) {
  fs::remove(model_ / "model.safetensors.index.json");
  auto c = Checkpoint::open(model_);
  ASSERT_EQ(c.weight_files().size(), 1u);
  EXPECT_EQ(c.weight_files()[0].filename(), "model.safetensors");
}

TEST_F(CheckpointTest, IndexErrors) {
  auto index = model_ / "model.safetensors.index.json";
  auto open_error = [&] { return error_of<ConfigError>([&] { Checkpoint::open(model_); }); };
  write_bytes(index, "{\"weight_map\": ");
  expect_contains(open_error(), {index.string(), "invalid JSON"});
  write_json(index, {{"metadata", json::object()}});
  expect_contains(open_error(), {index.string(), "field 'weight_map'", "missing"});
  write_json(index, {{"weight_map", json::array({"model.safetensors"})}});
  expect_contains(open_error(), {index.string(), "field 'weight_map'", "expected an object"});
  write_json(index, json::array());
  expect_contains(open_error(), {index.string(), "must be an object"});
  write_json(index, {{"weight_map", {{"model.norm.weight", 3}}}});
  expect_contains(open_error(), {index.string(), "field 'weight_map.model.norm.weight'", "file name"});
  for (const char* shard : {"../model.safetensors", "sub/model.safetensors", "..", "", "."}) {
    write_json(index, {{"weight_map", {{"model.norm.weight", shard}}}});
    expect_contains(open_error(), {index.string(), "field 'weight_map.model.norm.weight'", "snapshot folder"});
  }
}

TEST_F(CheckpointTest, IndexPointsToAMissingShard) {
  auto sharded = copy_model("llama-q4g64-sharded", tmp_.path());
  auto index = sharded / "model.safetensors.index.json";
  auto map = read_json(index)["weight_map"];
  std::string tensor;
  for (auto& [name, shard] : map.items()) {
    if (shard == "model-00002-of-00002.safetensors") tensor = name;
  }
  ASSERT_FALSE(tensor.empty());
  fs::remove(sharded / "model-00002-of-00002.safetensors");
  auto msg = error_of<WeightError>([&] { Checkpoint::open(sharded); });
  expect_contains(msg, {index.string(), "model-00002-of-00002.safetensors", "does not exist", "field 'weight_map."});
}

TEST(Checkpoint, ShardedLoadsTheSameTensorsAsSingleFile) {
  auto single = Checkpoint::open(golden_dir() / "models" / "llama-q4g64");
  auto sharded = Checkpoint::open(golden_dir() / "models" / "llama-q4g64-sharded");
  EXPECT_EQ(sharded.weight_files().size(), 2u);
  auto a = single.load_weights();
  auto b = sharded.load_weights();
  ASSERT_EQ(a.names(), b.names());
  std::set<std::string> files;
  for (const auto& name : a.names()) {
    files.insert(fs::path(b.file_of(name)).filename().string());
    auto x = a.take(name);
    auto y = b.take(name);
    EXPECT_EQ(x.dtype(), y.dtype()) << name;
    EXPECT_TRUE(mx::array_equal(x, y).item<bool>()) << name;
  }
  EXPECT_EQ(files, (std::set<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
}

TEST_F(CheckpointTest, TruncatedWeightFileFailsAtLoad) {
  auto file = model_ / "model.safetensors";
  auto bytes = read_bytes(file);
  write_bytes(file, bytes.substr(0, bytes.size() - 100));
  auto c = Checkpoint::open(model_);  // headers are read when weights are loaded
  auto msg = error_of<WeightError>([&] { c.load_weights(); });
  expect_contains(msg, {file.string(), "tensor '", "past the end of the data"});
}

TEST_F(CheckpointTest, TensorInTwoShards) {
  auto sharded = copy_model("llama-q4g64-sharded", tmp_.path());
  auto first = sharded / "model-00001-of-00002.safetensors";
  auto second = sharded / "model-00002-of-00002.safetensors";
  auto [arrays, meta] = mx::load_safetensors(second.string());
  auto one = mx::load_safetensors(first.string()).first;
  const std::string dup = one.begin()->first;
  arrays.insert_or_assign(dup, one.at(dup));
  mx::eval(arrays.at(dup));
  fs::path rewritten = sharded / "rewritten.safetensors";  // MLX appends the extension otherwise
  mx::save_safetensors(rewritten.string(), arrays, meta);
  fs::rename(rewritten, second);
  auto c = Checkpoint::open(sharded);
  auto msg = error_of<WeightError>([&] { c.load_weights(); });
  expect_contains(msg, {"tensor '" + dup + "'", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}
