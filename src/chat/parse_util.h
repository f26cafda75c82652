// Small text helpers shared by the output parsers (reasoning, tool calls): UTF-8 boundaries,
// partial-marker hold-back, an incremental JSON scanner and Python-style JSON text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/markers.h"

namespace mlxcpp::parse {

using OrderedJson = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

// Length of the longest prefix of `s` that does not end inside an incomplete UTF-8 sequence.
size_t complete_utf8_prefix(std::string_view s);

using mlxcpp::partial_marker_suffix;  // core/markers.h

// The earliest occurrence of any of `markers` in `s`: (position, marker index), npos if none.
std::pair<size_t, size_t> find_first_marker(std::string_view s, const std::vector<std::string>& markers);

bool is_json_ws(char c);
size_t skip_ws(std::string_view s, size_t pos);

// Incremental JSON scanning: where a value starting at `pos` ends, without building it.
enum class Scan { kComplete, kIncomplete, kBad };
struct ScanResult {
  Scan status = Scan::kIncomplete;
  size_t end = npos;  // one past the value (kComplete) or the offending byte (kBad)
};
// A string literal starting at s[pos] == '"'.
ScanResult scan_string(std::string_view s, size_t pos);
// Any value; containers are checked for balance and string quoting only. A number or literal
// that reaches the end of `s` is incomplete (more digits may come).
ScanResult scan_value(std::string_view s, size_t pos);

// scan_value resumed over a text that only grows: each call continues where the last stopped,
// so a long value streamed in many pieces is scanned once.
class ValueScanner {
 public:
  explicit ValueScanner(size_t begin = npos) : begin_(begin), pos_(begin) {}
  size_t begin() const { return begin_; }
  ScanResult scan(std::string_view s);  // `s`: the same text as the last call, maybe longer

 private:
  ScanResult finish(Scan status, size_t end) {
    done_ = {status, end};
    return done_;
  }
  size_t begin_, pos_;
  std::string stack_;  // closing brackets expected
  bool in_string_ = false, escape_ = false;
  ScanResult done_;    // kIncomplete until the value ended
};

// One {"name": ..., "arguments": {...}} object as far as it arrived.
struct CallObjectScan {
  Scan status = Scan::kIncomplete;
  size_t end = npos;                // one past '}' (kComplete) or the offending byte (kBad)
  std::optional<std::string> name;  // the "name" value once it is a complete string
  bool args_key = false;            // an arguments key has been read
  size_t args_begin = npos;         // its value's first byte
  size_t args_end = npos;           // one past its value, npos while incomplete
};
CallObjectScan scan_call_object(std::string_view s, size_t pos, const std::vector<std::string>& arg_keys);

// JSON text as Python's json.dumps(ensure_ascii=False) writes it: ", " and ": " separators.
std::string py_json(const OrderedJson& j);
// A string's JSON escaping without the quotes (per character, so pieces concatenate).
std::string json_escape(std::string_view s);
// Parses JSON text; nullopt when it is not exactly one JSON value.
std::optional<OrderedJson> try_parse_json(std::string_view s);

bool starts_with(std::string_view s, std::string_view prefix);

// A streaming parser's buffer that must open with `marker` (after whitespace, which is dropped):
// kFound (the marker is consumed), kMore (empty, or a prefix of the marker before the final
// push: wait for more) or kOther.
enum class Opening { kFound, kMore, kOther };
Opening take_opening(std::string& buf, std::string_view marker, bool final);
std::string_view trim(std::string_view s);

}  // namespace mlxcpp::parse
