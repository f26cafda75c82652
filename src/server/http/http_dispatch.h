// From a parsed request to an answer: stop (503), CORS preflight, API key (401), routing
// (404/405), then the handler, whose exceptions become a 500.
#pragma once

#include <memory>

#include "server/http/cors.h"
#include "server/http/http_core.h"

namespace mlxcpp::server::http_detail {

class ResponseWriterImpl;

void dispatch_request(ServerCore& core, const HttpRequest& req, const std::shared_ptr<ResponseWriterImpl>& w,
                      const CorsDecision& cors);

}  // namespace mlxcpp::server::http_detail
