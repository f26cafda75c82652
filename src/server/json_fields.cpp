#include "server/json_fields.h"

#include <cmath>

#include <fmt/format.h>

namespace mlxcpp::server {

Json parse_body(const std::string& body) {
  // Bounded nesting: deeper documents are refused before anything recurses over them.
  static constexpr int kMaxDepth = 64;
  auto depth_check = [](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxDepth) {
      throw FieldError("body", fmt::format("the request body nests deeper than {} levels", kMaxDepth));
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(body, depth_check);
  } catch (const Json::parse_error& e) {
    throw FieldError("body", fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw FieldError("body", fmt::format("the request body must be a JSON object, got {}", j.type_name()));
  return j;
}

std::string brief(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

Fields::Fields(const Json& o, std::string where) : o_(o), where_(std::move(where)) {
  if (!o_.is_object()) {
    throw FieldError(where_.empty() ? "body" : where_,
                     fmt::format("'{}' must be an object, got {}", where_.empty() ? "body" : where_, brief(o_)));
  }
}

std::string Fields::path(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }

bool Fields::has(const std::string& key) const { return get(key) != nullptr; }

const Json* Fields::get(const std::string& key) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return nullptr;
  return &*it;
}

void Fields::fail(const std::string& key, const std::string& what) const {
  throw FieldError(path(key), fmt::format("'{}' {}", path(key), what));
}

std::optional<std::string> Fields::str(const std::string& key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(key, fmt::format("must be a string, got {}", brief(*v)));
  return v->get<std::string>();
}

std::string Fields::req_str(const std::string& key) const {
  auto s = str(key);
  if (!s) fail(key, "is required");
  return *s;
}

std::optional<bool> Fields::boolean(const std::string& key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(key, fmt::format("must be a boolean, got {}", brief(*v)));
  return v->get<bool>();
}

std::optional<double> Fields::number(const std::string& key, double lo, double hi) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, fmt::format("must be a number, got {}", brief(*v)));
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, brief(*v)));
  return d;
}

std::optional<int64_t> Fields::integer(const std::string& key, int64_t lo, int64_t hi) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) {
      return static_cast<int64_t>(d);
    }
  }
  if (!v->is_number_integer() && !v->is_number_unsigned()) fail(key, fmt::format("must be an integer, got {}", brief(*v)));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, brief(*v)));
  }
  int64_t i = v->get<int64_t>();
  if (i < lo || i > hi) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, brief(*v)));
  return i;
}

const Json* Fields::object(const std::string& key) const {
  const Json* v = get(key);
  if (v && !v->is_object()) fail(key, fmt::format("must be an object, got {}", brief(*v)));
  return v;
}

const Json* Fields::array(const std::string& key) const {
  const Json* v = get(key);
  if (v && !v->is_array()) fail(key, fmt::format("must be an array, got {}", brief(*v)));
  return v;
}

std::vector<std::string> Fields::str_or_list(const std::string& key, size_t max_items) const {
  const Json* v = get(key);
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_items) fail(key, fmt::format("may hold at most {} strings, got {}", max_items, v->size()));
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) fail(key, fmt::format("must hold strings; item {} is {}", i, brief((*v)[i])));
      out.push_back((*v)[i].get<std::string>());
    }
  } else {
    fail(key, fmt::format("must be a string or a list of strings, got {}", brief(*v)));
  }
  return out;
}

}  // namespace mlxcpp::server
