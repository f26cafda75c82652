#include "golden_model.h"

#include <filesystem>
#include <stdexcept>

#include <mlx/io.h>
#include <mlx/ops.h>

#include "test_support.h"

namespace mx = mlx::core;

namespace mlxcpp::test {

const std::vector<std::string>& tiny_model_names() {
  static const std::vector<std::string> kNames = {
      "llama-bf16",  "llama-q4g64",        "llama-q8g32",     "llama3rope-untied-q4g64",
      "llama-swa-bf16", "llama-mixed",     "llama-q4g64-sharded", "qwen2-bf16",
      "qwen2-q4g64", "qwen2-q8g32", "qwen3-bf16", "qwen3-q4g64", "qwen3-untied-q8g32", "llama-q2g32", "llama-q3g128", "llama-q5g64", "llama-q6g32",
      "llama-mxfp4", "llama-nvfp4", "llama-mxfp8", "mistral-yarn-bias-bf16", "llama-linear-untied-bf16",
      "llama-dynamic-bf16", "smollm3-q4g64",
      "gemma3-text-bf16", "gemma3-text-q4g64", "gemma3-nested-untied-bf16",
      "phi3-bf16", "phi3-q4g64", "phi3-longrope-bf16", "phi3-longrope-q4g64",
      "minicpm-bf16", "minicpm-q4g64", "minicpm-longrope-q8g32",
      "olmo2-bf16", "olmo2-q4g64", "granite-bf16", "granite-q4g64",
      "ministral3-bf16", "mistral3-q4g64", "mistral3-llama-bf16",
      "qwen3-moe-bf16", "qwen3-moe-q4g64", "qwen3-moe-mixed-q8g32",
      "glm4-bf16", "glm4-q4g64", "glm4-moe-bf16", "glm4-moe-q4g64",
      "qwen3_5-bf16", "qwen3_5-q4g64", "qwen3_5-moe-q4g64", "qwen3-next-bf16", "qwen3-next-q4g64",
      "gemma4-text-bf16", "gemma4-text-q4g64", "gemma4-moe-untied-bf16", "gemma4-moe-untied-q4g64"};
  return kNames;
}

std::string tiny_model_dir(const std::string& name) { return (golden_dir() / "models" / name).string(); }

std::map<std::string, mx::array> model_golden(const std::string& name, const std::string& folder) {
  auto path = golden_dir() / folder / (name + ".safetensors");
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(path.string() + " is missing: run 'make goldens'");
  }
  auto loaded = mx::load_safetensors(path.string());
  return {loaded.first.begin(), loaded.first.end()};
}

std::vector<int> to_ints(const mx::array& a) {
  auto b = mx::astype(a, mx::int32);
  mx::eval(b);
  return std::vector<int>(b.data<int>(), b.data<int>() + b.size());
}

}  // namespace mlxcpp::test
