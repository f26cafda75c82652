// One MLX snapshot folder: config.json, generation_config.json, safetensors (single or
// sharded via model.safetensors.index.json). Weights are mapped lazily through MLX.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifacts/quant_config.h"
#include "artifacts/weight_map.h"
#include "core/json_file.h"

namespace mlxcpp {

// A snapshot's weight files: the shards model.safetensors.index.json names, else its
// model*.safetensors files (sorted); WeightError for a bad index or an unreadable folder.
std::vector<std::filesystem::path> find_weight_files(const std::filesystem::path& dir);

class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& config_file() const { return config_file_; }
  JsonView config() const { return JsonView(&config_, config_file_.string()); }
  const std::string& model_type() const { return model_type_; }
  const QuantConfig& quant() const { return quant_; }
  // eos ids: generation_config.json's eos_token_id when present, else config.json's.
  const std::vector<int64_t>& eos_token_ids() const { return eos_ids_; }
  const nlohmann::json& generation_config() const { return generation_config_; }
  const std::vector<std::filesystem::path>& weight_files() const { return weight_files_; }
  // max_position_embeddings (text_config's first, for nested multimodal configs); 0: unknown.
  int context_length() const;

  // Maps every tensor of every weight file (validated headers, lazy data).
  WeightMap load_weights() const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path config_file_;
  nlohmann::json config_;
  nlohmann::json generation_config_;
  std::string model_type_;
  QuantConfig quant_;
  std::vector<int64_t> eos_ids_;
  std::vector<std::filesystem::path> weight_files_;
};

}  // namespace mlxcpp
