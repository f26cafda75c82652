#include "server/server_context.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/api_error.h"

namespace mlxcpp::server {

void RequestCounters::add(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  ++counts_[{endpoint, status}];
}

void RequestCounters::render(std::string& out) const {
  std::lock_guard lock(mu_);
  out += "# HELP mlxcpp_http_requests_total HTTP requests by endpoint and status\n";
  out += "# TYPE mlxcpp_http_requests_total counter\n";
  for (const auto& [key, n] : counts_) {
    out += fmt::format("mlxcpp_http_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  }
}

namespace {

// Records the status of whatever the route answers.
class CountingWriter final : public ResponseWriter {
 public:
  CountingWriter(std::shared_ptr<ResponseWriter> inner, RequestCounters& counters, std::string endpoint)
      : inner_(std::move(inner)), counters_(counters), endpoint_(std::move(endpoint)) {}
  void send(int status, std::string content_type, std::string body, Headers headers) override {
    count(status);
    inner_->send(status, std::move(content_type), std::move(body), std::move(headers));
  }
  bool start_stream(int status, std::string content_type, Headers headers) override {
    count(status);
    return inner_->start_stream(status, std::move(content_type), std::move(headers));
  }
  bool write(std::string chunk) override { return inner_->write(std::move(chunk)); }
  void end_stream() override { inner_->end_stream(); }
  void on_close(std::function<void()> cb) override { inner_->on_close(std::move(cb)); }
  bool closed() const override { return inner_->closed(); }
  // A status went out (a whole response or a stream's head).
  bool started() const { return counted_; }

 private:
  void count(int status) {
    if (!counted_.exchange(true)) counters_.add(endpoint_, status);
  }
  std::shared_ptr<ResponseWriter> inner_;
  RequestCounters& counters_;
  std::string endpoint_;
  std::atomic<bool> counted_{false};
};

}  // namespace

void add_route(HttpServer& http, ServerContext& ctx, const std::string& method, const std::string& path,
               const std::string& endpoint, RouteHandler h) {
  http.route(method, path, [&ctx, endpoint, h = std::move(h)](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    auto counted = std::make_shared<CountingWriter>(std::move(w), ctx.counters, endpoint);
    try {
      h(ctx, req, counted);
    } catch (const std::exception& e) {
      if (counted->started()) {
        // Too late for an error response: the status went out. End what was started.
        spdlog::error("{} {} (response already started): {}", req.method, req.path, e.what());
        counted->end_stream();
        return;
      }
      ApiError err = api_error_from(e);
      if (err.status >= 500) spdlog::error("{} {}: {}", req.method, req.path, e.what());
      send_error(*counted, protocol_for_path(req.path), err);
    }
  });
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string make_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

}  // namespace mlxcpp::server
