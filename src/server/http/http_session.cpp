#include "server/http/http_session.h"

#include <cctype>

#include "server/http/http_dispatch.h"
#include "server/http/response_writer.h"

namespace mlxcpp::server::http_detail {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using error_code = boost::system::error_code;

namespace {

constexpr uint32_t kHeaderLimit = 32 * 1024;
constexpr size_t kPipelineCap = 1 << 20;  // bytes of a next request kept while answering
constexpr size_t kReadChunk = 16 * 1024;
constexpr std::chrono::milliseconds kErrorWriteTimeout{5000};
constexpr std::chrono::milliseconds kLinger{1000};

bool is_parse_error(const error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

HttpRequest meta_from(const bhttp::request_header<>& h, const std::string& remote) {
  HttpRequest r;
  r.method = std::string(h.method_string());
  std::string target(h.target());
  auto q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) r.query = target.substr(q + 1);
  for (const auto& f : h) {
    auto [it, fresh] = r.headers.emplace(lower(std::string(f.name_string())), std::string(f.value()));
    if (!fresh) it->second += ", " + std::string(f.value());
  }
  r.remote = remote;
  return r;
}

}  // namespace

Session::Session(ServerCore* core, tcp::socket socket)
    : core_(core), socket_(std::move(socket)), timer_(socket_.get_executor()) {
  error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  socket_.set_option(tcp::no_delay(true), ec);
}

Session::~Session() {
  if (phase_ != Phase::Closed) core_->session_closed(/*notify=*/false);
  core_->session_gone(this);
}

void Session::start() {
  if (core_->stopping) return close_now(nullptr);
  start_header_read();  // a fresh connection gets header_timeout from now
}

void Session::server_stopping() {
  if (phase_ == Phase::Responding) {
    keep_alive_ = false;  // close once this response is out
  } else if (phase_ != Phase::Closing) {
    close_now(nullptr);
  }
}

void Session::force_close() { close_now("server stopped"); }

void Session::start_header_read() {
  phase_ = Phase::Header;
  timed_out_ = false;
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(core_->opts.max_body_bytes);
  arm(Deadline::Header, core_->opts.header_timeout);
  bhttp::async_read_header(socket_, buffer_, *parser_,
                           [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Session::on_header(error_code ec) {
  if (phase_ == Phase::Closed) return;
  if (timed_out_) return fail_request(408, "timed out waiting for the request headers");
  if (ec == bhttp::error::header_limit) return fail_request(431, "request headers are too large");
  // Beast checks a declared Content-Length against the body limit as soon as the header is in.
  if (ec == bhttp::error::body_limit) return fail_request(413, too_large_message());
  if (ec) {
    if (is_parse_error(ec)) return fail_request(400, "malformed HTTP request: " + ec.message());
    return close_now(nullptr);  // the client went away
  }
  if (parser_->is_done()) return on_request();
  if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
    enqueue({"HTTP/1.1 100 Continue\r\n\r\n", {}, {}, false});
  }
  phase_ = Phase::Body;
  arm(Deadline::Body, core_->opts.body_timeout);
  bhttp::async_read(socket_, buffer_, *parser_,
                    [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
}

void Session::on_body(error_code ec) {
  if (phase_ == Phase::Closed) return;
  if (timed_out_) return fail_request(408, "timed out waiting for the request body");
  if (ec == bhttp::error::body_limit) return fail_request(413, too_large_message());
  if (ec) {
    if (is_parse_error(ec)) return fail_request(400, "malformed HTTP request body: " + ec.message());
    return close_now(nullptr);
  }
  on_request();
}

std::string Session::too_large_message() const {
  std::string declared;  // the field, not content_length(): that needs a finished header
  if (parser_) {
    auto cl = parser_->get()[bhttp::field::content_length];
    if (!cl.empty()) declared = " of " + std::string(cl) + " bytes";
  }
  return "request body" + declared + " exceeds the limit of " + std::to_string(core_->opts.max_body_bytes) + " bytes";
}

CorsDecision Session::begin_response(HttpRequest meta) {
  meta_ = std::move(meta);
  ++seq_;
  writer_.reset();
  CorsDecision cors = cors_decide(core_->opts.allowed_origins, meta_.header("origin"));
  cors_ = cors_response_headers(cors);
  started_ = stream_open_ = false;
  status_ = 0;
  body_bytes_ = 0;
  t0_ = std::chrono::steady_clock::now();
  phase_ = Phase::Responding;
  return cors;
}

void Session::on_request() {
  disarm();
  auto msg = parser_->release();
  parser_.reset();
  request_complete_ = true;
  keep_alive_ = msg.keep_alive();
  version_ = msg.version();
  HttpRequest req = meta_from(msg, remote_);
  const CorsDecision cors = begin_response(req);
  req.body = std::move(msg.body());
  start_watch();  // from now on, a hang-up is noticed while the handler works
  auto w = std::make_shared<ResponseWriterImpl>(core_->shared_from_this(), shared_from_this(), seq_);
  writer_ = w;
  dispatch_request(*core_, req, w, cors);
}

// A request that cannot be served as read: answer the shaped error, then close the connection
// (what follows on the wire is unparsed, so it cannot be trusted as the next request).
void Session::fail_request(int status, const std::string& message) {
  disarm();
  HttpRequest meta;
  meta.remote = remote_;
  version_ = 11;
  // A declared Content-Length over the limit fails before the parser calls the header done, but
  // the request line is in: the path still picks the protocol's error shape.
  if (parser_ && (parser_->is_header_done() || !parser_->get().target().empty())) {
    meta = meta_from(parser_->get(), remote_);
    version_ = parser_->get().version();
  }
  keep_alive_ = false;
  request_complete_ = false;
  begin_response(std::move(meta));
  auto [ct, body] = core_->shape_error(meta_, status, message);
  arm(Deadline::Write, kErrorWriteTimeout);
  send_whole(seq_, status, ct, std::move(body), {});
}

void Session::finish_response() {
  log_request(nullptr);
  if (auto w = writer_.lock()) w->mark_finished();
  writer_.reset();
  if (!keep_alive_ || core_->stopping) return linger_close();
  phase_ = Phase::Idle;
  if (buffer_.size() > 0) {
    // A pipelined request is already buffered. A running watch read is cut short (no bytes are
    // lost: a cancelled read_some consumes nothing) and starts it; otherwise start it now.
    if (!watching_) return start_header_read();
    error_code ec;
    socket_.cancel(ec);
    return;
  }
  arm(Deadline::Idle, core_->opts.idle_timeout);
  start_watch();  // no-op while the watch read runs: it completes when the next request starts
}

void Session::start_watch() {
  if (watching_ || phase_ == Phase::Closed || buffer_.size() >= kPipelineCap) return;
  watching_ = true;
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](error_code ec, size_t n) { self->on_watch(ec, n); });
}

void Session::on_watch(error_code ec, size_t n) {
  watching_ = false;
  if (phase_ == Phase::Closed) return;
  if (!ec) buffer_.commit(n);
  switch (phase_) {
    case Phase::Responding:
      if (ec && ec != asio::error::operation_aborted) return close_now("client disconnected");
      return start_watch();
    case Phase::Idle:
      if (buffer_.size() > 0) return start_header_read();
      if (ec && ec != asio::error::operation_aborted) return close_now(nullptr);
      return start_watch();
    case Phase::Closing:  // draining what the client still sends, until it closes too
      if (ec) return close_now(nullptr);
      buffer_.clear();
      return start_watch();
    default:
      return;
  }
}

void Session::arm(Deadline kind, std::chrono::milliseconds d) {
  ++timer_gen_;
  timer_.expires_after(d);
  timer_.async_wait([self = shared_from_this(), gen = timer_gen_, kind](error_code ec) {
    if (ec || gen != self->timer_gen_ || self->phase_ == Phase::Closed) return;
    self->on_deadline(kind);
  });
}

void Session::disarm() {
  ++timer_gen_;
  timer_.cancel();
}

void Session::on_deadline(Deadline kind) {
  switch (kind) {
    case Deadline::Header:
    case Deadline::Body: {
      // The pending read completes with operation_aborted and answers 408.
      timed_out_ = true;
      error_code ec;
      socket_.cancel(ec);
      return;
    }
    case Deadline::Write:
      return close_now("timed out writing the response");
    case Deadline::Idle:
    case Deadline::Linger:
      return close_now(nullptr);
  }
}

// Half-close, then drain briefly: closing with unread request bytes makes the kernel send a RST,
// which can destroy the response still in flight to the client (a 413 after a large upload).
void Session::linger_close() {
  phase_ = Phase::Closing;
  error_code ec;
  // Nothing unread (the request was read whole, nothing followed): a plain close sends a FIN.
  if (request_complete_ && buffer_.size() == 0 && socket_.available(ec) == 0 && !ec) return close_now(nullptr);
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  arm(Deadline::Linger, kLinger);
  if (!watching_) {
    buffer_.clear();
    start_watch();
  }
}

void Session::close_now(const char* why) {
  if (phase_ == Phase::Closed) return;
  const bool answering = phase_ == Phase::Responding;
  phase_ = Phase::Closed;
  disarm();
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (!writing_) {
    out_.clear();
    queued_bytes_ = 0;
  }
  core_->session_closed(/*notify=*/true);
  if (answering) {
    log_request(why ? why : "connection closed");
    if (auto w = writer_.lock()) w->notify_closed();
  }
  writer_.reset();
}

void Session::log_request(const char* note) {
  auto log = http_logger();
  if (!log->should_log(spdlog::level::debug)) return;
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0_).count();
  if (note) {
    log->debug("{} {} {} {}B {}ms ({}) {}", meta_.method, meta_.path, status_, body_bytes_, ms, note, remote_);
  } else {
    log->debug("{} {} {} {}B {}ms {}", meta_.method, meta_.path, status_, body_bytes_, ms, remote_);
  }
}

}  // namespace mlxcpp::server::http_detail
