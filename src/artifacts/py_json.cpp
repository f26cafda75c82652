#include "artifacts/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "core/errors.h"

namespace mlxcpp {

namespace {

// The code point at `i` of UTF-8 `s` (advancing `i`); invalid bytes pass through as U+FFFD.
uint32_t next_code_point(const std::string& s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i++]);
  int extra = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : b >= 0xc0 ? 1 : 0;
  uint32_t cp = extra == 3 ? b & 0x07 : extra == 2 ? b & 0x0f : extra == 1 ? b & 0x1f : b;
  if (b >= 0x80 && extra == 0) return 0xfffd;
  for (int k = 0; k < extra; ++k) {
    if (i >= s.size() || (static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) return 0xfffd;
    cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3f);
  }
  return cp;
}

// json.encoder.py_encode_basestring_ascii.
void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = next_code_point(s, i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp >= 0x20 && cp < 0x7f) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      const uint32_t v = cp - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
    }
  }
  out += '"';
}

void dump(const nlohmann::ordered_json& j, int indent, int depth, std::string& out) {
  using T = nlohmann::ordered_json::value_t;
  const std::string pad(static_cast<size_t>(indent * (depth + 1)), ' ');
  const std::string close_pad(static_cast<size_t>(indent * depth), ' ');
  switch (j.type()) {
    case T::object: {
      if (j.empty()) { out += "{}"; return; }
      out += "{\n";
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        if (!first) out += ",\n";
        first = false;
        out += pad;
        dump_string(k, out);
        out += ": ";
        dump(v, indent, depth + 1, out);
      }
      out += "\n" + close_pad + "}";
      return;
    }
    case T::array: {
      if (j.empty()) { out += "[]"; return; }
      out += "[\n";
      for (size_t i = 0; i < j.size(); ++i) {
        if (i > 0) out += ",\n";
        out += pad;
        dump(j[i], indent, depth + 1, out);
      }
      out += "\n" + close_pad + "]";
      return;
    }
    case T::string: dump_string(j.get_ref<const std::string&>(), out); return;
    case T::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case T::null: out += "null"; return;
    case T::number_integer: out += std::to_string(j.get<int64_t>()); return;
    case T::number_unsigned: out += std::to_string(j.get<uint64_t>()); return;
    case T::number_float: out += python_float_repr(j.get<double>()); return;
    default: throw ConfigError("python_json_dump: a binary or discarded JSON value cannot be written");
  }
}

}  // namespace

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e-05": shortest round-trip digits
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the point
  const int n = static_cast<int>(digits.size());
  if (exp < -4 || exp >= 16) {
    return fmt::format("{}{}{}{}e{}{:02d}", sign, digits.substr(0, 1), n > 1 ? "." : "", digits.substr(1), exp < 0 ? '-' : '+',
                       std::abs(exp));
  }
  if (exp < 0) return fmt::format("{}0.{}{}", sign, std::string(static_cast<size_t>(-exp - 1), '0'), digits);
  if (exp >= n - 1) return fmt::format("{}{}{}.0", sign, digits, std::string(static_cast<size_t>(exp - n + 1), '0'));
  const auto point = static_cast<size_t>(exp + 1);
  return fmt::format("{}{}.{}", sign, digits.substr(0, point), digits.substr(point));
}

std::string python_json_dump(const nlohmann::ordered_json& j, int indent) {
  std::string out;
  dump(j, indent, 0, out);
  return out;
}

}  // namespace mlxcpp
