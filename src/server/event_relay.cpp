#include "server/event_relay.h"

namespace mlxcpp::server {

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse(const Json& data, const std::string& event) {
  std::string out;
  if (!event.empty()) out += "event: " + event + "\n";
  out += "data: " + dump(data) + "\n\n";
  return out;
}

namespace {

void watch_disconnect(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::RequestId id) {
  w->on_close([&engine, id] { engine.cancel(id); });
}

}  // namespace

sched::RequestId relay_stream(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::Request req,
                              StreamEncoder enc, Protocol p) {
  auto started = std::make_shared<bool>(false);
  auto sink = [w, enc = std::move(enc), started, p](sched::Event e) {
    if (auto* f = std::get_if<sched::Failure>(&e)) {
      if (!*started) {
        send_error(*w, p, ApiError{f->status, f->message, ""});
      } else {
        w->write(enc.failure(*f));
        w->end_stream();
      }
      return;
    }
    if (!*started) {
      *started = true;
      w->start_stream();
    }
    std::string text = enc.encode(e);
    if (!text.empty()) w->write(std::move(text));
    if (std::holds_alternative<sched::Usage>(e)) w->end_stream();
  };
  auto id = engine.submit(std::move(req), std::move(sink));
  watch_disconnect(engine, w, id);
  return id;
}

sched::RequestId relay_whole(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::Request req,
                             BodyBuilder b, Protocol p) {
  auto sink = [w, b = std::move(b), p](sched::Event e) {
    if (auto* f = std::get_if<sched::Failure>(&e)) {
      send_error(*w, p, ApiError{f->status, f->message, ""});
      return;
    }
    b.add(e);
    if (std::holds_alternative<sched::Usage>(e)) {
      try {
        w->send(200, "application/json", dump(b.body()));
      } catch (const std::exception& ex) {
        send_error(*w, p, ApiError{500, ex.what(), ""});
      }
    }
  };
  auto id = engine.submit(std::move(req), std::move(sink));
  watch_disconnect(engine, w, id);
  return id;
}

}  // namespace mlxcpp::server
