// Connects an engine request to its HTTP response: submits it, relays events (as SSE chunks
// while streaming, or into one body at the end), and cancels the request when the client goes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/engine.h"
#include "server/api_error.h"
#include "server/http/http_server.h"
#include "server/json_fields.h"

namespace mlxcpp::server {

// "data: <json>\n\n", or with an event name "event: <name>\ndata: <json>\n\n".
std::string sse(const Json& data, const std::string& event = "");
// JSON text safe for invalid UTF-8 (replaced), compact.
std::string dump(const Json& j);

// Streaming: `encode` turns each event into SSE text (called on the engine thread, in order);
// `failure` renders a failure after the stream has started. The response starts with the first
// event, so a request the engine refuses at once still gets a plain error response.
struct StreamEncoder {
  std::function<std::string(const sched::Event&)> encode;
  std::function<std::string(const sched::Failure&)> failure;
};

// Whole response: `add` sees every event; `body` builds the JSON at the end (after Usage).
struct BodyBuilder {
  std::function<void(const sched::Event&)> add;
  std::function<Json()> body;
};

// A StreamEncoder over an encoder object with encode(Event) and failure(Failure) methods.
template <class Encoder>
StreamEncoder stream_encoder(std::shared_ptr<Encoder> enc) {
  return StreamEncoder{[enc](const sched::Event& e) { return enc->encode(e); },
                       [enc](const sched::Failure& f) { return enc->failure(f); }};
}

// Submit errors (413/429/503) propagate as exceptions to the caller, before anything was sent.
// Several requests (e.g. /v1/completions with a list of prompts) answer as one: their choices are
// numbered across them in order, one Usage sums them, and a client that goes cancels them all.
void relay_stream(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, std::vector<sched::Request> reqs,
                  StreamEncoder enc, Protocol p);
void relay_whole(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, std::vector<sched::Request> reqs,
                 BodyBuilder b, Protocol p);
void relay_stream(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::Request req,
                  StreamEncoder enc, Protocol p);
void relay_whole(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::Request req, BodyBuilder b,
                 Protocol p);

}  // namespace mlxcpp::server
