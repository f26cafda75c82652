// Internal to src/server/http: the state one HttpServer shares with its connections. The
// io_context lives here, in a shared_ptr that ResponseWriters also hold, so a writer kept by the
// engine after the server is gone can never post into a destroyed io_context.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <spdlog/spdlog.h>

#include "server/http/http_server.h"

namespace mlxcpp::server::http_detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class Session;

// spdlog::get("http"), or the default logger when main registered none.
std::shared_ptr<spdlog::logger> http_logger();

// ASCII case-insensitive equality (header names, schemes, origins): Beast's, for std views.
bool iequals(std::string_view a, std::string_view b);

// Runs each callback once; one that throws is logged as `what` and the rest still run.
void run_callbacks(std::vector<std::function<void()>>& cbs, const char* what);

// OpenAI-style {"error": {"message", "type", "code"}}.
std::pair<std::string, std::string> default_error_body(int status, const std::string& message);

struct ServerCore : std::enable_shared_from_this<ServerCore> {
  explicit ServerCore(HttpOptions o);

  void listen();
  void run();
  void request_stop();  // any thread; idempotent
  void add_stop_callback(std::function<void()> cb);
  void close_listener();  // ~HttpServer: frees the port even while writers keep this alive
  std::pair<std::string, std::string> shape_error(const HttpRequest& req, int status, const std::string& msg) const;

  // Connection bookkeeping (the registry is what a stop walks).
  void session_opened(const std::shared_ptr<Session>& s);
  void session_closed(bool notify);  // its socket closed (once per session)
  void session_gone(Session* s);  // destroyed

  // Set up before listen(); read-only while serving.
  HttpOptions opts;
  std::map<std::string, std::map<std::string, Handler>> routes;  // path -> method -> handler
  ErrorShaper shaper;
  std::atomic<bool> stopping{false};
  std::atomic<uint16_t> bound_port{0};

 private:
  void do_accept();
  void begin_stop();
  void run_loop();
  std::vector<std::shared_ptr<Session>> live_sessions();

  std::mutex mu_;  // guards stop_cbs_ and sessions_
  std::vector<std::function<void()>> stop_cbs_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> running_{false};
  std::atomic<int> open_sessions_{0};

  // IO objects last: destroyed first, the io_context after the objects bound to it and before the
  // registry above (handlers it still holds may own sessions that unregister on destruction).
  asio::io_context ioc_;
  asio::strand<asio::io_context::executor_type> strand_;  // acceptor, signals, timers below
  tcp::acceptor acceptor_;
  asio::steady_timer grace_timer_;
  asio::steady_timer retry_timer_;
  std::optional<asio::signal_set> signals_;
};

}  // namespace mlxcpp::server::http_detail
