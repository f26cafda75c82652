// `mlxcpp serve` below the CLI: one engine, the HTTP server, every protocol's routes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "scheduler/engine.h"
#include "server/chat_call.h"
#include "server/http/http_server.h"

namespace mlxcpp::server {

struct ServeOptions {
  HttpOptions http;
  sched::EngineOptions engine;
  ServerDefaults defaults;
  int64_t response_store_bytes = 64LL << 20;  // the Responses API's previous_response_id store
};

// Serves `model` until SIGINT/SIGTERM; calls on_ready(url) once listening. Returns the exit code.
int run_server(const sched::ServedModel& model, const ServeOptions& opts,
               const std::function<void(const std::string& url)>& on_ready);

}  // namespace mlxcpp::server
