// One HTTP/1.1 connection, everything on its own strand. Reading (http_session.cpp): the
// request line + headers under header_timeout, the body under body_timeout, then the handler;
// while the response is pending a read stays outstanding, so a client that hangs up is seen at
// once (and bytes that arrive are kept: a pipelined next request). Writing (http_response.cpp):
// whole responses or chunked streams through one queue, never two writes in flight.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "server/http/cors.h"
#include "server/http/http_core.h"

namespace mlxcpp::server::http_detail {

class ResponseWriterImpl;

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Headers = ResponseWriter::Headers;
  Session(ServerCore* core, tcp::socket socket);
  ~Session();

  asio::any_io_executor executor() { return socket_.get_executor(); }

  // All of these run on the strand.
  void start();
  void server_stopping();  // idle/reading: close now; answering: close after this response
  void force_close();      // the grace period is over

  // The writer's calls; `seq` names the request, so a call for an earlier one is dropped.
  void send_whole(uint64_t seq, int status, const std::string& ctype, std::string body, const Headers& hs);
  void stream_head(uint64_t seq, int status, const std::string& ctype, const Headers& hs);
  void stream_chunk(uint64_t seq, std::string data);
  void stream_end(uint64_t seq);
  void writer_dropped(uint64_t seq);
  void abort_response(uint64_t seq, const char* why);

 private:
  enum class Phase { Header, Body, Responding, Idle, Closing, Closed };
  enum class Deadline { Header, Body, Idle, Write, Linger };
  struct Out {
    std::string head, body;
    std::string_view tail;
    bool last;  // the end of a response
  };

  // Read side (http_session.cpp).
  void start_header_read();
  void on_header(boost::system::error_code ec);
  void on_body(boost::system::error_code ec);
  void on_request();
  void start_watch();
  void on_watch(boost::system::error_code ec, size_t n);
  void arm(Deadline kind, std::chrono::milliseconds d);
  void disarm();
  void on_deadline(Deadline kind);
  // Starts answering `meta`; returns its CORS decision (the response headers are kept in cors_).
  CorsDecision begin_response(HttpRequest meta);
  void fail_request(int status, const std::string& message);
  std::string too_large_message() const;
  void finish_response();
  void linger_close();
  void close_now(const char* why);
  void log_request(const char* note);

  // Write side (http_response.cpp).
  bool current(uint64_t seq) const;
  std::string head_bytes(int status, const std::string& ctype, const Headers& hs, std::optional<size_t> length,
                         bool chunked);
  void enqueue(Out o);
  void write_next();

  ServerCore* core_;  // outlives every session (see http_core.h)
  tcp::socket socket_;
  asio::steady_timer timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::string remote_;
  Phase phase_ = Phase::Header;
  uint64_t timer_gen_ = 0;
  bool timed_out_ = false;
  bool watching_ = false;  // a read_some is outstanding
  bool writing_ = false;   // an async_write is outstanding
  std::deque<Out> out_;
  size_t queued_bytes_ = 0;

  // The request being answered.
  uint64_t seq_ = 0;
  HttpRequest meta_;  // without the body: for the shaper and the log
  std::weak_ptr<ResponseWriterImpl> writer_;
  Headers cors_;
  bool keep_alive_ = true;
  bool request_complete_ = false;  // read whole (false after a 400/408/413: bytes may follow)
  unsigned version_ = 11;  // fixed while a response is written
  bool chunked() const { return version_ >= 11; }  // HTTP/1.0 streams end with the connection
  bool started_ = false;      // headers queued
  bool stream_open_ = false;  // a stream's last chunk not yet queued
  int status_ = 0;
  size_t body_bytes_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace mlxcpp::server::http_detail
