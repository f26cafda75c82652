// Typed reads of request-body fields. Every error is a FieldError naming the field by its path
// (OpenAI's "param") and the value received, so clients see which part of the body was wrong.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace mlxcpp::server {

using Json = nlohmann::ordered_json;

// The largest value an int field (token ids, counts) may take.
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

class FieldError : public RequestError {
 public:
  FieldError(std::string param, const std::string& message) : RequestError(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

// Parses a request body: must be a JSON object (FieldError with param "body" otherwise).
Json parse_body(const std::string& body);

// A short rendering of a value for messages (strings quoted, long values cut).
std::string brief(const Json& v);

// Field readers over an object `o` whose path is `where` ("" for the body, "messages[2]" ...).
// Absent or null -> nullopt; wrong type or out of range -> FieldError.
class Fields {
 public:
  Fields(const Json& o, std::string where = "");
  std::string path(const std::string& key) const;  // "where.key"
  bool has(const std::string& key) const;          // present and not null
  const Json* get(const std::string& key) const;   // present and not null, else nullptr

  std::optional<std::string> str(const std::string& key) const;
  std::string req_str(const std::string& key) const;
  std::optional<bool> boolean(const std::string& key) const;
  std::optional<double> number(const std::string& key, double lo, double hi) const;
  std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi) const;
  const Json* object(const std::string& key) const;
  const Json* array(const std::string& key) const;
  // A string or a list of strings (e.g. "stop"), at most `max_items`.
  std::vector<std::string> str_or_list(const std::string& key, size_t max_items) const;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  const Json& o_;
  std::string where_;
};

}  // namespace mlxcpp::server
