// check_tool_arguments: a compact JSON Schema validator for tool parameters (the subset tool
// schemas use: type, enum, const, properties, required, additionalProperties,
// patternProperties, items/prefixItems, min/max (Length, Items, imum), exclusive bounds,
// multipleOf, pattern, uniqueItems, anyOf/oneOf/allOf/not and local $ref). Unknown keywords are
// ignored, as validators do. The first failure is reported with its path (arguments.a[0].b).
#include <cctype>
#include <cmath>
#include <regex>

#include "chat/output_parsers.h"
#include "chat/parse_util.h"

namespace mlxcpp {
namespace {

using Json = nlohmann::ordered_json;
using Err = std::optional<std::string>;

std::string kind(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

std::string show(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

bool has_type(const Json& v, const std::string& t) {
  if (t == "integer") return v.is_number_integer() || v.is_number_unsigned() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  return kind(v) == t;
}

std::string child(const std::string& path, const std::string& key) {
  bool ident = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
  for (char c : key) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  return ident ? path + "." + key : path + "[" + Json(key).dump() + "]";
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}
  Err check(const Json& s, const Json& v, const std::string& path, int depth = 0) const;

 private:
  const Json* resolve(const std::string& ref) const;
  Err check_number(const Json& s, const Json& v, const std::string& path) const;
  Err check_object(const Json& s, const Json& v, const std::string& path, int depth) const;
  Err check_array(const Json& s, const Json& v, const std::string& path, int depth) const;
  Err check_combinators(const Json& s, const Json& v, const std::string& path, int depth) const;
  const Json& root_;
};

const Json* Validator::resolve(const std::string& ref) const {
  if (ref.empty() || ref[0] != '#') return nullptr;
  try {
    const Json& target = root_.at(Json::json_pointer(ref.substr(1)));
    return &target;
  } catch (const std::exception&) {
    return nullptr;
  }
}

Err Validator::check(const Json& s, const Json& v, const std::string& path, int depth) const {
  if (depth > 64) return std::nullopt;  // a $ref cycle: give up on this branch
  if (s.is_boolean()) return s.get<bool>() ? Err{} : Err{path + ": no value is allowed here"};
  if (!s.is_object()) return std::nullopt;
  if (s.contains("$ref") && s["$ref"].is_string()) {
    if (const Json* target = resolve(s["$ref"].get<std::string>())) {
      if (auto e = check(*target, v, path, depth + 1)) return e;
    }
  }
  if (s.contains("type")) {
    const Json& t = s["type"];
    bool ok = false;
    if (t.is_string()) ok = has_type(v, t.get<std::string>());
    if (t.is_array()) {
      for (const auto& x : t) ok = ok || (x.is_string() && has_type(v, x.get<std::string>()));
    }
    if (!ok) return path + ": expected " + (t.is_string() ? t.get<std::string>() : t.dump()) + ", got " + kind(v) + " " + show(v);
  }
  if (s.contains("enum") && s["enum"].is_array()) {
    bool found = false;
    for (const auto& x : s["enum"]) found = found || x == v;
    if (!found) return path + ": " + show(v) + " is not one of " + show(s["enum"]);
  }
  if (s.contains("const") && s["const"] != v) return path + ": expected " + show(s["const"]) + ", got " + show(v);
  if (v.is_string()) {
    size_t n = code_points(v.get<std::string>());
    if (s.contains("minLength") && s["minLength"].is_number() && n < s["minLength"].get<double>()) {
      return path + ": string shorter than minLength " + show(s["minLength"]);
    }
    if (s.contains("maxLength") && s["maxLength"].is_number() && n > s["maxLength"].get<double>()) {
      return path + ": string longer than maxLength " + show(s["maxLength"]);
    }
    if (s.contains("pattern") && s["pattern"].is_string()) {
      try {
        if (!std::regex_search(v.get<std::string>(), std::regex(s["pattern"].get<std::string>()))) {
          return path + ": " + show(v) + " does not match pattern " + show(s["pattern"]);
        }
      } catch (const std::regex_error&) {
        // a pattern std::regex cannot compile is not checked
      }
    }
  }
  if (v.is_number()) {
    if (auto e = check_number(s, v, path)) return e;
  }
  if (v.is_object()) {
    if (auto e = check_object(s, v, path, depth)) return e;
  }
  if (v.is_array()) {
    if (auto e = check_array(s, v, path, depth)) return e;
  }
  return check_combinators(s, v, path, depth);
}

Err Validator::check_number(const Json& s, const Json& v, const std::string& path) const {
  double x = v.get<double>();
  auto num = [&](const char* k) -> std::optional<double> {
    return s.contains(k) && s[k].is_number() ? std::optional(s[k].get<double>()) : std::nullopt;
  };
  // Draft 4 spells exclusive bounds as booleans next to minimum/maximum.
  bool excl_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"].get<bool>();
  bool excl_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"].get<bool>();
  if (auto m = num("minimum"); m && (excl_min ? x <= *m : x < *m)) return path + ": " + show(v) + " is below the minimum " + show(s["minimum"]);
  if (auto m = num("maximum"); m && (excl_max ? x >= *m : x > *m)) return path + ": " + show(v) + " is above the maximum " + show(s["maximum"]);
  if (auto m = num("exclusiveMinimum"); m && x <= *m) return path + ": " + show(v) + " is not above " + show(s["exclusiveMinimum"]);
  if (auto m = num("exclusiveMaximum"); m && x >= *m) return path + ": " + show(v) + " is not below " + show(s["exclusiveMaximum"]);
  if (auto m = num("multipleOf"); m && *m > 0) {
    double q = x / *m;
    if (std::fabs(q - std::round(q)) > 1e-9) return path + ": " + show(v) + " is not a multiple of " + show(s["multipleOf"]);
  }
  return std::nullopt;
}

Err Validator::check_object(const Json& s, const Json& v, const std::string& path, int depth) const {
  if (s.contains("required") && s["required"].is_array()) {
    for (const auto& r : s["required"]) {
      if (r.is_string() && !v.contains(r.get<std::string>())) return child(path, r.get<std::string>()) + ": required property is missing";
    }
  }
  const Json empty = Json::object();
  const Json& props = s.contains("properties") && s["properties"].is_object() ? s["properties"] : empty;
  const Json& patterns = s.contains("patternProperties") && s["patternProperties"].is_object() ? s["patternProperties"] : empty;
  for (const auto& [key, value] : v.items()) {
    std::string p = child(path, key);
    bool known = props.contains(key);
    if (known) {
      if (auto e = check(props[key], value, p, depth + 1)) return e;
    }
    for (const auto& [pat, sub] : patterns.items()) {
      try {
        if (!std::regex_search(key, std::regex(pat))) continue;
      } catch (const std::regex_error&) {
        continue;
      }
      known = true;
      if (auto e = check(sub, value, p, depth + 1)) return e;
    }
    if (known || !s.contains("additionalProperties")) continue;
    const Json& extra = s["additionalProperties"];
    if (extra.is_boolean() && !extra.get<bool>()) return p + ": property is not allowed (additionalProperties is false)";
    if (auto e = check(extra, value, p, depth + 1)) return e;
  }
  return std::nullopt;
}

Err Validator::check_array(const Json& s, const Json& v, const std::string& path, int depth) const {
  if (s.contains("minItems") && s["minItems"].is_number() && v.size() < s["minItems"].get<double>()) {
    return path + ": fewer than minItems " + show(s["minItems"]) + " items";
  }
  if (s.contains("maxItems") && s["maxItems"].is_number() && v.size() > s["maxItems"].get<double>()) {
    return path + ": more than maxItems " + show(s["maxItems"]) + " items";
  }
  if (s.value("uniqueItems", false)) {
    for (size_t i = 0; i < v.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (v[i] == v[j]) return path + "[" + std::to_string(i) + "]: duplicate of item " + std::to_string(j) + " (uniqueItems)";
      }
    }
  }
  // Tuple forms: prefixItems (2020-12) or an items array (older drafts); then items for the rest.
  bool items_tuple = s.contains("items") && s["items"].is_array();
  const Json* prefix = s.contains("prefixItems") && s["prefixItems"].is_array() ? &s["prefixItems"]
                       : items_tuple                                          ? &s["items"]
                                                                              : nullptr;
  const Json* rest = s.contains("items") && !items_tuple ? &s["items"] : nullptr;
  if (items_tuple && s.contains("additionalItems")) rest = &s["additionalItems"];
  for (size_t i = 0; i < v.size(); ++i) {
    const Json* sub = prefix && i < prefix->size() ? &(*prefix)[i] : rest;
    if (!sub) continue;
    if (auto e = check(*sub, v[i], path + "[" + std::to_string(i) + "]", depth + 1)) return e;
  }
  return std::nullopt;
}

Err Validator::check_combinators(const Json& s, const Json& v, const std::string& path, int depth) const {
  if (s.contains("allOf") && s["allOf"].is_array()) {
    for (const auto& sub : s["allOf"]) {
      if (auto e = check(sub, v, path, depth + 1)) return e;
    }
  }
  if (s.contains("anyOf") && s["anyOf"].is_array()) {
    Err first;
    bool ok = false;
    for (const auto& sub : s["anyOf"]) {
      auto e = check(sub, v, path, depth + 1);
      if (!e) ok = true;
      if (e && !first) first = e;
      if (ok) break;
    }
    if (!ok && first) return path + ": matches none of anyOf (first: " + *first + ")";
  }
  if (s.contains("oneOf") && s["oneOf"].is_array()) {
    int matched = 0;
    for (const auto& sub : s["oneOf"]) matched += !check(sub, v, path, depth + 1);
    if (matched != 1) return path + ": matches " + std::to_string(matched) + " of oneOf (exactly 1 required)";
  }
  if (s.contains("not") && !check(s["not"], v, path, depth + 1)) return path + ": matches the schema in 'not'";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_tool_arguments(const nlohmann::ordered_json& parameters_schema,
                                                const std::string& arguments_json) {
  auto args = parse::try_parse_json(arguments_json);
  if (!args) return "arguments: not valid JSON: " + show(Json(arguments_json));
  return Validator(parameters_schema).check(parameters_schema, *args, "arguments");
}

}  // namespace mlxcpp
