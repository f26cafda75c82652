// The ResponseWriter handed to handlers: a thread-safe front that keeps the state machine
// (nothing sent -> whole response | stream -> ended) and posts the actual writes onto the
// connection's strand. It owns the on_close callbacks; the connection fires them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/http/http_server.h"

namespace mlxcpp::server::http_detail {

struct ServerCore;
class Session;

class ResponseWriterImpl final : public ResponseWriter {
 public:
  // `seq` names the request on its connection: calls that arrive after it are dropped there.
  ResponseWriterImpl(std::shared_ptr<ServerCore> core, std::shared_ptr<Session> session, uint64_t seq);
  ~ResponseWriterImpl() override;

  void send(int status, std::string content_type, std::string body, Headers headers = {}) override;
  bool start_stream(int status = 200, std::string content_type = "text/event-stream", Headers headers = {}) override;
  bool write(std::string chunk) override;
  void end_stream() override;
  void on_close(std::function<void()> cb) override;
  bool closed() const override;

  // The connection's side (on its strand).
  void notify_closed();  // client gone / server stopped before the end: fires the callbacks once
  void mark_finished();  // the response was fully written: later calls are ignored
  // The handler threw: a 500 if nothing was sent yet; a running stream is cut (a truncated
  // stream must not look complete); a response already sent or ended stands.
  void fail(const HttpRequest& req, const std::string& message);

 private:
  enum class State { Fresh, Sent, Streaming, Ended };
  template <class F>
  void post(F&& f);

  // Declared in this order so the session (and its socket) is released before the core (which
  // owns the io_context).
  std::shared_ptr<ServerCore> core_;
  std::shared_ptr<Session> session_;
  uint64_t seq_;
  mutable std::mutex mu_;
  State state_ = State::Fresh;
  bool closed_ = false;    // client gone or server stopped
  bool finished_ = false;  // response complete
  std::vector<std::function<void()>> on_close_;
};

}  // namespace mlxcpp::server::http_detail
