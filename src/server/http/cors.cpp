#include "server/http/cors.h"

#include <algorithm>
#include <cctype>

#include "server/http/http_core.h"

namespace mlxcpp::server::http_detail {

namespace {

// Headers browsers' SDK clients send that a preflight must always allow.
constexpr const char* kAlwaysAllowed[] = {"authorization", "content-type", "x-api-key", "anthropic-version"};
constexpr const char* kMaxAge = "600";

std::string lower_trim(std::string s) {
  auto sp = [](unsigned char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && sp(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && sp(s[i])) ++i;
  s.erase(0, i);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A header name is an RFC 9110 token; anything else in the request list is dropped, not echoed.
bool is_token(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

}  // namespace

CorsDecision cors_decide(const std::vector<std::string>& allowed_origins, const std::string& origin) {
  CorsDecision d;
  d.enabled = !allowed_origins.empty();
  d.origin = origin;
  if (!d.enabled || origin.empty()) return d;
  for (const auto& a : allowed_origins) {
    if (a == "*" || iequals(a, origin)) {
      d.allowed = true;
      break;
    }
  }
  return d;
}

ResponseWriter::Headers cors_response_headers(const CorsDecision& d) {
  if (!d.allowed) return {};
  // The origin is echoed (not "*") so credentialed requests work too; hence Vary.
  return {{"Access-Control-Allow-Origin", d.origin}, {"Vary", "Origin"}};
}

bool is_preflight(const HttpRequest& req) {
  return req.method == "OPTIONS" && !req.header("origin").empty() &&
         !req.header("access-control-request-method").empty();
}

ResponseWriter::Headers preflight_headers(const HttpRequest& req, const std::string& methods) {
  std::vector<std::string> names;
  std::string requested = req.header("access-control-request-headers");
  size_t pos = 0;
  while (pos <= requested.size()) {
    size_t comma = requested.find(',', pos);
    if (comma == std::string::npos) comma = requested.size();
    std::string name = lower_trim(requested.substr(pos, comma - pos));
    if (is_token(name) && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    pos = comma + 1;
  }
  for (const char* h : kAlwaysAllowed) {
    if (std::find(names.begin(), names.end(), h) == names.end()) names.emplace_back(h);
  }
  std::string allow_headers;
  for (const auto& n : names) allow_headers += (allow_headers.empty() ? "" : ", ") + n;
  return {{"Access-Control-Allow-Methods", methods},
          {"Access-Control-Allow-Headers", allow_headers},
          {"Access-Control-Max-Age", kMaxAge}};
}

}  // namespace mlxcpp::server::http_detail
