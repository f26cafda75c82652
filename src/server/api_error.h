// Errors in each protocol's own shape. One boundary maps engine exceptions to a status and a
// body: OpenAI's {"error": {...}} or Anthropic's {"type": "error", "error": {...}}.
#pragma once

#include <exception>
#include <string>

#include "core/errors.h"
#include "server/http/http_server.h"

namespace mlxcpp::server {

enum class Protocol { kOpenAI, kAnthropic };

// Anthropic for /v1/messages*, OpenAI otherwise.
Protocol protocol_for_path(const std::string& path);

// A request error that names the offending field (OpenAI's "param").
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;
};

// A request error with its own status (404 for an unknown model, ...).
class HttpStatusError : public RequestError {
 public:
  HttpStatusError(int status, std::string param, const std::string& message)
      : RequestError(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// The status an exception maps to (RequestError/TemplateError 400, CapacityError its own, ...).
ApiError api_error_from(const std::exception& e);

std::string error_body(Protocol p, int status, const std::string& message, const std::string& param = "");

// Sends the error as a whole response (JSON, the protocol's shape).
void send_error(ResponseWriter& w, Protocol p, const ApiError& e);

// The ErrorShaper for errors the HTTP layer answers itself.
std::pair<std::string, std::string> shape_http_error(const HttpRequest& req, int status, const std::string& message);

}  // namespace mlxcpp::server
