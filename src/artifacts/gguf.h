// GGUF v2/v3 files (ggml's gguf.h / docs/gguf.md): metadata key-values, tensor infos and the
// aligned data section. Every header field is validated against the file size before use, so a
// truncated or corrupt file is a WeightError naming the file and the key or tensor, never a
// crash, a huge allocation or a hang. Tensor data stays in a read-only mmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "artifacts/gguf_quant.h"

namespace mlxcpp {

// gguf_type: the value types of metadata.
enum class GgufType : uint32_t {
  Uint8 = 0, Int8 = 1, Uint16 = 2, Int16 = 3, Uint32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, Uint64 = 10, Int64 = 11, Float64 = 12,
};
std::string gguf_type_name(GgufType t);

// One metadata value. Scalars fill `i` (every integer type and bool; uint64 bit-cast), `f` (the
// value as a double, also for integers) or `s`. Arrays fill exactly one of `ints`, `floats`,
// `strings` or `items` (arrays of arrays), by element type.
struct GgufValue {
  GgufType type = GgufType::Uint8;
  GgufType elem_type = GgufType::Uint8;  // arrays only
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<GgufValue> items;

  bool is_array() const { return type == GgufType::Array; }
  bool is_integer() const;  // integer or bool scalar
  bool is_number() const;   // integer, bool or float scalar
  size_t array_size() const;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;

  // HF/MLX order (ne reversed): [..., rows, cols].
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

// Limits on what a header may claim (beyond "fits in the file").
inline constexpr uint32_t kGgufMaxDims = 4;
inline constexpr int kGgufMaxArrayDepth = 8;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

// A read-only mapping of a whole file; not copyable, movable.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& file);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() noexcept;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Parses and validates a GGUF header held in memory (the fuzz target and the file loader share
// it). `name` is used in error messages.
struct GgufHeader {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // file order
  std::vector<GgufTensorInfo> tensors;                      // file order
  uint64_t data_offset = 0;  // absolute offset of the data section
};
GgufHeader parse_gguf_header(const uint8_t* data, size_t size, const std::string& name);

class GgufFile {
 public:
  // Maps and validates the file; WeightError naming the file and field/tensor on any defect.
  static GgufFile open(const std::filesystem::path& file);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return header_.version; }
  uint32_t alignment() const { return header_.alignment; }
  uint64_t data_offset() const { return header_.data_offset; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return header_.metadata; }
  const std::vector<GgufTensorInfo>& tensors() const { return header_.tensors; }

  bool has(const std::string& key) const { return index_.count(key) > 0; }
  const GgufValue* find(const std::string& key) const;
  // Typed access; a missing key or a wrong type is a ConfigError naming the file and key.
  const GgufValue& at(const std::string& key) const;
  int64_t req_int(const std::string& key) const;
  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_number(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::string req_string(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;
  const std::vector<std::string>& req_strings(const std::string& key) const;
  // Numeric array as doubles / int64 (any numeric element type).
  std::vector<double> req_floats(const std::string& key) const;
  std::vector<int64_t> req_ints(const std::string& key) const;

  const GgufTensorInfo* find_tensor(const std::string& name) const;
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& t) const;
  GgmlTensorView tensor_view(const GgufTensorInfo& t) const;

  [[noreturn]] void fail_key(const std::string& key, const std::string& what) const;

 private:
  GgufFile(std::filesystem::path path, MappedFile map, GgufHeader header);
  std::filesystem::path path_;
  MappedFile map_;
  GgufHeader header_;
  std::map<std::string, size_t> index_;         // key -> metadata position
  std::map<std::string, size_t> tensor_index_;  // name -> tensor position
};

}  // namespace mlxcpp
