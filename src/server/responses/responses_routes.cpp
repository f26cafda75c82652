// POST /v1/responses: the OpenAI Responses API over the shared chat core. A stored response
// (store: true, the default) is kept in the ResponseStore so previous_response_id continues it;
// GET/DELETE /v1/responses/{id} read or drop it.
#include "server/event_relay.h"
#include "server/responses/response_store.h"
#include "server/responses/response_stream.h"
#include "server/responses/responses_request.h"
#include "server/server_context.h"

namespace mlxcpp::server {

namespace {

using responses::ResponseStream;

// Keeps the finished response and the conversation it ends (only a completed or incomplete one).
struct Keeper {
  ResponseStore& store;
  std::vector<Message> history;  // previous conversation + this input
  bool enabled;

  void keep(const ResponseStream& s) const {
    if (!enabled || (s.status() != "completed" && s.status() != "incomplete")) return;
    StoredResponse r;
    r.conversation = history;
    r.conversation.push_back(s.output_message());
    r.response = s.response();
    store.put(s.response().at("id").get<std::string>(), std::move(r));
  }
};

void create_response(ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
  Json body = parse_body(req.body);
  check_model_field(Fields(body), ctx.engine.model());
  auto r = responses::parse_responses_request(body);
  std::vector<Message> history;
  if (r.previous_response_id) history = ctx.responses.at(*r.previous_response_id).conversation;
  history.insert(history.end(), r.input.begin(), r.input.end());
  r.chat.messages = responses::assemble_messages(r.instructions, history);

  auto prepared = prepare_chat(ctx.engine, r.chat, ctx.defaults);
  prepared.request.endpoint = "responses";

  // The response repeats the sampling values in effect.
  if (!r.echo.contains("temperature")) r.echo["temperature"] = prepared.request.sampling.temp;
  if (!r.echo.contains("top_p")) r.echo["top_p"] = prepared.request.sampling.top_p;
  auto state = std::make_shared<ResponseStream>(responses::response_skeleton(
      make_id("resp_"), ctx.engine.model().id, r.echo, r.instructions, r.previous_response_id, r.store));
  auto keeper = std::make_shared<Keeper>(Keeper{ctx.responses, std::move(history), r.store});

  if (r.stream) {
    StreamEncoder enc;
    enc.encode = [state, keeper](const sched::Event& e) {
      std::string out;
      if (!state->started()) out += responses::to_sse(state->start());
      out += responses::to_sse(state->on_event(e));
      if (state->finished()) keeper->keep(*state);
      return out;
    };
    enc.failure = [state](const sched::Failure& f) { return responses::to_sse(state->on_failure(f)); };
    relay_stream(ctx.engine, w, std::move(prepared.request), std::move(enc), Protocol::kOpenAI);
  } else {
    BodyBuilder b;
    b.add = [state](const sched::Event& e) { state->on_event(e); };
    b.body = [state, keeper]() {
      keeper->keep(*state);
      return state->response();
    };
    relay_whole(ctx.engine, w, std::move(prepared.request), std::move(b), Protocol::kOpenAI);
  }
}

}  // namespace

void add_responses_routes(HttpServer& http, ServerContext& ctx) {
  add_route(http, ctx, "POST", "/v1/responses", "responses", create_response);
  // GET / DELETE /v1/responses/{id}: a stored response, or its removal.
  auto id_of = [](const HttpRequest& req) { return req.path.substr(req.path.rfind('/') + 1); };
  add_route(http, ctx, "GET", "/v1/responses/*", "responses_get",
            [id_of](ServerContext& c, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
              w->send(200, "application/json", dump(c.responses.at(id_of(req), "response_id").response));
            });
  add_route(http, ctx, "DELETE", "/v1/responses/*", "responses_delete",
            [id_of](ServerContext& c, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
              const std::string id = id_of(req);
              if (!c.responses.erase(id)) {
                throw NotFoundError("response_id", "no stored response with id '" + id + "'");
              }
              w->send(200, "application/json", dump(Json{{"id", id}, {"object", "response"}, {"deleted", true}}));
            });
}

}  // namespace mlxcpp::server
