// The HTTP/1.1 front door on Boost.Beast/Asio: keep-alive, whole or chunked (SSE) responses,
// a body limit, header/body/idle timeouts, API-key checks, CORS (preflight included) and a
// graceful stop on SIGINT/SIGTERM. It knows nothing of the protocols: routes are handlers, and
// the errors it answers itself are shaped by a callback the application provides.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlxcpp::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // target without the query
  std::string query;   // after '?', "" when none
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string remote;  // peer address
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// The response side of one request. Thread-safe: any thread may call it (the engine's sink
// does); writes are queued onto the connection's strand. Exactly one of send() or
// start_stream() ... end_stream() is used; later calls are ignored.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  using Headers = std::vector<std::pair<std::string, std::string>>;
  virtual void send(int status, std::string content_type, std::string body, Headers headers = {}) = 0;
  // Chunked transfer (SSE: "text/event-stream", no-cache). Returns false if the client is gone.
  virtual bool start_stream(int status = 200, std::string content_type = "text/event-stream",
                            Headers headers = {}) = 0;
  virtual bool write(std::string chunk) = 0;  // false once the client is gone
  virtual void end_stream() = 0;
  // Called once (on an IO thread) if the client disconnects, or the server stops, before the
  // response ended: the place to cancel the work behind it. Called at once if already closed.
  virtual void on_close(std::function<void()> cb) = 0;
  virtual bool closed() const = 0;
};

using Handler = std::function<void(const HttpRequest&, std::shared_ptr<ResponseWriter>)>;
// The body of an error the server answers itself (401, 404, 405, 408, 413, 400 malformed, 503
// while stopping): returns {content_type, body} for this request (protocols shape errors
// differently by path).
using ErrorShaper =
    std::function<std::pair<std::string, std::string>(const HttpRequest&, int status, const std::string& message)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: an ephemeral port (see HttpServer::port())
  std::string api_key;   // empty: no auth
  std::vector<std::string> open_paths = {"/health"};  // reachable without the key
  std::vector<std::string> allowed_origins;            // CORS; "*" allows any; empty: no CORS headers
  size_t max_body_bytes = 32u << 20;
  std::chrono::milliseconds header_timeout{10000};  // to receive the request line + headers
  std::chrono::milliseconds body_timeout{60000};    // to receive the body
  std::chrono::milliseconds idle_timeout{60000};    // keep-alive wait for the next request
  std::chrono::milliseconds shutdown_grace{5000};   // running streams get this long to end
  int io_threads = 2;
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions opts);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Exact path + method; a path ending in "/*" matches one more segment ("/v1/responses/*"
  // serves "/v1/responses/resp_1"). A path with routes but not this method answers 405.
  void route(const std::string& method, const std::string& path, Handler h);
  void set_error_shaper(ErrorShaper s);
  // Called once when a stop begins (signal or stop()): e.g. cancel queued work, end streams.
  void on_stop(std::function<void()> cb);

  // Binds and listens (throws std::runtime_error naming host:port on failure).
  void listen();
  uint16_t port() const;  // the bound port (after listen)
  // Serves until SIGINT/SIGTERM or stop(): stops accepting, lets running responses end (up to
  // shutdown_grace), then returns.
  void run();
  void stop();  // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Constant-time comparison (API keys).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace mlxcpp::server
