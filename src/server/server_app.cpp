#include "server/server_app.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/api_error.h"
#include "server/responses/response_store.h"
#include "server/server_context.h"

namespace mlxcpp::server {

int run_server(const sched::ServedModel& model, const ServeOptions& opts,
               const std::function<void(const std::string& url)>& on_ready) {
  sched::Engine engine(model, opts.engine);
  RequestCounters counters;
  ResponseStore responses(opts.response_store_bytes);
  ServerContext ctx{engine, opts.defaults, counters, responses};

  HttpServer http(opts.http);
  http.set_error_shaper(shape_http_error);
  add_misc_routes(http, ctx);
  add_openai_chat_routes(http, ctx);
  add_openai_completion_routes(http, ctx);
  add_openai_embedding_routes(http, ctx);
  add_anthropic_routes(http, ctx);
  add_responses_routes(http, ctx);
  // A stop cancels queued and running generations; their streams end and the server exits.
  http.on_stop([&engine] { engine.shutdown(); });
  http.listen();
  on_ready(fmt::format("http://{}:{}", opts.http.host, http.port()));
  http.run();
  engine.shutdown();
  spdlog::info("server stopped");
  return 0;
}

}  // namespace mlxcpp::server
