// The output half of `convert --hf`: a staging folder renamed into place at the end (removed on
// failure), and the files mlx-lm's save() writes (shards + index, config.json, copied extras).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <mlx/array.h>
#include <nlohmann/json.hpp>

namespace mlxcpp {

// A folder beside `out` that becomes `out` on commit(); the destructor removes it otherwise.
class StagingDir {
 public:
  // ConfigError when `out` exists and is not an empty folder (mlx-lm refuses any existing path).
  explicit StagingDir(std::filesystem::path out);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return tmp_; }
  void commit();

 private:
  std::filesystem::path out_;
  std::filesystem::path tmp_;
  bool committed_ = false;
};

using NamedArrays = std::vector<std::pair<std::string, mlx::core::array>>;

// save_model: tensors in the given (module-tree) order, split at `max_shard_bytes` into
// model-0000i-of-0000n.safetensors (one file: model.safetensors), metadata {"format": "mlx"}, and
// model.safetensors.index.json. Each tensor is evaluated (quantized, cast) on its turn and
// `progress` called after it; a shard's arrays are let go once it is written (mlx-lm's
// donate_model), so memory holds one shard, not the model. Returns the file names.
std::vector<std::string> write_weights(const std::filesystem::path& dir, NamedArrays weights,
                                       uint64_t total_parameters, uint64_t max_shard_bytes,
                                       const std::function<void(size_t, size_t, const std::string&)>& progress = {});

// save_config: _name_or_path and vision_config dropped, quantization_config = quantization, keys
// sorted, json.dump(indent=4).
void write_config(const std::filesystem::path& file, nlohmann::ordered_json config);

// The tokenizer files, generation_config.json and *.py of `src`.
void copy_extras(const std::filesystem::path& src, const std::filesystem::path& dst);

}  // namespace mlxcpp
