// A byte-level GGUF writer for tests: builds valid files and, by overriding single fields,
// malformed ones (the parser must reject each with a message naming the field).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace mlxcpp::test {

class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type = 0;  // F32
    std::string data;
    std::optional<uint64_t> offset;  // default: packed in order, aligned
  };

  uint32_t version = 3;
  uint32_t magic = 0x46554747;
  uint32_t alignment = 32;
  std::string kv_bytes;  // raw encoded key-values
  uint64_t n_kv = 0;
  std::vector<Tensor> tensors;
  std::optional<uint64_t> n_tensors_override, n_kv_override;

  static std::string u32(uint32_t v) { return raw(v); }
  static std::string u64(uint64_t v) { return raw(v); }
  static std::string i64(int64_t v) { return raw(v); }
  static std::string f32(float v) { return raw(v); }
  static std::string str(const std::string& s) { return u64(s.size()) + s; }
  template <class T>
  static std::string raw(T v) {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
  }

  // Value bytes must start with the gguf_type (u32).
  GgufBuilder& kv(const std::string& key, const std::string& typed_value) {
    kv_bytes += str(key) + typed_value;
    ++n_kv;
    return *this;
  }
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) { return kv(key, u32(4) + u32(v)); }
  GgufBuilder& kv_f32(const std::string& key, float v) { return kv(key, u32(6) + f32(v)); }
  GgufBuilder& kv_bool(const std::string& key, bool v) { return kv(key, u32(7) + std::string(1, v ? 1 : 0)); }
  GgufBuilder& kv_str(const std::string& key, const std::string& v) { return kv(key, u32(8) + str(v)); }
  GgufBuilder& kv_strs(const std::string& key, const std::vector<std::string>& v) {
    std::string b = u32(9) + u32(8) + u64(v.size());
    for (const auto& s : v) b += str(s);
    return kv(key, b);
  }
  GgufBuilder& kv_f32s(const std::string& key, const std::vector<float>& v) {
    std::string b = u32(9) + u32(6) + u64(v.size());
    for (float f : v) b += f32(f);
    return kv(key, b);
  }
  GgufBuilder& kv_i32s(const std::string& key, const std::vector<int32_t>& v) {
    std::string b = u32(9) + u32(5) + u64(v.size());
    for (int32_t x : v) b += raw(x);
    return kv(key, b);
  }

  std::string build() const {
    std::string out = u32(magic) + u32(version) + u64(n_tensors_override.value_or(tensors.size())) +
                      u64(n_kv_override.value_or(n_kv)) + kv_bytes;
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors) {
      uint64_t off = t.offset.value_or(next);
      offsets.push_back(off);
      next = align(off + t.data.size());
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      out += str(t.name) + u32(static_cast<uint32_t>(t.ne.size()));
      for (auto n : t.ne) out += i64(n);
      out += u32(t.type) + u64(offsets[i]);
    }
    out.resize(align(out.size()), '\0');
    std::string data;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (offsets[i] > (1u << 20)) continue;  // an out-of-bounds offset under test: no data
      if (data.size() < offsets[i] + tensors[i].data.size()) data.resize(offsets[i] + tensors[i].data.size(), '\0');
      std::memcpy(data.data() + offsets[i], tensors[i].data.data(), tensors[i].data.size());
    }
    return out + data;
  }

 private:
  uint64_t align(uint64_t n) const { return (n + alignment - 1) / alignment * alignment; }
};

}  // namespace mlxcpp::test
