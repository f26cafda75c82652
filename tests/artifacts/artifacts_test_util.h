// Helpers shared by the artifacts tests (and the models suite's GGUF import test): a self-removing
// temp folder, raw safetensors writers, "this throws exactly E with these words in the message",
// a snapshot's tensors dequantized and compared.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include <mlx/io.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace mlxcpp::test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("mlxcpp-artifacts-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file: 8-byte size (the header's real size unless overridden), header, data.
inline void write_raw_safetensors(const std::filesystem::path& file, const std::string& header,
                                  const std::string& data, std::optional<uint64_t> size_field = {}) {
  write_bytes(file, le64(size_field.value_or(header.size())) + header + data);
}
inline void write_safetensors(const std::filesystem::path& file, const nlohmann::json& header,
                              const std::string& data) {
  write_raw_safetensors(file, header.dump(), data);
}

// Copies a tiny checkpoint (golden_dir()/models/<name>) into `dir`.
inline std::filesystem::path copy_model(const std::string& name, const std::filesystem::path& dir) {
  auto src = golden_dir() / "models" / name;
  auto dst = dir / name;
  std::filesystem::copy(src, dst, std::filesystem::copy_options::recursive);
  return dst;
}

// The message of the E that `f` throws; anything else fails the test.
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a different exception type, got: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected an exception, nothing was thrown";
  return {};
}

inline void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
  for (const auto& p : parts) {
    EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// The tensor `name` of a snapshot as float32, dequantizing `<base>.weight` when `<base>.scales` exists.
inline mlx::core::array snapshot_tensor(const std::map<std::string, mlx::core::array>& w, const nlohmann::json& config,
                                        const std::string& name) {
  namespace mx = mlx::core;
  std::string base = name.substr(0, name.size() - std::string(".weight").size());
  auto scales = w.find(base + ".scales");
  if (scales == w.end()) return mx::astype(w.at(name), mx::float32);
  const nlohmann::json& q = config.at("quantization");
  const nlohmann::json& spec = q.contains(base) ? q.at(base) : q;
  return mx::dequantize(w.at(name), scales->second, w.at(base + ".biases"), spec.at("group_size").get<int>(),
                        spec.at("bits").get<int>(), "affine", std::nullopt, mx::float32);
}

// The tensors of the snapshot file, after checking that each tensor of `expected_file` (HF names,
// float32) is there and equals it, dequantized, bit for bit.
inline std::map<std::string, mlx::core::array> expect_snapshot_equals(const std::filesystem::path& snapshot_file,
                                                                      const nlohmann::json& config,
                                                                      const std::filesystem::path& expected_file) {
  namespace mx = mlx::core;
  auto loaded = mx::load_safetensors(snapshot_file.string()).first;
  std::map<std::string, mx::array> w(loaded.begin(), loaded.end());
  auto expected = mx::load_safetensors(expected_file.string()).first;
  EXPECT_FALSE(expected.empty()) << expected_file;
  for (const auto& [name, want] : expected) {
    if (!w.count(name)) {
      ADD_FAILURE() << name << ": not in the snapshot";
      continue;
    }
    auto got = snapshot_tensor(w, config, name);
    if (got.shape() != want.shape()) {
      ADD_FAILURE() << name << ": another shape";
      continue;
    }
    EXPECT_EQ(max_abs_diff(got, want), 0.0f) << name;
  }
  return w;
}

}  // namespace mlxcpp::test
