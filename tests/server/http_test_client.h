// Test helpers for the HTTP layer: a Beast sync client whose every blocking call is bounded,
// and a server running on a background thread that is always stopped and joined.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/http/http_server.h"

namespace mlxcpp::server::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// Bounds one blocking socket call. SO_RCVTIMEO cannot: asio's sync reads re-poll on EAGAIN.
// At the deadline the socket is shut down, which wakes the call with an error.
class Deadline {
 public:
  Deadline(tcp::socket& s, Ms d) : fd_(s.native_handle()) {
    thread_ = std::thread([this, d] {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, d, [this] { return done_; })) {
        fired_ = true;
        ::shutdown(fd_, SHUT_RDWR);
      }
    });
  }
  ~Deadline() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;
};

struct Reply {
  beast::error_code ec;
  bhttp::response<bhttp::string_body> res;
  int status() const { return static_cast<int>(res.result_int()); }
  std::string header(bhttp::field f) const { return std::string(res[f]); }
  std::string header(const std::string& name) const { return std::string(res[name]); }
};

class Client {
 public:
  explicit Client(uint16_t port, Ms timeout = 5000ms) : timeout_(timeout) {
    sock_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));  // loopback: immediate
  }

  bool send_raw(const std::string& bytes) {
    Deadline d(sock_, timeout_);
    beast::error_code ec;
    asio::write(sock_, asio::buffer(bytes), ec);
    return !ec;
  }

  bool send(const std::string& method, const std::string& target, const std::string& body = "",
            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    bhttp::request<bhttp::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(bhttp::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    if (!body.empty() || method == "POST") req.prepare_payload();
    Deadline d(sock_, timeout_);
    beast::error_code ec;
    bhttp::write(sock_, req, ec);
    return !ec;
  }

  Reply read() {
    Reply r;
    Deadline d(sock_, timeout_);
    bhttp::read(sock_, buf_, r.res, r.ec);
    return r;
  }

  Reply request(const std::string& method, const std::string& target, const std::string& body = "",
                const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    if (!send(method, target, body, headers)) {
      Reply r;
      r.ec = asio::error::broken_pipe;
      return r;
    }
    return read();
  }

  // Incremental reading of one (streamed) response.
  beast::error_code read_header() {
    parser_.emplace();
    parser_->body_limit(64u << 20);
    beast::error_code ec;
    Deadline d(sock_, timeout_);
    bhttp::read_header(sock_, buf_, *parser_, ec);
    return ec;
  }
  beast::error_code read_body_until(const std::string& needle) {
    beast::error_code ec;
    Deadline d(sock_, timeout_);
    while (!ec && !parser_->is_done() && parser_->get().body().find(needle) == std::string::npos)
      bhttp::read_some(sock_, buf_, *parser_, ec);
    return ec;
  }
  beast::error_code read_rest() {
    beast::error_code ec;
    Deadline d(sock_, timeout_);
    bhttp::read(sock_, buf_, *parser_, ec);
    return ec;
  }
  bhttp::response_parser<bhttp::string_body>& parser() { return *parser_; }

  // True if the server closes the connection within `d`; what it sent meanwhile lands in `got`.
  bool wait_closed(Ms d, std::string* got = nullptr) {
    Deadline dl(sock_, d);
    std::string all(static_cast<const char*>(buf_.data().data()), buf_.size());
    char tmp[4096];
    for (;;) {
      beast::error_code ec;
      size_t n = sock_.read_some(asio::buffer(tmp), ec);
      all.append(tmp, n);
      if (ec) break;
    }
    if (got) *got = all;
    return !dl.fired();
  }

  void close() {
    beast::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
  }

 private:
  asio::io_context ioc_;
  tcp::socket sock_{ioc_};
  beast::flat_buffer buf_;
  Ms timeout_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
};

// Options with short timeouts, port 0 on loopback.
inline HttpOptions test_options() {
  HttpOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.io_threads = 2;
  o.header_timeout = 2000ms;
  o.body_timeout = 2000ms;
  o.idle_timeout = 5000ms;
  o.shutdown_grace = 2000ms;
  return o;
}

// HttpServer::run() on a background thread. The destructor stops it and waits (bounded): a
// server that does not stop aborts the test binary instead of hanging it.
class ServerRunner {
 public:
  explicit ServerRunner(HttpOptions o) : server(std::move(o)) {}
  ~ServerRunner() {
    if (!done_.valid()) return;
    server.stop();
    if (done_.wait_for(15s) != std::future_status::ready) {
      std::fprintf(stderr, "HttpServer::run() did not return 15 s after stop(): aborting\n");
      std::abort();
    }
    try {
      done_.get();
    } catch (...) {
    }
  }
  void start() {
    server.listen();
    run_async();
  }
  void run_async() { done_ = std::async(std::launch::async, [this] { server.run(); }); }
  uint16_t port() const { return server.port(); }
  // True if run() returned within `d`.
  bool wait_returned(Ms d) { return done_.wait_for(d) == std::future_status::ready; }

  HttpServer server;

 private:
  std::future<void> done_;
};

// Threads a test's handlers start (the "engine"): joined at scope exit; each must end on its own.
class Workers {
 public:
  ~Workers() { join(); }
  void spawn(std::function<void()> f) {
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(f));
  }
  void join() {
    std::vector<std::thread> ts;
    {
      std::lock_guard lock(mu_);
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

// A one-shot flag a test can wait on with a bound.
class Flag {
 public:
  void set() {
    std::lock_guard lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(Ms d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [this] { return set_; });
  }
  bool is_set() {
    std::lock_guard lock(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

}  // namespace mlxcpp::server::test
