#include "artifacts/safetensors.h"

#include <algorithm>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <mlx/io.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Exactly the dtypes MLX's loader maps (mlx/io/safetensors.cpp: no F64 or F8_E5M2; F8_E4M3
// loads as uint8, C64 as complex64); anything else is rejected up front, naming the tensor.
int dtype_size(const std::string& dtype) {
  static const std::map<std::string, int> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"U16", 2}, {"I16", 2},
      {"F16", 2},  {"BF16", 2}, {"U32", 4}, {"I32", 4},    {"F32", 4}, {"U64", 8},
      {"I64", 8},  {"C64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
  throw WeightError(fmt::format("{}: {}", file.string(), what));
}

TensorInfo parse_tensor(const std::filesystem::path& file, const std::string& name,
                        const nlohmann::json& e, uint64_t data_size) {
  auto tensor_bad = [&](const std::string& what) {
    bad(file, fmt::format("tensor '{}': {}", name, what));
  };
  if (!e.is_object()) tensor_bad("header entry is not an object");
  TensorInfo t;
  t.name = name;
  if (!e.contains("dtype") || !e["dtype"].is_string()) tensor_bad("missing 'dtype'");
  t.dtype = e["dtype"].get<std::string>();
  int esize = dtype_size(t.dtype);
  if (esize == 0) tensor_bad(fmt::format("unknown dtype '{}'", t.dtype));
  if (!e.contains("shape") || !e["shape"].is_array()) tensor_bad("missing 'shape'");
  unsigned __int128 bytes = esize;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) tensor_bad(fmt::format("bad dimension {}", d.dump()));
    uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      tensor_bad(fmt::format("dimension {} is too large", v));
    }
    t.shape.push_back(static_cast<int64_t>(v));
    // Saturate past the data size so a long shape cannot wrap the 128-bit product
    // (a zero dimension still makes it 0).
    bytes = v == 0 ? 0 : bytes > data_size ? bytes : bytes * v;
  }
  const auto& offs = e.contains("data_offsets") ? e["data_offsets"] : nlohmann::json();
  if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
      !offs[1].is_number_unsigned()) {
    tensor_bad("'data_offsets' must be two non-negative integers");
  }
  t.begin = offs[0].get<uint64_t>();
  t.end = offs[1].get<uint64_t>();
  if (t.end < t.begin) tensor_bad(fmt::format("data_offsets [{}, {}] are reversed", t.begin, t.end));
  if (t.end > data_size) {
    tensor_bad(fmt::format("data_offsets end {} is past the end of the data ({} bytes; file truncated?)",
                           t.end, data_size));
  }
  if (bytes != t.end - t.begin) {
    std::string need = bytes > data_size ? fmt::format("more than {}", data_size)
                                         : fmt::format("{}", static_cast<uint64_t>(bytes));
    tensor_bad(fmt::format("shape {} x {} needs {} bytes but data_offsets span {}",
                           e["shape"].dump(), t.dtype, need, t.end - t.begin));
  }
  return t;
}

}  // namespace

SafetensorsHeader read_safetensors_header(const std::filesystem::path& file) {
  // A directory opens as a stream on Linux but has no meaningful size; refuse it up front.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    bad(file, std::filesystem::exists(file, ec) ? "not a regular file" : "file does not exist");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) bad(file, "cannot open file");
  in.seekg(0, std::ios::end);
  const auto end_pos = in.tellg();
  if (end_pos < 0) bad(file, "cannot determine the file size");
  const uint64_t file_size = static_cast<uint64_t>(end_pos);
  in.seekg(0);
  if (file_size < 8) bad(file, fmt::format("file is {} bytes, too short for a safetensors header", file_size));
  unsigned char len_bytes[8] = {};
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  if (!in) bad(file, "could not read the header size");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kMaxSafetensorsHeader) bad(file, fmt::format("header size {} exceeds the {} byte cap", n, kMaxSafetensorsHeader));
  if (n > file_size - 8) bad(file, fmt::format("header size {} is past the end of the file ({} bytes; truncated?)", n, file_size));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) bad(file, "could not read the header");

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 3E7856
    bad(file, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) bad(file, "header is not a JSON object");

  SafetensorsHeader h;
  h.header_size = n;
  h.data_size = file_size - 8 - n;
  for (const auto& [name, e] : j.items()) {
    if (name == "__metadata__") {
      if (e.is_null()) continue;  // what mx.save_safetensors writes when given no metadata
      if (!e.is_object()) bad(file, "field '__metadata__': expected an object, got " + std::string(e.type_name()));
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string()) bad(file, fmt::format("field '__metadata__.{}': expected a string, got {}", k, v.dump()));
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_tensor(file, name, e, h.data_size));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Compare each tensor with the non-empty one reaching furthest so far: an empty tensor in
  // between must not hide an overlap of its neighbours.
  const TensorInfo* reach = nullptr;
  for (const auto& cur : h.tensors) {
    if (cur.end == cur.begin) continue;
    if (reach != nullptr && cur.begin < reach->end) {
      bad(file, fmt::format("tensor '{}': bytes [{}, {}) overlap tensor '{}' (bytes [{}, {}))", cur.name,
                            cur.begin, cur.end, reach->name, reach->begin, reach->end));
    }
    if (reach == nullptr || cur.end > reach->end) reach = &cur;
  }
  return h;
}

std::map<std::string, mx::array> load_safetensors(const std::filesystem::path& file) {
  auto header = read_safetensors_header(file);
  mx::SafetensorsLoad loaded;
  try {
    loaded = mx::load_safetensors(file.string());
  } catch (const std::exception& e) {
    bad(file, e.what());
  }
  std::map<std::string, mx::array> out;
  for (auto& [name, arr] : loaded.first) out.emplace(name, std::move(arr));
  if (out.size() != header.tensors.size()) {
    bad(file, fmt::format("MLX read {} tensors but the header lists {}", out.size(), header.tensors.size()));
  }
  return out;
}

}  // namespace mlxcpp
