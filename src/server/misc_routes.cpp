// GET /v1/models, /health, /metrics (Prometheus text) and POST /tokenize, /detokenize (the
// shapes of llama-server and vLLM: "content"/"prompt" in, "tokens" out, and back).
#include <fstream>

#include <fmt/format.h>
#include <mlx/memory.h>
#include <unistd.h>

#include "server/event_relay.h"
#include "server/openai/chat_completions.h"
#include "server/server_context.h"

namespace mlxcpp::server {

namespace {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

std::string metrics_text(const ServerContext& ctx) {
  std::string out;
  ctx.counters.render(out);
  ctx.engine.metrics().render(out);
  const auto& pc = ctx.engine.prompt_cache();
  sched::render_metric(out, "mlxcpp_prompt_cache_hits_total", "counter", "Prompt-cache lookups that reused tokens",
                       static_cast<double>(pc.hits()));
  sched::render_metric(out, "mlxcpp_prompt_cache_misses_total", "counter", "Prompt-cache lookups that reused nothing",
                       static_cast<double>(pc.misses()));
  sched::render_metric(out, "mlxcpp_prompt_cache_bytes", "gauge", "Bytes held by the prompt cache",
                       static_cast<double>(pc.bytes()));
  sched::render_metric(out, "mlxcpp_prompt_cache_max_bytes", "gauge", "The prompt cache's cap",
                       static_cast<double>(pc.max_bytes()));
  sched::render_metric(out, "mlxcpp_prompt_cache_entries", "gauge", "Entries in the prompt cache",
                       static_cast<double>(pc.entries()));
  sched::render_metric(out, "mlxcpp_mlx_active_memory_bytes", "gauge", "MLX active memory",
                       static_cast<double>(mlx::core::get_active_memory()));
  sched::render_metric(out, "mlxcpp_mlx_peak_memory_bytes", "gauge", "MLX peak memory",
                       static_cast<double>(mlx::core::get_peak_memory()));
  sched::render_metric(out, "mlxcpp_resident_memory_bytes", "gauge", "Process resident set size",
                       static_cast<double>(resident_bytes()));
  return out;
}

void tokenize(ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
  Json body = parse_body(req.body);
  Fields f(body);
  const auto& m = ctx.engine.model();
  std::vector<int32_t> ids;
  if (const Json* msgs = f.array("messages")) {
    ChatCall call;
    for (size_t i = 0; i < msgs->size(); ++i) {
      call.messages.push_back(openai::parse_chat_message((*msgs)[i], fmt::format("messages[{}]", i)));
    }
    read_continuation(f, call);
    PreparedCall p = render_chat(m, call);
    ids.assign(p.request.prompt.begin(), p.request.prompt.end());
  } else {
    auto text = f.str("content");
    if (!text) text = f.str("prompt");
    if (!text) f.fail("content", "is required (or 'prompt', or 'messages')");
    ids = m.tokenizer.encode(*text, f.boolean("add_special_tokens").value_or(true));
  }
  Json out{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", m.context_length}};
  w->send(200, "application/json", dump(out));
}

void detokenize(ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
  Json body = parse_body(req.body);
  Fields f(body);
  const Json* toks = f.array("tokens");
  if (!toks) f.fail("tokens", "is required");
  const int vocab = ctx.engine.model().model().vocab_size();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < toks->size(); ++i) {
    const Json& t = (*toks)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab) {
      f.fail("tokens", fmt::format("item {} must be a token id in [0, {}), got {}", i, vocab, brief(t)));
    }
    ids.push_back(t.get<int32_t>());
  }
  std::string text = ctx.engine.model().tokenizer.decode(ids);
  w->send(200, "application/json", dump(Json{{"content", text}, {"prompt", text}}));
}

}  // namespace

void add_misc_routes(HttpServer& http, ServerContext& ctx) {
  add_route(http, ctx, "GET", "/health", "health", [](ServerContext&, const HttpRequest&, const auto& w) {
    w->send(200, "application/json", R"({"status":"ok"})");
  });
  add_route(http, ctx, "GET", "/v1/models", "models", [](ServerContext& ctx, const HttpRequest&, const auto& w) {
    const auto& m = ctx.engine.model();
    Json model{{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", "mlxcpp"},
               {"max_model_len", m.context_length}};
    w->send(200, "application/json", dump(Json{{"object", "list"}, {"data", Json::array({model})}}));
  });
  add_route(http, ctx, "GET", "/metrics", "metrics", [](ServerContext& ctx, const HttpRequest&, const auto& w) {
    w->send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(ctx));
  });
  add_route(http, ctx, "POST", "/tokenize", "tokenize", tokenize);
  add_route(http, ctx, "POST", "/detokenize", "detokenize", detokenize);
}

}  // namespace mlxcpp::server
