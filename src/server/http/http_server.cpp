#include "server/http/http_server.h"

#include <algorithm>
#include <csignal>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/http/http_core.h"
#include "server/http/http_session.h"

namespace mlxcpp::server {

namespace http_detail {

using error_code = boost::system::error_code;

std::shared_ptr<spdlog::logger> http_logger() {
  if (auto l = spdlog::get("http")) return l;
  return spdlog::default_logger();
}

std::pair<std::string, std::string> default_error_body(int status, const std::string& message) {
  const char* type = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
  nlohmann::json code;
  switch (status) {
    case 400: code = "bad_request"; break;
    case 401: code = "invalid_api_key"; break;
    case 403: code = "forbidden"; break;
    case 404: code = "not_found"; break;
    case 405: code = "method_not_allowed"; break;
    case 408: code = "request_timeout"; break;
    case 413: code = "request_too_large"; break;
    case 431: code = "headers_too_large"; break;
    case 500: code = "internal_error"; break;
    case 503: code = "unavailable"; break;
    default: break;  // null
  }
  nlohmann::json j = {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
  return {"application/json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

ServerCore::ServerCore(HttpOptions o)
    : opts(std::move(o)),
      ioc_(std::max(1, opts.io_threads)),
      strand_(asio::make_strand(ioc_)),
      acceptor_(strand_),
      grace_timer_(strand_),
      retry_timer_(strand_) {}

bool iequals(std::string_view a, std::string_view b) {
  return boost::beast::iequals(boost::beast::string_view(a.data(), a.size()), boost::beast::string_view(b.data(), b.size()));
}

void run_callbacks(std::vector<std::function<void()>>& cbs, const char* what) {
  for (auto& cb : cbs) {
    try {
      cb();
    } catch (const std::exception& e) {
      http_logger()->warn("{} callback threw: {}", what, e.what());
    } catch (...) {
      http_logger()->warn("{} callback threw a non-std exception", what);
    }
  }
}

std::pair<std::string, std::string> ServerCore::shape_error(const HttpRequest& req, int status,
                                                            const std::string& msg) const {
  if (shaper) {
    try {
      return shaper(req, status, msg);
    } catch (const std::exception& e) {
      http_logger()->warn("error shaper threw ({}); using the default body", e.what());
    } catch (...) {
      http_logger()->warn("error shaper threw; using the default body");
    }
  }
  return default_error_body(status, msg);
}

void ServerCore::listen() {
  const std::string where = opts.host + ":" + std::to_string(opts.port);
  try {
    error_code ec;
    tcp::endpoint ep;
    auto addr = asio::ip::make_address(opts.host, ec);
    if (!ec) {
      ep = tcp::endpoint(addr, opts.port);
    } else {  // a name such as "localhost"
      tcp::resolver resolver(ioc_);
      auto results = resolver.resolve(opts.host, std::to_string(opts.port));
      if (results.empty()) throw std::runtime_error("host not found");
      ep = results.begin()->endpoint();
    }
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    bound_port = acceptor_.local_endpoint().port();
  } catch (const std::exception& e) {
    error_code ignored;
    acceptor_.close(ignored);
    throw std::runtime_error("[http] cannot listen on " + where + ": " + e.what());
  }
  http_logger()->info("listening on {}:{}", opts.host, bound_port.load());
}

void ServerCore::run() {
  if (running_.exchange(true)) throw std::logic_error("[http] run() called twice");
  if (!acceptor_.is_open()) listen();
  signals_.emplace(strand_, SIGINT, SIGTERM);
  signals_->async_wait([this](const error_code& ec, int sig) {
    if (ec) return;
    http_logger()->info("signal {}: stopping", sig);
    request_stop();
  });
  asio::post(strand_, [this] { do_accept(); });
  std::vector<std::thread> extra;
  for (int i = 1; i < opts.io_threads; ++i) extra.emplace_back([this] { run_loop(); });
  run_loop();  // returns when the stop has closed everything and the io_context ran dry
  for (auto& t : extra) t.join();
  http_logger()->info("stopped");
}

void ServerCore::run_loop() {
  for (;;) {
    try {
      ioc_.run();
      return;
    } catch (const std::exception& e) {  // handlers catch their own; this is a last resort
      http_logger()->error("io thread: {}", e.what());
    }
  }
}

void ServerCore::do_accept() {
  if (stopping) return;
  acceptor_.async_accept(asio::make_strand(ioc_), [this](const error_code& ec, auto socket) {
    if (stopping) {
      error_code ignored;
      socket.close(ignored);
      return;
    }
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      // EMFILE and friends: back off instead of spinning.
      http_logger()->warn("accept failed: {}", ec.message());
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([this](const error_code& e) {
        if (!e) do_accept();
      });
      return;
    }
    auto s = std::make_shared<Session>(this, tcp::socket(std::move(socket)));
    session_opened(s);
    asio::post(s->executor(), [s] { s->start(); });
    do_accept();
  });
}

void ServerCore::request_stop() {
  if (stop_requested_.exchange(true)) return;
  asio::post(strand_, [this] { begin_stop(); });
}

void ServerCore::add_stop_callback(std::function<void()> cb) {
  std::lock_guard lock(mu_);
  stop_cbs_.push_back(std::move(cb));
}

void ServerCore::close_listener() {
  error_code ignored;
  acceptor_.close(ignored);
}

void ServerCore::begin_stop() {
  stopping = true;
  error_code ec;
  acceptor_.close(ec);
  retry_timer_.cancel();
  if (signals_) {
    signals_->cancel(ec);
    signals_->clear(ec);  // the default dispositions come back
  }
  http_logger()->info("stopping: {} connection(s) open, grace {} ms", open_sessions_.load(),
                      opts.shutdown_grace.count());
  std::vector<std::function<void()>> cbs;
  {
    std::lock_guard lock(mu_);
    cbs.swap(stop_cbs_);
  }
  run_callbacks(cbs, "on_stop");
  for (auto& s : live_sessions()) asio::post(s->executor(), [s] { s->server_stopping(); });
  if (open_sessions_ == 0) return;
  grace_timer_.expires_after(opts.shutdown_grace);
  grace_timer_.async_wait([this](const error_code& e) {
    if (e) return;  // every connection closed in time
    auto live = live_sessions();
    http_logger()->info("grace period over: closing {} connection(s)", live.size());
    for (auto& s : live) asio::post(s->executor(), [s] { s->force_close(); });
  });
}

void ServerCore::session_opened(const std::shared_ptr<Session>& s) {
  std::lock_guard lock(mu_);
  sessions_[s.get()] = s;
  ++open_sessions_;
}

void ServerCore::session_closed(bool notify) {
  if (open_sessions_.fetch_sub(1) == 1 && notify && stopping) {
    asio::post(strand_, [this] {
      if (open_sessions_ == 0) grace_timer_.cancel();  // lets the io_context run dry
    });
  }
}

void ServerCore::session_gone(Session* s) {
  std::lock_guard lock(mu_);
  sessions_.erase(s);
}

std::vector<std::shared_ptr<Session>> ServerCore::live_sessions() {
  std::vector<std::shared_ptr<Session>> out;
  std::lock_guard lock(mu_);
  for (auto& [p, w] : sessions_)
    if (auto s = w.lock()) out.push_back(std::move(s));
  return out;
}

}  // namespace http_detail

struct HttpServer::Impl {
  std::shared_ptr<http_detail::ServerCore> core;
};

HttpServer::HttpServer(HttpOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->core = std::make_shared<http_detail::ServerCore>(std::move(opts));
}

// The core may outlive this (writers still held by the engine keep it); the port is freed now.
HttpServer::~HttpServer() { impl_->core->close_listener(); }

void HttpServer::route(const std::string& method, const std::string& path, Handler h) {
  impl_->core->routes[path][method] = std::move(h);
}

void HttpServer::set_error_shaper(ErrorShaper s) { impl_->core->shaper = std::move(s); }

void HttpServer::on_stop(std::function<void()> cb) { impl_->core->add_stop_callback(std::move(cb)); }

void HttpServer::listen() { impl_->core->listen(); }

uint16_t HttpServer::port() const { return impl_->core->bound_port; }

void HttpServer::run() { impl_->core->run(); }

void HttpServer::stop() { impl_->core->request_stop(); }

// Runs over the longer length, so the time depends on the lengths only, never on where the
// strings first differ.
bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char acc = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    acc = acc | static_cast<unsigned char>(x ^ y);
  }
  return acc == 0;
}

}  // namespace mlxcpp::server
