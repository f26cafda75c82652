// What every route needs: the engine, the server's defaults, request counters for /metrics and
// the Responses API's store. Owned by the app; routes hold a reference.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "scheduler/engine.h"
#include "server/chat_call.h"
#include "server/http/http_server.h"

namespace mlxcpp::server {

class ResponseStore;

// Requests by endpoint and status (Prometheus counters).
class RequestCounters {
 public:
  void add(const std::string& endpoint, int status);
  void render(std::string& out) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
};

struct ServerContext {
  sched::Engine& engine;
  ServerDefaults defaults;
  RequestCounters& counters;
  ResponseStore& responses;
};

// A route: `endpoint` names it in /metrics; the handler's exceptions become protocol-shaped
// errors (FieldError 400 with its param, CapacityError 413/429/503, others 500).
using RouteHandler = std::function<void(ServerContext&, const HttpRequest&, const std::shared_ptr<ResponseWriter>&)>;
void add_route(HttpServer& http, ServerContext& ctx, const std::string& method, const std::string& path,
               const std::string& endpoint, RouteHandler h);

// Route groups, one per file.
void add_openai_chat_routes(HttpServer& http, ServerContext& ctx);       // /v1/chat/completions
void add_openai_completion_routes(HttpServer& http, ServerContext& ctx); // /v1/completions
void add_openai_embedding_routes(HttpServer& http, ServerContext& ctx);  // /v1/embeddings
void add_anthropic_routes(HttpServer& http, ServerContext& ctx);         // /v1/messages, /v1/messages/count_tokens
void add_responses_routes(HttpServer& http, ServerContext& ctx);         // /v1/responses, GET/DELETE /v1/responses/{id}
void add_misc_routes(HttpServer& http, ServerContext& ctx);  // /v1/models, /health, /metrics, /tokenize, /detokenize

// A unique id with a prefix ("chatcmpl-", "msg_", "resp_") and the current unix time.
std::string make_id(const std::string& prefix);
int64_t unix_now();

}  // namespace mlxcpp::server
