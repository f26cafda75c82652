// Typed access to a JSON document that remembers which file it came from, so every error
// names the file and the dotted field path: "x/config.json: field 'rope_scaling.factor': ...".
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace mlxcpp {

class JsonView {
 public:
  JsonView(const nlohmann::json* node, std::string file, std::string path = "");

  // Parses a file; a missing file or bad JSON is a ConfigError naming the file.
  static nlohmann::json parse_file(const std::filesystem::path& file);

  bool has(const std::string& key) const;      // present and not null
  JsonView at(const std::string& key) const;   // required object member
  std::optional<JsonView> get(const std::string& key) const;

  int64_t req_int(const std::string& key) const;
  // req_int/int_or narrowed to int with a range check (a bare cast would wrap 2^32 + 128 to 128).
  int req_int32(const std::string& key) const;
  int int32_or(const std::string& key, int dflt) const;
  double req_number(const std::string& key) const;
  std::string req_string(const std::string& key) const;

  int64_t int_or(const std::string& key, int64_t dflt) const;
  double number_or(const std::string& key, double dflt) const;
  bool bool_or(const std::string& key, bool dflt) const;
  std::string string_or(const std::string& key, const std::string& dflt) const;
  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_number(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;

  // An int or a list of ints (e.g. eos_token_id); empty when absent.
  std::vector<int64_t> int_list(const std::string& key) const;

  const nlohmann::json& node() const { return *node_; }
  const std::string& file() const { return file_; }
  std::string field(const std::string& key) const;  // dotted path of a member

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  const nlohmann::json& member(const std::string& key) const;
  const nlohmann::json* node_;
  std::string file_;
  std::string path_;
};

}  // namespace mlxcpp
