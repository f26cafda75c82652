// load_model on broken copies of a tiny checkpoint: every fault is a ConfigError or WeightError
// naming the file and the field or tensor (never a crash, never a silently wrong model).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <unordered_map>

#include <mlx/io.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/model.h"
#include "test_support.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using nlohmann::json;

namespace {

using Tensors = std::unordered_map<std::string, mx::array>;

class LoadErrors : public ::testing::Test {
 protected:
  LoadErrors() {
    static std::atomic<int> counter{0};
    tmp_ = fs::temp_directory_path() /
           ("mlxcpp-load-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  ~LoadErrors() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  // Copies golden_dir()/models/<name>; later edits apply to this copy.
  fs::path use(const std::string& name) {
    model_ = tmp_ / name;
    fs::copy(mlxcpp::test::golden_dir() / "models" / name, model_, fs::copy_options::recursive);
    return model_;
  }
  fs::path config() const { return model_ / "config.json"; }

  void edit_config(const std::function<void(json&)>& edit) {
    std::ifstream in(config());
    json c = json::parse(in);
    edit(c);
    std::ofstream(config(), std::ios::trunc) << c.dump(2);
  }

  // Loads one weight file of the copy, lets `edit` change it, and writes it back.
  void edit_weights(const std::function<void(Tensors&)>& edit, const std::string& file = "model.safetensors") {
    auto [tensors, meta] = mx::load_safetensors((model_ / file).string());
    edit(tensors);
    fs::path staged = tmp_ / "staged.safetensors";  // written beside, then moved over
    mx::save_safetensors(staged.string(), tensors, meta);
    fs::rename(staged, model_ / file);
  }

  template <class E>
  std::string load_error() {
    try {
      load_model(model_, ModelOptions::parity_mode());
    } catch (const E& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
      return {};
    }
    ADD_FAILURE() << "load_model succeeded";
    return {};
  }

  static void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
    for (const auto& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    }
  }

  fs::path tmp_;
  fs::path model_;
};

}  // namespace

TEST_F(LoadErrors, UneditedCopyLoads) {  // control: the copy and rewrite helpers are sound
  use("llama-q4g64");
  edit_weights([](Tensors&) {});
  auto loaded = load_model(model_, ModelOptions::parity_mode());
  EXPECT_EQ(loaded.model->num_layers(), 2);
  EXPECT_EQ(loaded.model->vocab_size(), 512);
}

TEST_F(LoadErrors, MissingTensor) {
  use("llama-q4g64");
  edit_weights([](Tensors& t) { t.erase("model.norm.weight"); });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'model.norm.weight'", "missing"});
}

TEST_F(LoadErrors, MissingPartOfAQuantizedLayer) {
  use("llama-q4g64");
  edit_weights([](Tensors& t) { t.erase("model.layers.1.mlp.down_proj.biases"); });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'model.layers.1.mlp.down_proj.biases'", "missing"});
}

TEST_F(LoadErrors, MissingTensorInShardedCheckpoint) {
  use("llama-q4g64-sharded");
  std::ifstream in(model_ / "model.safetensors.index.json");
  const std::string shard = json::parse(in)["weight_map"]["model.norm.weight"].get<std::string>();
  edit_weights([](Tensors& t) { t.erase("model.norm.weight"); }, shard);
  expect_contains(load_error<WeightError>(), {model_.string(), "tensor 'model.norm.weight'", "missing",
                                              "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}

TEST_F(LoadErrors, WrongShape) {
  use("llama-q4g64");
  const std::string name = "model.layers.0.input_layernorm.weight";
  edit_weights([&](Tensors& t) { t.insert_or_assign(name, mx::reshape(t.at(name), {2, 64})); });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor '" + name + "'", "[2, 64]", "expected [128]"});
}

TEST_F(LoadErrors, TransposedDenseWeight) {
  use("llama-bf16");
  const std::string name = "model.layers.1.self_attn.k_proj.weight";  // [64, 128]
  edit_weights([&](Tensors& t) { t.insert_or_assign(name, mx::transpose(t.at(name))); });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor '" + name + "'", "[128, 64]", "expected [64, 128]"});
}

TEST_F(LoadErrors, LeftoverTensor) {
  use("llama-q4g64");
  edit_weights([](Tensors& t) { t.insert_or_assign("model.layers.0.self_attn.extra.weight", mx::zeros({4})); });
  expect_contains(load_error<WeightError>(),
                  {"model.safetensors", "tensor 'model.layers.0.self_attn.extra.weight'", "not used"});
}

TEST_F(LoadErrors, LeftoverTensorNamesItsShard) {
  use("llama-q4g64-sharded");
  edit_weights([](Tensors& t) { t.insert_or_assign("vision_tower.weight", mx::zeros({4})); },
               "model-00002-of-00002.safetensors");
  expect_contains(load_error<WeightError>(), {"model-00002-of-00002.safetensors", "tensor 'vision_tower.weight'"});
}

TEST_F(LoadErrors, UntiedHeadWithoutLmHead) {
  use("llama-q4g64");
  edit_config([](json& c) { c["tie_word_embeddings"] = false; });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'lm_head.", "missing"});
}

TEST_F(LoadErrors, TruncatedWeights) {
  use("llama-q4g64");
  auto file = model_ / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 64);
  expect_contains(load_error<WeightError>(), {file.string(), "tensor '", "past the end of the data"});
}

TEST_F(LoadErrors, UnknownModelType) {
  use("llama-q4g64");
  edit_config([](json& c) { c["model_type"] = "gpt9"; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'model_type'", "'gpt9'", "known: llama"});
}

TEST_F(LoadErrors, IllTypedRequiredField) {
  use("llama-q4g64");
  edit_config([](json& c) { c["hidden_size"] = "128"; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'hidden_size'", "expected an integer", "\"128\""});
  edit_config([](json& c) { c["hidden_size"] = 1e300; });  // used to be an undefined cast
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'hidden_size'"});
  edit_config([](json& c) { c["hidden_size"] = 128; c["rms_norm_eps"] = "1e-5"; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rms_norm_eps'", "expected a number"});
}

TEST_F(LoadErrors, MissingRequiredField) {
  use("llama-q4g64");
  edit_config([](json& c) { c.erase("num_hidden_layers"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'num_hidden_layers'", "missing"});
}

TEST_F(LoadErrors, OutOfRangeDimensions) {
  use("llama-q4g64");
  edit_config([](json& c) { c["num_hidden_layers"] = 0; });
  expect_contains(load_error<ConfigError>(), {config().string(), "must be positive"});
  edit_config([](json& c) { c["num_hidden_layers"] = 2; c["num_key_value_heads"] = 3; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'num_key_value_heads'"});
}

TEST_F(LoadErrors, ConfigDisagreesWithTheWeights) {
  use("llama-q4g64");
  edit_config([](json& c) { c["num_hidden_layers"] = 3; });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'model.layers.2.", "missing"});
  edit_config([](json& c) { c["num_hidden_layers"] = 1; });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'model.layers.1.", "not used"});
  edit_config([](json& c) { c["num_hidden_layers"] = 2; c["vocab_size"] = 500; });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'model.embed_tokens.", "expected [500, "});
}

TEST_F(LoadErrors, BadRopeScaling) {
  use("llama-q4g64");
  edit_config([](json& c) { c["rope_scaling"] = "linear"; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_scaling'", "expected an object"});
  edit_config([](json& c) { c["rope_scaling"] = {{"type", "foo"}, {"factor", 2.0}}; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_scaling.type'", "'foo' is not supported"});
  edit_config([](json& c) { c["rope_scaling"] = {{"rope_type", 3}}; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_scaling.rope_type'", "expected a string"});
}

TEST_F(LoadErrors, BadQuantizationBlock) {
  use("llama-q4g64");
  edit_config([](json& c) { c["quantization"]["bits"] = 7; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'quantization'", "bits=7"});
}

TEST_F(LoadErrors, PerPathOverrideDisagreesWithTheWeights) {
  use("llama-q4g64");  // stored 4-bit / group 64; the override claims 8-bit / group 32
  edit_config([](json& c) { c["quantization"]["model.layers.0.mlp.up_proj"] = {{"bits", 8}, {"group_size", 32}}; });
  expect_contains(load_error<WeightError>(), {"model.safetensors", "tensor 'model.layers.0.mlp.up_proj.weight'", "expected [256, 32]"});
}

TEST_F(LoadErrors, BadLayerTypes) {
  use("llama-bf16");
  edit_config([](json& c) { c["layer_types"] = json::array({"full_attention"}); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'layer_types'"});
  edit_config([](json& c) { c["layer_types"] = json::array({"full_attention", "global"}); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'layer_types'", "global"});
}

TEST_F(LoadErrors, Qwen3ConfigAndNorms) {
  use("qwen3-q4g64");
  // transformers >= 5 nests rope_theta under rope_parameters: the same model, the same logits.
  auto logits = [&] {
    auto m = load_model(model_, ModelOptions::parity_mode());
    auto ids = mx::array({1, 5, 9, 300}, {1, 4}, mx::int32);
    auto out = (*m.model)(ids, nullptr);
    mx::eval(out);
    return out;
  };
  auto before = logits();
  edit_config([](json& c) {
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c["rope_theta"]}};
    c.erase("rope_theta");
  });
  EXPECT_TRUE(mx::array_equal(logits(), before).item<bool>());
  edit_config([](json& c) { c.erase("rope_parameters"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_theta'", "missing"});
  edit_config([](json& c) { c["rope_theta"] = 1000000.0; c.erase("head_dim"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'head_dim'"});
  edit_config([](json& c) { c["head_dim"] = 48; });
  edit_weights([](Tensors& t) { t.erase("model.layers.1.self_attn.k_norm.weight"); });
  expect_contains(load_error<WeightError>(), {"tensor 'model.layers.1.self_attn.k_norm.weight'", "missing"});
}

TEST_F(LoadErrors, Phi3RopeScalingAndFusedWeights) {
  use("phi3-longrope-q4g64");
  edit_config([](json& c) { c["rope_scaling"].erase("long_factor"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_scaling.long_factor'", "missing"});
  edit_config([](json& c) { c["rope_scaling"]["long_factor"] = json::array({1.0, 2.0}); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_scaling.long_factor'", "12"});
  edit_config([](json& c) {
    c["rope_scaling"]["long_factor"] = std::vector<double>(12, 1.0);
    c["rope_scaling"].erase("short_factor");
  });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'rope_scaling.short_factor'"});
  edit_config([](json& c) { c["partial_rotary_factor"] = 0.01; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'partial_rotary_factor'"});
  edit_config([](json& c) { c.erase("partial_rotary_factor"); c.erase("rope_scaling"); });
  edit_weights([](Tensors& t) { t.erase("model.layers.1.self_attn.qkv_proj.weight"); });
  expect_contains(load_error<WeightError>(), {"tensor 'model.layers.1.self_attn.qkv_proj.weight'", "missing"});
}

TEST_F(LoadErrors, MiniCpmScalesAndHead) {
  use("minicpm-bf16");
  // minicpm.py's sanitize: no lm_head.weight -> the embedding's weight serves as the head.
  auto logits = [&] {
    auto m = load_model(model_, ModelOptions::parity_mode());
    auto out = (*m.model)(mx::array({1, 5, 9, 300}, {1, 4}, mx::int32), nullptr);
    mx::eval(out);
    return out;
  };
  edit_weights([](Tensors& t) { t.insert_or_assign("lm_head.weight", t.at("model.embed_tokens.weight")); });
  auto with_copy = logits();
  edit_weights([](Tensors& t) { t.erase("lm_head.weight"); });
  EXPECT_TRUE(mx::array_equal(logits(), with_copy).item<bool>());
  edit_config([](json& c) { c.erase("scale_depth"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'scale_depth'"});
  edit_config([](json& c) { c["scale_depth"] = 1.4; c["dim_model_base"] = 0; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'dim_model_base'"});
  edit_config([](json& c) { c["dim_model_base"] = 48; c["tie_word_embeddings"] = true; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'tie_word_embeddings'"});
}

TEST_F(LoadErrors, Olmo2NormsAndGraniteMultipliers) {
  use("olmo2-bf16");
  // olmo2.py's q_norm spans every head (heads * head_dim = 128), not one head.
  edit_weights([](Tensors& t) { t.insert_or_assign("model.layers.0.self_attn.q_norm.weight", mx::ones({32}, mx::bfloat16)); });
  expect_contains(load_error<WeightError>(), {"model.layers.0.self_attn.q_norm.weight"});
  edit_weights([](Tensors& t) {
    t.insert_or_assign("model.layers.0.self_attn.q_norm.weight", mx::ones({128}, mx::bfloat16));
    t.erase("model.layers.1.post_feedforward_layernorm.weight");
  });
  expect_contains(load_error<WeightError>(), {"tensor 'model.layers.1.post_feedforward_layernorm.weight'", "missing"});
  use("granite-bf16");
  for (std::string field : {"logits_scaling", "attention_multiplier", "embedding_multiplier", "residual_multiplier"}) {
    json value;
    edit_config([&](json& c) { value = c[field]; c.erase(field); });
    expect_contains(load_error<ConfigError>(), {config().string(), "field '" + field + "'"});
    edit_config([&](json& c) { c[field] = value; });
  }
  edit_config([](json& c) { c["logits_scaling"] = 0; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'logits_scaling'"});
}

TEST_F(LoadErrors, Mistral3TextConfig) {
  use("mistral3-q4g64");
  // ministral3.py reads the llama-4 attention temperature from rope_parameters.
  edit_config([](json& c) { c["text_config"]["rope_parameters"].erase("llama_4_scaling_beta"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'text_config.rope_parameters.llama_4_scaling_beta'"});
  edit_config([](json& c) { c["text_config"]["rope_parameters"]["llama_4_scaling_beta"] = 0.1; c["text_config"]["model_type"] = "mistral4"; });
  expect_contains(load_error<ConfigError>(), {config().string(), "mistral4"});
  edit_config([](json& c) { c.erase("text_config"); });
  expect_contains(load_error<ConfigError>(), {config().string(), "text_config"});
}

TEST_F(LoadErrors, Gemma4ConfigFields) {
  use("gemma4-text-bf16");
  edit_config([](json& c) { c["layer_types"][1] = "chunked_attention"; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'layer_types'", "'chunked_attention'"});
  edit_config([](json& c) { c["layer_types"][1] = "sliding_attention"; c["num_kv_shared_layers"] = 6; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'num_kv_shared_layers'", "6"});
  // Layers 2..5 shared: full layer 2 has no earlier full layer to read.
  edit_config([](json& c) { c["num_kv_shared_layers"] = 4; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'num_kv_shared_layers'", "shared layer 2"});
  edit_config([](json& c) {
    c["num_kv_shared_layers"] = 2;
    c["rope_parameters"]["full_attention"]["rope_type"] = "foo";
  });
  expect_contains(load_error<ConfigError>(),
                  {config().string(), "field 'rope_parameters.full_attention.rope_type'", "'foo'"});
  edit_config([](json& c) {
    c["rope_parameters"]["full_attention"]["rope_type"] = "proportional";
    c["enable_moe_block"] = true;
  });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'num_experts'", "missing"});
  edit_config([](json& c) { c["num_experts"] = 4; c["top_k_experts"] = 5; c["moe_intermediate_size"] = 64; });
  expect_contains(load_error<ConfigError>(), {config().string(), "field 'top_k_experts'", "5"});
}

// The Hugging Face layout (model.language_model.* names, experts fused as gate_up_proj) is
// refused naming the file and the tensor, pointing at `convert --hf`.
TEST_F(LoadErrors, Gemma4HuggingFaceLayout) {
  use("gemma4-moe-untied-bf16");
  const std::string mlx_name = "language_model.model.layers.0.experts.switch_glu.down_proj.weight";
  const std::string hf_name = "model.language_model.layers.0.experts.down_proj";
  edit_weights([&](Tensors& t) {
    mx::array v = t.at(mlx_name);
    t.erase(mlx_name);
    t.insert_or_assign(hf_name, v);
  });
  expect_contains(load_error<ConfigError>(), {"model.safetensors", "'" + hf_name + "'", "convert --hf"});
  edit_weights([&](Tensors& t) {
    mx::array v = t.at(hf_name);
    t.erase(hf_name);
    t.insert_or_assign("language_model.model.layers.0.experts.gate_up_proj", v);
  });
  expect_contains(load_error<ConfigError>(), {"'language_model.model.layers.0.experts.gate_up_proj'", "convert --hf"});
}
