#include "server/event_relay.h"

#include <mutex>

namespace mlxcpp::server {

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse(const Json& data, const std::string& event) {
  std::string out;
  if (!event.empty()) out += "event: " + event + "\n";
  out += "data: " + dump(data) + "\n\n";
  return out;
}

namespace {

// Several engine requests answered as one: choices numbered across them in order, one summed
// Usage after the last, and the first Failure ends it all (the others are cancelled).
class FanIn : public std::enable_shared_from_this<FanIn> {
 public:
  FanIn(sched::Engine& engine, sched::EventSink sink, size_t parts)
      : engine_(engine), sink_(std::move(sink)), remaining_(parts) {}

  sched::EventSink part(int choice_offset) {
    return [self = shared_from_this(), choice_offset](sched::Event e) { self->on_event(std::move(e), choice_offset); };
  }
  void submitted(sched::RequestId id) {
    std::lock_guard lock(mu_);
    ids_.push_back(id);
  }
  // Ends the answer without telling the client (a later submit failed; the caller answers).
  void abandon() { cancel_all(/*mark_done=*/true); }
  void cancel_all(bool mark_done = false) {
    std::vector<sched::RequestId> ids;
    {
      std::lock_guard lock(mu_);
      if (mark_done) done_ = true;
      ids = ids_;
    }
    for (auto id : ids) engine_.cancel(id);
  }

 private:
  void on_event(sched::Event e, int offset) {
    bool failed = false;
    {
      std::lock_guard lock(mu_);
      if (done_) return;
      if (auto* d = std::get_if<sched::Delta>(&e)) {
        d->choice += offset;
      } else if (auto* f = std::get_if<sched::Finish>(&e)) {
        f->choice += offset;
      } else if (auto* u = std::get_if<sched::Usage>(&e)) {
        if (total_.prompt_tokens == 0) total_.ttft_s = u->ttft_s;
        total_.prompt_tokens += u->prompt_tokens;
        total_.completion_tokens += u->completion_tokens;
        total_.cached_tokens += u->cached_tokens;
        if (--remaining_ > 0) return;
        done_ = true;
        e = total_;
      } else {
        failed = done_ = true;
      }
      sink_(std::move(e));
    }
    if (failed) cancel_all();
  }

  sched::Engine& engine_;
  sched::EventSink sink_;
  std::mutex mu_;
  size_t remaining_;
  bool done_ = false;
  sched::Usage total_;
  std::vector<sched::RequestId> ids_;
};

// Submits every request into one sink; a client that goes cancels them all.
void submit_all(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, std::vector<sched::Request> reqs,
                sched::EventSink sink) {
  if (reqs.size() == 1) {
    auto id = engine.submit(std::move(reqs.front()), std::move(sink));
    w->on_close([&engine, id] { engine.cancel(id); });
    return;
  }
  auto fan = std::make_shared<FanIn>(engine, std::move(sink), reqs.size());
  int offset = 0;
  for (auto& r : reqs) {
    const int n = r.n;
    try {
      fan->submitted(engine.submit(std::move(r), fan->part(offset)));
    } catch (...) {
      fan->abandon();
      throw;
    }
    offset += n;
  }
  w->on_close([fan] { fan->cancel_all(); });
}

}  // namespace

void relay_stream(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, std::vector<sched::Request> reqs,
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
  submit_all(engine, w, std::move(reqs), std::move(sink));
}

void relay_whole(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, std::vector<sched::Request> reqs,
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
  submit_all(engine, w, std::move(reqs), std::move(sink));
}

void relay_stream(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::Request req,
                  StreamEncoder enc, Protocol p) {
  std::vector<sched::Request> reqs;
  reqs.push_back(std::move(req));
  relay_stream(engine, w, std::move(reqs), std::move(enc), p);
}

void relay_whole(sched::Engine& engine, const std::shared_ptr<ResponseWriter>& w, sched::Request req, BodyBuilder b,
                 Protocol p) {
  std::vector<sched::Request> reqs;
  reqs.push_back(std::move(req));
  relay_whole(engine, w, std::move(reqs), std::move(b), p);
}

}  // namespace mlxcpp::server
