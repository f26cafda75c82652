#include "core/json_file.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/files.h"

namespace mlxcpp {

namespace {
std::string type_name(const nlohmann::json& j) { return j.type_name(); }

// An integer, or a float with an integral value (Python writes 4096.0 too), that fits int64.
// Casting an out-of-range or NaN double is undefined, and an unsigned above INT64_MAX would wrap.
std::optional<int64_t> as_int64(const nlohmann::json& m) {
  if (m.is_number_unsigned()) {
    auto u = m.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (m.is_number_integer()) return m.get<int64_t>();
  if (m.is_number_float()) {
    double d = m.get<double>();
    // [-2^63, 2^63) is exactly representable at both ends; NaN fails both comparisons.
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return std::nullopt;
    if (d != std::trunc(d)) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}
}  // namespace

JsonView::JsonView(const nlohmann::json* node, std::string file, std::string path)
    : node_(node), file_(std::move(file)), path_(std::move(path)) {}

nlohmann::json JsonView::parse_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    throw ConfigError(fmt::format("{}: file does not exist", file.string()));
  }
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw ConfigError(fmt::format("{}: not a regular file", file.string()));
  }
  auto text = read_file(file);
  if (!text) {
    throw ConfigError(fmt::format("{}: cannot open file", file.string()));
  }
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(fmt::format("{}: invalid JSON: {}", file.string(), e.what()));
  }
}

std::string JsonView::field(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonView::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(fmt::format("{}: field '{}': {}", file_, field(key), what));
}

bool JsonView::has(const std::string& key) const {
  return node_->is_object() && node_->contains(key) && !(*node_)[key].is_null();
}

const nlohmann::json& JsonView::member(const std::string& key) const {
  if (!node_->is_object()) {
    throw ConfigError(fmt::format("{}: '{}' must be an object, got {}", file_,
                                  path_.empty() ? "<root>" : path_, type_name(*node_)));
  }
  if (!has(key)) fail(key, "required field is missing");
  return (*node_)[key];
}

JsonView JsonView::at(const std::string& key) const {
  const auto& m = member(key);
  if (!m.is_object()) fail(key, "expected an object, got " + type_name(m));
  return JsonView(&m, file_, field(key));
}

std::optional<JsonView> JsonView::get(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return at(key);
}

int64_t JsonView::req_int(const std::string& key) const {
  const auto& m = member(key);
  if (auto v = as_int64(m)) return *v;
  fail(key, fmt::format("expected an integer, got {} {}", type_name(m), m.dump()));
}

int JsonView::req_int32(const std::string& key) const {
  int64_t v = req_int(key);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(key, fmt::format("{} is out of range for a 32-bit integer", v));
  }
  return static_cast<int>(v);
}

int JsonView::int32_or(const std::string& key, int dflt) const {
  return has(key) ? req_int32(key) : dflt;
}

double JsonView::req_number(const std::string& key) const {
  const auto& m = member(key);
  if (!m.is_number()) fail(key, fmt::format("expected a number, got {} {}", type_name(m), m.dump()));
  return m.get<double>();
}

std::string JsonView::req_string(const std::string& key) const {
  const auto& m = member(key);
  if (!m.is_string()) fail(key, fmt::format("expected a string, got {} {}", type_name(m), m.dump()));
  return m.get<std::string>();
}

int64_t JsonView::int_or(const std::string& key, int64_t dflt) const {
  return has(key) ? req_int(key) : dflt;
}
double JsonView::number_or(const std::string& key, double dflt) const {
  return has(key) ? req_number(key) : dflt;
}
bool JsonView::bool_or(const std::string& key, bool dflt) const {
  if (!has(key)) return dflt;
  const auto& m = member(key);
  if (!m.is_boolean()) fail(key, fmt::format("expected a boolean, got {} {}", type_name(m), m.dump()));
  return m.get<bool>();
}
std::string JsonView::string_or(const std::string& key, const std::string& dflt) const {
  return has(key) ? req_string(key) : dflt;
}
std::optional<int64_t> JsonView::opt_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return req_int(key);
}
std::optional<double> JsonView::opt_number(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return req_number(key);
}
std::optional<std::string> JsonView::opt_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return req_string(key);
}

std::vector<int64_t> JsonView::int_list(const std::string& key) const {
  if (!has(key)) return {};
  const auto& m = member(key);
  if (m.is_number_integer()) {
    auto v = as_int64(m);
    if (!v) fail(key, "integer " + m.dump() + " is out of range");
    return {*v};
  }
  if (!m.is_array()) fail(key, "expected an integer or a list of integers, got " + type_name(m));
  std::vector<int64_t> out;
  for (const auto& v : m) {
    auto i = v.is_number_integer() ? as_int64(v) : std::nullopt;
    if (!i) fail(key, "expected a list of integers, found " + v.dump());
    out.push_back(*i);
  }
  return out;
}

}  // namespace mlxcpp
