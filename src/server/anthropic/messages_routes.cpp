// POST /v1/messages and POST /v1/messages/count_tokens. The `anthropic-version` header is
// accepted whatever its value; `x-api-key` is checked by the HTTP layer.
#include <memory>

#include "server/anthropic/messages.h"
#include "server/event_relay.h"
#include "server/server_context.h"

namespace mlxcpp::server {

namespace {

void handle_messages(ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
  anthropic::MessagesRequest r = anthropic::parse_messages_request(parse_body(req.body));
  PreparedCall p = prepare_chat(ctx.engine, r.call, ctx.defaults);
  p.request.endpoint = "messages";
  const std::string id = make_id("msg_");
  const std::string& model = ctx.engine.model().id;
  if (r.stream) {
    auto enc = std::make_shared<anthropic::MessagesStreamEncoder>(id, model, p.request.prompt.size());
    relay_stream(ctx.engine, w, std::move(p.request), stream_encoder(enc), Protocol::kAnthropic);
  } else {
    auto b = std::make_shared<anthropic::MessagesBodyBuilder>(id, model);
    BodyBuilder bb{[b](const sched::Event& e) { b->add(e); }, [b] { return b->body(); }};
    relay_whole(ctx.engine, w, std::move(p.request), std::move(bb), Protocol::kAnthropic);
  }
}

void handle_count_tokens(ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
  anthropic::MessagesRequest r = anthropic::parse_messages_request(parse_body(req.body), /*count_only=*/true);
  const size_t n = anthropic::count_prompt_tokens(ctx.engine.model(), r.call);
  w->send(200, "application/json", dump(Json{{"input_tokens", n}}));
}

}  // namespace

void add_anthropic_routes(HttpServer& http, ServerContext& ctx) {
  add_route(http, ctx, "POST", "/v1/messages", "messages", handle_messages);
  add_route(http, ctx, "POST", "/v1/messages/count_tokens", "messages_count_tokens", handle_count_tokens);
}

}  // namespace mlxcpp::server
