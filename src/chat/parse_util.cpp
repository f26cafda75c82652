#include "chat/parse_util.h"

#include <algorithm>

namespace mlxcpp::parse {

size_t complete_utf8_prefix(std::string_view s) {
  size_t n = s.size();
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t i = n;
  for (int k = 0; k < 4 && i > 0; ++k) {
    --i;
    auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation
    size_t want = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return n - i < want ? i : n;
  }
  return n;  // only continuation bytes (invalid): nothing to wait for
}

std::pair<size_t, size_t> find_first_marker(std::string_view s, const std::vector<std::string>& markers) {
  size_t best = npos, which = npos;
  for (size_t i = 0; i < markers.size(); ++i) {
    if (markers[i].empty()) continue;
    size_t p = s.find(markers[i]);
    if (p == npos) continue;
    if (p < best || (p == best && markers[i].size() > markers[which].size())) {
      best = p;
      which = i;
    }
  }
  return {best, which};
}

bool is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_ws(std::string_view s, size_t pos) {
  while (pos < s.size() && is_json_ws(s[pos])) ++pos;
  return pos;
}

ScanResult scan_string(std::string_view s, size_t pos) {
  for (size_t i = pos + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      if (i + 1 >= s.size()) return {Scan::kIncomplete, npos};
      ++i;
    } else if (s[i] == '"') {
      return {Scan::kComplete, i + 1};
    }
  }
  return {Scan::kIncomplete, npos};
}

namespace {
bool is_primitive_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.';
}
}  // namespace

ScanResult scan_value(std::string_view s, size_t pos) { return ValueScanner(pos).scan(s); }

ScanResult ValueScanner::scan(std::string_view s) {
  if (done_.status != Scan::kIncomplete) return done_;
  if (begin_ >= s.size()) return {Scan::kIncomplete, npos};
  char first = s[begin_];
  if (first != '"' && first != '{' && first != '[') {  // a number or literal: short, rescanned
    size_t i = begin_;
    while (i < s.size() && is_primitive_char(s[i])) ++i;
    if (i == s.size()) return {Scan::kIncomplete, npos};
    return finish(i == begin_ ? Scan::kBad : Scan::kComplete, i);
  }
  for (; pos_ < s.size(); ++pos_) {
    char d = s[pos_];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (d == '\\') {
        escape_ = true;
      } else if (d == '"') {
        in_string_ = false;
        if (stack_.empty()) return finish(Scan::kComplete, pos_ + 1);
      }
      continue;
    }
    if (d == '"') {
      in_string_ = true;
    } else if (d == '{' || d == '[') {
      stack_.push_back(d == '{' ? '}' : ']');
    } else if (d == '}' || d == ']') {
      if (stack_.empty() || stack_.back() != d) return finish(Scan::kBad, pos_);
      stack_.pop_back();
      if (stack_.empty()) return finish(Scan::kComplete, pos_ + 1);
    }
  }
  return {Scan::kIncomplete, npos};
}

CallObjectScan scan_call_object(std::string_view s, size_t pos, const std::vector<std::string>& arg_keys) {
  CallObjectScan out;
  auto bad = [&](size_t at) {
    out.status = Scan::kBad;
    out.end = at;
    return out;
  };
  if (pos >= s.size() || s[pos] != '{') return bad(pos);
  size_t p = pos + 1;
  for (bool first = true;; first = false) {
    p = skip_ws(s, p);
    if (p >= s.size()) return out;
    if (s[p] == '}') {
      out.status = Scan::kComplete;
      out.end = p + 1;
      return out;
    }
    if (!first) {
      if (s[p] != ',') return bad(p);
      p = skip_ws(s, p + 1);
      if (p >= s.size()) return out;
    }
    if (s[p] != '"') return bad(p);
    auto k = scan_string(s, p);
    if (k.status != Scan::kComplete) return out;
    auto key = try_parse_json(s.substr(p, k.end - p));
    std::string key_s = key && key->is_string() ? key->get<std::string>() : "";
    bool is_args = std::find(arg_keys.begin(), arg_keys.end(), key_s) != arg_keys.end();
    p = skip_ws(s, k.end);
    if (p >= s.size()) return out;
    if (s[p] != ':') return bad(p);
    p = skip_ws(s, p + 1);
    if (is_args) out.args_key = true;
    if (p >= s.size()) return out;
    auto v = scan_value(s, p);
    if (is_args) {
      out.args_begin = p;
      out.args_end = v.status == Scan::kComplete ? v.end : npos;
    }
    if (v.status == Scan::kBad) return bad(v.end);
    if (v.status == Scan::kIncomplete) return out;
    if (key_s == "name" && s[p] == '"') {
      auto name = try_parse_json(s.substr(p, v.end - p));
      if (name && name->is_string()) out.name = name->get<std::string>();
    }
    p = v.end;
  }
}

std::string json_escape(std::string_view s) {
  std::string q = OrderedJson(std::string(s)).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  return q.substr(1, q.size() - 2);
}

std::string py_json(const OrderedJson& j) {
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) out += ", ";
      first = false;
      out += '"';
      out += json_escape(k);
      out += "\": ";
      out += py_json(v);
    }
    return out + "}";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + py_json(j[i]);
    return out + "]";
  }
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::optional<OrderedJson> try_parse_json(std::string_view s) {
  auto j = OrderedJson::parse(s.begin(), s.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_json_ws(s[b])) ++b;
  while (e > b && is_json_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

Opening take_opening(std::string& buf, std::string_view marker, bool final) {
  buf.erase(0, skip_ws(buf, 0));
  if (buf.empty()) return Opening::kMore;
  if (starts_with(buf, marker)) {
    buf.erase(0, marker.size());
    return Opening::kFound;
  }
  if (!final && marker.substr(0, buf.size()) == buf) return Opening::kMore;
  return Opening::kOther;
}

}  // namespace mlxcpp::parse
