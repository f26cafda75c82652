#include "artifacts/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/errors.h"

namespace mlxcpp {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian

// Smallest encoding of one element of each type: used to bound counts by the bytes left, so a
// header claiming 2^60 items fails before anything is allocated.
uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::Uint8: case GgufType::Int8: case GgufType::Bool: return 1;
    case GgufType::Uint16: case GgufType::Int16: return 2;
    case GgufType::Uint32: case GgufType::Int32: case GgufType::Float32: return 4;
    case GgufType::Uint64: case GgufType::Int64: case GgufType::Float64: return 8;
    case GgufType::String: return 8;      // length prefix
    case GgufType::Array: return 4 + 8;   // element type + count
  }
  return 0;
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::Float64); }

// A bounds-checked cursor over the header bytes; every failure names the field being read.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw WeightError(fmt::format("{}: {}", name_, what));
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& field) const {
    if (n > left()) {
      fail(fmt::format("{}: needs {} bytes at offset {} but the file has {} left (truncated?)", field, n, pos_, left()));
    }
  }
  template <typename T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // GGUF is little-endian, like every host we build for
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& field) {
    uint64_t n = read<uint64_t>(field + " (string length)");
    if (n > left()) fail(fmt::format("{}: string length {} is past the end of the file ({} bytes left)", field, n, left()));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A count of items, each taking at least `min_size` bytes, must fit in what is left.
  uint64_t read_count(const std::string& field, uint64_t min_size) {
    uint64_t n = read<uint64_t>(field);
    if (min_size > 0 && n > left() / min_size) {
      fail(fmt::format("{}: {} is more than the file can hold ({} bytes left; truncated?)", field, n, left()));
    }
    return n;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

GgufValue read_scalar(Reader& r, GgufType t, const std::string& field) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::Uint8: v.i = r.read<uint8_t>(field); break;
    case GgufType::Int8: v.i = r.read<int8_t>(field); break;
    case GgufType::Uint16: v.i = r.read<uint16_t>(field); break;
    case GgufType::Int16: v.i = r.read<int16_t>(field); break;
    case GgufType::Uint32: v.i = r.read<uint32_t>(field); break;
    case GgufType::Int32: v.i = r.read<int32_t>(field); break;
    case GgufType::Int64: v.i = r.read<int64_t>(field); break;
    case GgufType::Uint64: {
      uint64_t u = r.read<uint64_t>(field);
      v.i = static_cast<int64_t>(u);
      v.f = static_cast<double>(u);
      return v;
    }
    case GgufType::Bool: {
      uint8_t b = r.read<uint8_t>(field);
      if (b > 1) r.fail(fmt::format("{}: bool value {} is neither 0 nor 1", field, b));
      v.i = b;
      break;
    }
    case GgufType::Float32: v.f = r.read<float>(field); return v;
    case GgufType::Float64: v.f = r.read<double>(field); return v;
    case GgufType::String: v.s = r.read_string(field); return v;
    case GgufType::Array: break;  // handled by read_value
  }
  v.f = static_cast<double>(v.i);
  return v;
}

GgufValue read_value(Reader& r, GgufType t, const std::string& field, int depth) {
  if (t != GgufType::Array) return read_scalar(r, t, field);
  if (depth >= kGgufMaxArrayDepth) r.fail(fmt::format("{}: arrays nested deeper than {}", field, kGgufMaxArrayDepth));
  GgufValue v;
  v.type = GgufType::Array;
  uint32_t et = r.read<uint32_t>(field + " (array element type)");
  if (!known_type(et)) r.fail(fmt::format("{}: unknown array element type {}", field, et));
  v.elem_type = static_cast<GgufType>(et);
  uint64_t n = r.read_count(field + " (array length)", min_encoded_size(v.elem_type));
  const std::string item = field + "[]";
  switch (v.elem_type) {
    case GgufType::String:
      v.strings.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.strings.push_back(r.read_string(item));
      break;
    case GgufType::Array:
      v.items.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.items.push_back(read_value(r, GgufType::Array, item, depth + 1));
      break;
    case GgufType::Float32:
    case GgufType::Float64:
      v.floats.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.floats.push_back(read_scalar(r, v.elem_type, item).f);
      break;
    default:
      v.ints.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.ints.push_back(read_scalar(r, v.elem_type, item).i);
      break;
  }
  return v;
}

GgufTensorInfo read_tensor_info(Reader& r, uint64_t index) {
  GgufTensorInfo t;
  t.name = r.read_string(fmt::format("tensor #{} name", index));
  const std::string what = fmt::format("tensor '{}'", t.name);
  uint32_t n_dims = r.read<uint32_t>(what + " n_dims");
  if (n_dims == 0 || n_dims > kGgufMaxDims) r.fail(fmt::format("{}: n_dims {} (must be 1..{})", what, n_dims, kGgufMaxDims));
  int64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    int64_t ne = r.read<int64_t>(fmt::format("{} ne[{}]", what, d));
    if (ne < 0) r.fail(fmt::format("{}: ne[{}] = {} is negative", what, d, ne));
    if (ne > 0 && elements > std::numeric_limits<int64_t>::max() / ne) {
      r.fail(fmt::format("{}: element count overflows at ne[{}] = {}", what, d, ne));
    }
    elements *= ne;
    t.ne.push_back(ne);
  }
  uint32_t type = r.read<uint32_t>(what + " type");
  t.type = static_cast<GgmlType>(type);
  auto info = ggml_block_info(t.type);
  if (!info) r.fail(fmt::format("{}: unknown ggml type {}", what, type));
  if (t.ne[0] % info->block_size != 0) {
    r.fail(fmt::format("{}: ne[0] = {} is not a multiple of the {} block size {}", what, t.ne[0],
                       ggml_type_name(t.type), info->block_size));
  }
  // elements fits int64, so blocks * type_size fits in 128 bits; bound it by int64 too.
  unsigned __int128 bytes = static_cast<unsigned __int128>(elements / info->block_size) * info->type_size;
  if (bytes > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max())) {
    r.fail(fmt::format("{}: byte size overflows", what));
  }
  t.nbytes = static_cast<uint64_t>(bytes);
  t.offset = r.read<uint64_t>(what + " offset");
  return t;
}

void check_tensor_layout(GgufHeader& h, uint64_t file_size, Reader& r) {
  const uint64_t data_size = file_size - h.data_offset;
  std::set<std::string> names;
  for (const auto& t : h.tensors) {
    if (!names.insert(t.name).second) r.fail(fmt::format("tensor '{}' appears twice", t.name));
    if (t.offset % h.alignment != 0) {
      r.fail(fmt::format("tensor '{}': offset {} is not a multiple of the alignment {}", t.name, t.offset, h.alignment));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      r.fail(fmt::format("tensor '{}': bytes [{}, {}) are past the end of the data section ({} bytes; truncated?)",
                         t.name, t.offset, static_cast<unsigned __int128>(t.offset) + t.nbytes > UINT64_MAX
                                               ? UINT64_MAX : t.offset + t.nbytes, data_size));
    }
  }
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : h.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  const GgufTensorInfo* reach = nullptr;
  for (const auto* t : order) {
    if (t->nbytes == 0) continue;
    if (reach && t->offset < reach->offset + reach->nbytes) {
      r.fail(fmt::format("tensor '{}': bytes [{}, {}) overlap tensor '{}' (bytes [{}, {}))", t->name, t->offset,
                         t->offset + t->nbytes, reach->name, reach->offset, reach->offset + reach->nbytes));
    }
    if (!reach || t->offset + t->nbytes > reach->offset + reach->nbytes) reach = t;
  }
}

}  // namespace

std::string gguf_type_name(GgufType t) {
  static const char* kNames[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                 "bool", "string", "array", "uint64", "int64", "float64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : fmt::format("type {}", i);
}

bool GgufValue::is_integer() const {
  return type != GgufType::Float32 && type != GgufType::Float64 && type != GgufType::String &&
         type != GgufType::Array;
}
bool GgufValue::is_number() const { return type != GgufType::String && type != GgufType::Array; }
size_t GgufValue::array_size() const { return ints.size() + floats.size() + strings.size() + items.size(); }

GgufHeader parse_gguf_header(const uint8_t* data, size_t size, const std::string& name) {
  Reader r(data, size, name);
  if (size < 4) r.fail(fmt::format("file is {} bytes, too short for a GGUF header", size));
  uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kMagic) r.fail(fmt::format("bad magic 0x{:08x} (not a GGUF file)", magic));
  GgufHeader h;
  h.version = r.read<uint32_t>("version");
  if (h.version == 1) r.fail("GGUF version 1 is not supported (re-export the file; versions 2 and 3 are)");
  if (h.version == 0x02000000 || h.version == 0x03000000) r.fail("big-endian GGUF files are not supported");
  if (h.version != 2 && h.version != 3) r.fail(fmt::format("unsupported GGUF version {} (known: 2, 3)", h.version));
  // Tensor infos take at least 8 (name) + 4 (n_dims) + 8 (one ne) + 4 (type) + 8 (offset) bytes.
  uint64_t n_tensors = r.read_count("tensor count", 32);
  uint64_t n_kv = r.read_count("metadata count", 8 + 4 + 1);

  std::set<std::string> keys;
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.read_string(fmt::format("metadata #{} key", k));
    if (!keys.insert(key).second) r.fail(fmt::format("metadata key '{}' appears twice", key));
    const std::string field = fmt::format("metadata '{}'", key);
    uint32_t t = r.read<uint32_t>(field + " type");
    if (!known_type(t)) r.fail(fmt::format("{}: unknown value type {}", field, t));
    h.metadata.emplace_back(key, read_value(r, static_cast<GgufType>(t), field, 0));
  }
  for (const auto& [key, v] : h.metadata) {
    if (key != "general.alignment") continue;
    if (v.type != GgufType::Uint32) {
      r.fail(fmt::format("metadata 'general.alignment': expected uint32, got {}", gguf_type_name(v.type)));
    }
    if (v.i == 0 || (v.i & (v.i - 1)) != 0) {
      r.fail(fmt::format("metadata 'general.alignment': {} is not a power of two", v.i));
    }
    h.alignment = static_cast<uint32_t>(v.i);
  }
  h.tensors.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) h.tensors.push_back(read_tensor_info(r, k));
  uint64_t end = r.pos();
  h.data_offset = end + (h.alignment - end % h.alignment) % h.alignment;
  if (h.data_offset > size) {
    if (!h.tensors.empty()) r.fail(fmt::format("data section at offset {} is past the end of the file", h.data_offset));
    h.data_offset = size;  // a vocabulary-only file may end right after its header
  }
  check_tensor_layout(h, size, r);
  return h;
}

// --- MappedFile ---

MappedFile::MappedFile(const std::filesystem::path& file) {
  auto fail = [&](const std::string& what) { throw WeightError(fmt::format("{}: {}", file.string(), what)); };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    fail(std::filesystem::exists(file, ec) ? "not a regular file" : "file does not exist");
  }
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(fmt::format("cannot stat: {}", std::strerror(err)));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail(fmt::format("cannot mmap: {}", std::strerror(err)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

// --- GgufFile ---

GgufFile::GgufFile(std::filesystem::path path, MappedFile map, GgufHeader header)
    : path_(std::move(path)), map_(std::move(map)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.metadata.size(); ++i) index_[header_.metadata[i].first] = i;
  for (size_t i = 0; i < header_.tensors.size(); ++i) tensor_index_[header_.tensors[i].name] = i;
}

GgufFile GgufFile::open(const std::filesystem::path& file) {
  MappedFile map(file);
  auto header = parse_gguf_header(map.data(), map.size(), file.string());
  return GgufFile(file, std::move(map), std::move(header));
}

void GgufFile::fail_key(const std::string& key, const std::string& what) const {
  throw ConfigError(fmt::format("{}: metadata '{}': {}", path_.string(), key, what));
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &header_.metadata[it->second].second;
}

const GgufValue& GgufFile::at(const std::string& key) const {
  const auto* v = find(key);
  if (v == nullptr) fail_key(key, "missing");
  return *v;
}

int64_t GgufFile::req_int(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_integer()) fail_key(key, fmt::format("expected an integer, got {}", gguf_type_name(v.type)));
  return v.i;
}

std::optional<int64_t> GgufFile::opt_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return req_int(key);
}

std::optional<double> GgufFile::opt_number(const std::string& key) const {
  const auto* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail_key(key, fmt::format("expected a number, got {}", gguf_type_name(v->type)));
  return v->f;
}

std::optional<bool> GgufFile::opt_bool(const std::string& key) const {
  const auto* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::Bool) fail_key(key, fmt::format("expected a bool, got {}", gguf_type_name(v->type)));
  return v->i != 0;
}

std::string GgufFile::req_string(const std::string& key) const {
  const auto& v = at(key);
  if (v.type != GgufType::String) fail_key(key, fmt::format("expected a string, got {}", gguf_type_name(v.type)));
  return v.s;
}

std::optional<std::string> GgufFile::opt_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return req_string(key);
}

const std::vector<std::string>& GgufFile::req_strings(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array() || v.elem_type != GgufType::String) fail_key(key, "expected an array of strings");
  return v.strings;
}

std::vector<double> GgufFile::req_floats(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array() || !v.items.empty() || !v.strings.empty() || v.elem_type == GgufType::String ||
      v.elem_type == GgufType::Array) {
    fail_key(key, "expected an array of numbers");
  }
  if (!v.floats.empty()) return v.floats;
  return std::vector<double>(v.ints.begin(), v.ints.end());
}

std::vector<int64_t> GgufFile::req_ints(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array() || v.elem_type == GgufType::String || v.elem_type == GgufType::Array ||
      v.elem_type == GgufType::Float32 || v.elem_type == GgufType::Float64) {
    fail_key(key, "expected an array of integers");
  }
  return v.ints;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const {
  return {map_.data() + header_.data_offset + t.offset, static_cast<size_t>(t.nbytes)};
}

GgmlTensorView GgufFile::tensor_view(const GgufTensorInfo& t) const {
  auto bytes = tensor_data(t);
  return GgmlTensorView{t.name, t.type, t.shape(), bytes.data(), bytes.size()};
}

}  // namespace mlxcpp
