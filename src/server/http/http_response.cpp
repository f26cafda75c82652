// The write side of a Session: serializing responses (whole, chunked, or raw for HTTP/1.0
// streams) and the one write queue.
#include <cctype>
#include <cstdio>

#include "server/http/http_session.h"

namespace mlxcpp::server::http_detail {

namespace bhttp = boost::beast::http;
using error_code = boost::system::error_code;

namespace {

// A client that stops reading must not make the server buffer a whole generation.
constexpr size_t kMaxQueuedBytes = 64u << 20;

bool has_header(const ResponseWriter::Headers& hs, std::string_view name) {
  for (const auto& [k, v] : hs)
    if (iequals(k, name)) return true;
  return false;
}

// Framing is the server's: a handler's own framing headers would contradict it.
bool reserved(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") || iequals(name, "connection");
}

// CR/LF are dropped so a value cannot inject headers.
void add_header(std::string& out, std::string_view name, std::string_view value) {
  for (char c : name)
    if (c != '\r' && c != '\n') out += c;
  out += ": ";
  for (char c : value)
    if (c != '\r' && c != '\n') out += c;
  out += "\r\n";
}

}  // namespace

bool Session::current(uint64_t seq) const { return seq == seq_ && phase_ == Phase::Responding; }

std::string Session::head_bytes(int status, const std::string& ctype, const Headers& hs,
                                std::optional<size_t> length, bool chunked) {
  std::string h;
  h.reserve(256);
  auto reason = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  h += "HTTP/1.1 " + std::to_string(status) + " ";
  h.append(reason.data(), reason.size());
  h += "\r\n";
  if (!ctype.empty()) add_header(h, "Content-Type", ctype);
  if (length) add_header(h, "Content-Length", std::to_string(*length));
  if (chunked) add_header(h, "Transfer-Encoding", "chunked");
  add_header(h, "Connection", keep_alive_ ? "keep-alive" : "close");
  for (const auto& [k, v] : cors_) add_header(h, k, v);
  for (const auto& [k, v] : hs)
    if (!reserved(k)) add_header(h, k, v);
  h += "\r\n";
  return h;
}

void Session::send_whole(uint64_t seq, int status, const std::string& ctype, std::string body, const Headers& hs) {
  if (!current(seq) || started_) return;
  started_ = true;
  status_ = status;
  if (core_->stopping) keep_alive_ = false;
  const bool bodiless = status < 200 || status == 204 || status == 304;
  std::optional<size_t> length;
  if (!bodiless) length = body.size();
  if (bodiless || meta_.method == "HEAD") body.clear();
  body_bytes_ = body.size();
  enqueue({head_bytes(status, bodiless ? "" : ctype, hs, length, false), std::move(body), {}, true});
}

void Session::stream_head(uint64_t seq, int status, const std::string& ctype, const Headers& hs) {
  if (!current(seq) || started_) return;
  started_ = stream_open_ = true;
  status_ = status;
  if (core_->stopping) keep_alive_ = false;
  if (!chunked()) keep_alive_ = false;  // HTTP/1.0: the body ends when the connection does
  Headers all = hs;
  if (ctype.rfind("text/event-stream", 0) == 0) {
    // Proxies (nginx) must pass events through as they come.
    if (!has_header(hs, "cache-control")) all.emplace_back("Cache-Control", "no-cache");
    if (!has_header(hs, "x-accel-buffering")) all.emplace_back("X-Accel-Buffering", "no");
  }
  enqueue({head_bytes(status, ctype, all, std::nullopt, chunked()), {}, {}, false});
}

void Session::stream_chunk(uint64_t seq, std::string data) {
  if (!current(seq) || !stream_open_ || data.empty()) return;
  body_bytes_ += data.size();
  if (!chunked()) return enqueue({{}, std::move(data), {}, false});
  char size_line[24];
  std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
  enqueue({size_line, std::move(data), "\r\n", false});
}

void Session::stream_end(uint64_t seq) {
  if (!current(seq) || !stream_open_) return;
  stream_open_ = false;
  enqueue({chunked() ? "0\r\n\r\n" : "", {}, {}, true});
}

void Session::writer_dropped(uint64_t seq) {
  if (!current(seq)) return;
  if (!started_) {
    http_logger()->warn("{} {}: the handler dropped its writer without answering", meta_.method, meta_.path);
    auto [ct, body] = core_->shape_error(meta_, 500, "the handler returned without a response");
    return send_whole(seq, 500, ct, std::move(body), {});
  }
  if (stream_open_) {
    http_logger()->warn("{} {}: the handler dropped its writer without ending the stream", meta_.method,
                        meta_.path);
    stream_end(seq);
  }
}

void Session::abort_response(uint64_t seq, const char* why) {
  if (current(seq)) close_now(why);
}

void Session::enqueue(Out o) {
  if (phase_ == Phase::Closed) return;
  queued_bytes_ += o.head.size() + o.body.size() + o.tail.size();
  if (queued_bytes_ > kMaxQueuedBytes) return close_now("client too slow: write queue over its limit");
  out_.push_back(std::move(o));
  if (!writing_) write_next();
}

void Session::write_next() {
  writing_ = true;
  const Out& o = out_.front();  // deque: stays put while later items are pushed
  std::array<asio::const_buffer, 3> bufs{asio::buffer(o.head), asio::buffer(o.body),
                                         asio::buffer(o.tail.data(), o.tail.size())};
  asio::async_write(socket_, bufs, [self = shared_from_this()](error_code ec, size_t) {
    self->writing_ = false;
    if (self->phase_ == Phase::Closed) {
      self->out_.clear();
      self->queued_bytes_ = 0;
      return;
    }
    if (ec) return self->close_now("write failed");
    Out done = std::move(self->out_.front());
    self->out_.pop_front();
    self->queued_bytes_ -= done.head.size() + done.body.size() + done.tail.size();
    if (done.last) self->finish_response();
    if (!self->out_.empty() && !self->writing_ && self->phase_ != Phase::Closed) self->write_next();
  });
}

}  // namespace mlxcpp::server::http_detail
