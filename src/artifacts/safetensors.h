// safetensors files: the header is parsed and validated by us before MLX maps the data, so a
// truncated or corrupt file is a WeightError naming the file and tensor, never a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp {

struct TensorInfo {
  std::string name;
  std::string dtype;  // safetensors spelling: F32, BF16, U32, ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t header_size = 0;
  uint64_t data_size = 0;
  std::vector<TensorInfo> tensors;  // sorted by offset
  std::map<std::string, std::string> metadata;
};

// Largest JSON header accepted (the format's reference implementation uses 100 MB too).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

SafetensorsHeader read_safetensors_header(const std::filesystem::path& file);

// Validates the header, then returns MLX arrays that read lazily from the file.
std::map<std::string, mlx::core::array> load_safetensors(const std::filesystem::path& file);

}  // namespace mlxcpp
