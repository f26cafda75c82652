#include "server/http/http_dispatch.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "server/http/response_writer.h"

namespace mlxcpp::server::http_detail {

namespace {

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// Both headers are checked (no early return), so timing does not tell which one was tried.
bool authorized(const std::string& key, const HttpRequest& req) {
  bool ok = false;
  std::string auth = req.header("authorization");
  if (starts_with_icase(auth, "bearer ")) ok |= constant_time_equal(trim(auth.substr(7)), key);
  std::string x = req.header("x-api-key");
  if (!x.empty()) ok |= constant_time_equal(trim(x), key);
  return ok;
}

bool is_open_path(const HttpOptions& opts, const std::string& path) {
  return std::find(opts.open_paths.begin(), opts.open_paths.end(), path) != opts.open_paths.end();
}

std::string join(const std::set<std::string>& methods) {
  std::string out;
  for (const auto& m : methods) out += (out.empty() ? "" : ", ") + m;
  return out;
}

std::set<std::string> methods_of(const std::map<std::string, Handler>& by_method) {
  std::set<std::string> out;
  for (const auto& [m, h] : by_method) out.insert(m);
  return out;
}

// The exact route, else a "<prefix>/*" route whose prefix is followed by one more segment.
using Routes = std::map<std::string, std::map<std::string, Handler>>;
Routes::const_iterator find_route(const Routes& routes, const std::string& path) {
  auto p = routes.find(path);
  if (p != routes.end()) return p;
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size()) return routes.end();
  return routes.find(path.substr(0, slash + 1) + "*");
}

// What a preflight may ask for: the path's methods, or every routed method for an unknown path.
std::string preflight_methods(const ServerCore& core, const std::string& path) {
  std::set<std::string> methods{"OPTIONS"};
  auto p = find_route(core.routes, path);
  if (p != core.routes.end()) {
    for (const auto& m : methods_of(p->second)) methods.insert(m);
  } else {
    for (const auto& [route, by_method] : core.routes)
      for (const auto& m : methods_of(by_method)) methods.insert(m);
  }
  return join(methods);
}

void run_handler(const Handler& h, const HttpRequest& req, const std::shared_ptr<ResponseWriterImpl>& w) {
  try {
    h(req, w);
  } catch (const std::exception& e) {
    http_logger()->error("{} {}: handler threw: {}", req.method, req.path, e.what());
    w->fail(req, std::string("internal error: ") + e.what());
  } catch (...) {
    http_logger()->error("{} {}: handler threw a non-std exception", req.method, req.path);
    w->fail(req, "internal error");
  }
}

}  // namespace

void dispatch_request(ServerCore& core, const HttpRequest& req, const std::shared_ptr<ResponseWriterImpl>& w,
                      const CorsDecision& cors) {
  auto error = [&](int status, const std::string& msg, ResponseWriter::Headers hs = {}) {
    auto [ct, body] = core.shape_error(req, status, msg);
    w->send(status, std::move(ct), std::move(body), std::move(hs));
  };
  if (core.stopping) return error(503, "the server is shutting down");

  // Preflights carry no credentials by design: answered before the key check, never routed.
  if (cors.enabled && is_preflight(req)) {
    if (!cors.allowed) return error(403, "origin '" + cors.origin + "' is not allowed");
    return w->send(204, "", "", preflight_headers(req, preflight_methods(core, req.path)));
  }

  if (!core.opts.api_key.empty() && !is_open_path(core.opts, req.path) && !authorized(core.opts.api_key, req)) {
    return error(401, "missing or invalid API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')",
                 {{"WWW-Authenticate", "Bearer"}});
  }

  auto p = find_route(core.routes, req.path);
  if (p == core.routes.end()) return error(404, "no route for " + req.method + " " + req.path);
  auto m = p->second.find(req.method);
  if (m == p->second.end()) {
    return error(405, "method " + req.method + " is not allowed on " + req.path,
                 {{"Allow", join(methods_of(p->second))}});
  }
  run_handler(m->second, req, w);
}

}  // namespace mlxcpp::server::http_detail
