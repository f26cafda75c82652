#include "server/http/response_writer.h"

#include "server/http/http_core.h"
#include "server/http/http_session.h"

namespace mlxcpp::server::http_detail {

ResponseWriterImpl::ResponseWriterImpl(std::shared_ptr<ServerCore> core, std::shared_ptr<Session> session,
                                       uint64_t seq)
    : core_(std::move(core)), session_(std::move(session)), seq_(seq) {}

ResponseWriterImpl::~ResponseWriterImpl() {
  // A handler that dropped its writer without answering would leave the client waiting forever:
  // answer 500 (nothing sent) or end the stream it forgot to end.
  bool pending;
  {
    std::lock_guard lock(mu_);
    pending = !closed_ && !finished_ && (state_ == State::Fresh || state_ == State::Streaming);
  }
  if (pending) post([s = session_, seq = seq_] { s->writer_dropped(seq); });
}

template <class F>
void ResponseWriterImpl::post(F&& f) {
  asio::post(session_->executor(), std::forward<F>(f));
}

void ResponseWriterImpl::send(int status, std::string content_type, std::string body, Headers headers) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || finished_ || state_ != State::Fresh) return;
    state_ = State::Sent;
  }
  post([s = session_, seq = seq_, status, ct = std::move(content_type), b = std::move(body),
        h = std::move(headers)]() mutable { s->send_whole(seq, status, ct, std::move(b), h); });
}

bool ResponseWriterImpl::start_stream(int status, std::string content_type, Headers headers) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || finished_ || state_ != State::Fresh) return false;
    state_ = State::Streaming;
  }
  post([s = session_, seq = seq_, status, ct = std::move(content_type), h = std::move(headers)] {
    s->stream_head(seq, status, ct, h);
  });
  return true;
}

bool ResponseWriterImpl::write(std::string chunk) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || finished_ || state_ != State::Streaming) return false;
  }
  if (chunk.empty()) return true;  // an empty chunk would read as the end of the stream
  post([s = session_, seq = seq_, c = std::move(chunk)]() mutable { s->stream_chunk(seq, std::move(c)); });
  return true;
}

void ResponseWriterImpl::end_stream() {
  {
    std::lock_guard lock(mu_);
    if (closed_ || finished_ || state_ != State::Streaming) return;
    state_ = State::Ended;
  }
  post([s = session_, seq = seq_] { s->stream_end(seq); });
}

void ResponseWriterImpl::on_close(std::function<void()> cb) {
  if (!cb) return;
  {
    std::lock_guard lock(mu_);
    if (finished_) return;  // ended normally: nothing left to cancel
    if (!closed_) {
      on_close_.push_back(std::move(cb));
      return;
    }
  }
  cb();
}

bool ResponseWriterImpl::closed() const {
  std::lock_guard lock(mu_);
  return closed_ || finished_;
}

void ResponseWriterImpl::notify_closed() {
  std::vector<std::function<void()>> cbs;
  {
    std::lock_guard lock(mu_);
    if (closed_ || finished_) return;
    closed_ = true;
    cbs.swap(on_close_);
  }
  run_callbacks(cbs, "on_close");
}

void ResponseWriterImpl::mark_finished() {
  std::lock_guard lock(mu_);
  finished_ = true;
  on_close_.clear();
}

void ResponseWriterImpl::fail(const HttpRequest& req, const std::string& message) {
  State was;
  {
    std::lock_guard lock(mu_);
    if (closed_ || finished_) return;
    was = state_;
    if (was == State::Fresh) state_ = State::Sent;
    if (was == State::Streaming) state_ = State::Ended;
  }
  if (was == State::Fresh) {
    auto [ct, body] = core_->shape_error(req, 500, message);
    post([s = session_, seq = seq_, ct = std::move(ct), b = std::move(body)]() mutable {
      s->send_whole(seq, 500, ct, std::move(b), {});
    });
  } else if (was == State::Streaming) {
    post([s = session_, seq = seq_] { s->abort_response(seq, "handler failed mid-stream"); });
  }
}

}  // namespace mlxcpp::server::http_detail
