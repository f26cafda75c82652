// CORS for the HTTP layer: which origins get Access-Control-Allow-Origin, and the answer to a
// preflight. Pure functions over the options and the request, so they are testable alone.
#pragma once

#include <string>
#include <vector>

#include "server/http/http_server.h"

namespace mlxcpp::server::http_detail {

struct CorsDecision {
  bool enabled = false;  // allowed_origins is non-empty
  bool allowed = false;  // the request has an Origin that matches
  std::string origin;    // the request's Origin ("" when none)
};

CorsDecision cors_decide(const std::vector<std::string>& allowed_origins, const std::string& origin);
// The headers every response to this request carries (empty unless allowed).
ResponseWriter::Headers cors_response_headers(const CorsDecision& d);
// OPTIONS with Origin and Access-Control-Request-Method.
bool is_preflight(const HttpRequest& req);
// The extra headers of a 204 preflight answer; `methods` is "GET, POST, OPTIONS"-style.
ResponseWriter::Headers preflight_headers(const HttpRequest& req, const std::string& methods);

}  // namespace mlxcpp::server::http_detail
