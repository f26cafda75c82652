#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "server/json_fields.h"

namespace mlxcpp::server {

namespace {

const char* openai_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

const char* anthropic_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

Protocol protocol_for_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? Protocol::kAnthropic : Protocol::kOpenAI;
}

ApiError api_error_from(const std::exception& e) {
  if (auto* f = dynamic_cast<const FieldError*>(&e)) return {400, f->what(), f->param()};
  if (auto* h = dynamic_cast<const HttpStatusError*>(&e)) return {h->status(), h->what(), h->param()};
  // A JSON exception here comes from reading a request body's values.
  if (dynamic_cast<const nlohmann::json::exception*>(&e)) return {400, e.what(), ""};
  return {error_status(e), e.what(), ""};
}

std::string error_body(Protocol p, int status, const std::string& message, const std::string& param) {
  nlohmann::json j;
  if (p == Protocol::kAnthropic) {
    j = {{"type", "error"}, {"error", {{"type", anthropic_type(status)}, {"message", message}}}};
  } else {
    j = {{"error",
          {{"message", message},
           {"type", openai_type(status)},
           {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
           {"code", status}}}};
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_error(ResponseWriter& w, Protocol p, const ApiError& e) {
  w.send(e.status, "application/json", error_body(p, e.status, e.message, e.param));
}

std::pair<std::string, std::string> shape_http_error(const HttpRequest& req, int status, const std::string& message) {
  return {"application/json", error_body(protocol_for_path(req.path), status, message)};
}

}  // namespace mlxcpp::server
