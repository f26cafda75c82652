#include "chat/tool_call_base.h"

#include <utility>

#include "chat/parse_util.h"

namespace mlxcpp::detail {

using parse::npos;

void CallSink::begin_call(const std::string& name) {
  if (open_) end_call();
  int index = static_cast<int>(done_.size());
  current_ = ToolCall{};
  current_.id = "call_" + id_prefix_ + "_" + std::to_string(index);
  current_.name = name;
  current_args_.clear();
  open_ = true;
  out_.calls.push_back(ToolCallDelta{index, current_.id, name, ""});
}

void CallSink::args(std::string_view fragment) {
  if (!open_ || fragment.empty()) return;
  current_args_ += fragment;
  int index = static_cast<int>(done_.size());
  if (!out_.calls.empty() && out_.calls.back().index == index) {
    out_.calls.back().arguments += fragment;
  } else {
    out_.calls.push_back(ToolCallDelta{index, "", "", std::string(fragment)});
  }
}

void CallSink::end_call() {
  if (!open_) return;
  current_.arguments = OrderedJson(current_args_);
  done_.push_back(std::move(current_));
  open_ = false;
}

ToolCallParser::Out CallSink::take() {
  ToolCallParser::Out out = std::move(out_);
  out_ = {};
  return out;
}

ToolCallParser::Out StreamingParser::push(std::string_view text) {
  if (flushed_) return {};
  utf8_tail_ += text;
  size_t whole = parse::complete_utf8_prefix(utf8_tail_);
  if (whole > 0) {
    std::string chunk = utf8_tail_.substr(0, whole);
    utf8_tail_.erase(0, whole);
    feed(chunk);
  }
  return sink_.take();
}

ToolCallParser::Out StreamingParser::flush() {
  if (flushed_) return {};
  flushed_ = true;
  if (!utf8_tail_.empty()) feed(std::exchange(utf8_tail_, {}));
  finish();
  return sink_.take();
}

void Body::feed(std::string_view text) {
  if (text.empty()) return;
  raw_ += text;
  if (passthrough_) {
    sink_.content(text);
  } else {
    on_feed(text);
  }
}

void Body::finish(bool closed) {
  if (!passthrough_) on_finish();
  if (calls_ == 0) {
    if (!passthrough_) sink_.content(open_ + raw_);
    if (closed) sink_.content(close_);
  }
  passthrough_ = true;
}

void Body::begin_call(const std::string& name) {
  ++calls_;
  sink_.begin_call(name);
}

void Body::junk_from(size_t from) {
  if (passthrough_) return;
  passthrough_ = true;
  if (calls_ == 0) {
    sink_.content(open_ + raw_);
  } else if (from < raw_.size()) {
    sink_.content(std::string_view(raw_).substr(from));
  }
}

void RegionParser::open_region(const std::string& marker) {
  body_ = spec_.body(sink_, marker, spec_.close);
}

void RegionParser::feed(std::string_view text) {
  buf_ += text;
  while (true) {
    if (!body_) {
      if (at_start_ && spec_.bare_json_at_start) {
        size_t p = parse::skip_ws(buf_, 0);
        if (p == buf_.size()) return;  // only whitespace so far
        at_start_ = false;
        if (buf_[p] == '{') {
          sink_.content(std::string_view(buf_).substr(0, p));
          buf_.erase(0, p);
          open_region("");
          continue;
        }
      }
      at_start_ = false;
      auto [at, which] = parse::find_first_marker(buf_, spec_.open);
      if (at != npos) {
        sink_.content(std::string_view(buf_).substr(0, at));
        std::string marker = spec_.open[which];
        buf_.erase(0, at + marker.size());
        open_region(marker);
        continue;
      }
      size_t keep = parse::partial_marker_suffix(buf_, spec_.open);
      sink_.content(std::string_view(buf_).substr(0, buf_.size() - keep));
      buf_.erase(0, buf_.size() - keep);
      return;
    }
    if (spec_.close.empty()) {
      body_->feed(buf_);
      buf_.clear();
      return;
    }
    size_t at = buf_.find(spec_.close);
    if (at != npos) {
      body_->feed(std::string_view(buf_).substr(0, at));
      buf_.erase(0, at + spec_.close.size());
      body_->finish(true);
      body_.reset();
      continue;
    }
    size_t keep = parse::partial_marker_suffix(buf_, spec_.close);
    body_->feed(std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return;
  }
}

void RegionParser::finish() {
  if (body_) {
    body_->feed(buf_);
    body_->finish(false);
    body_.reset();
  } else {
    sink_.content(buf_);
  }
  buf_.clear();
}

void RawArgs::update(CallSink& sink, std::string_view text, size_t begin, size_t end) {
  if (done_ || begin == npos || begin >= text.size()) return;
  char c = text[begin];
  if (c == '{' || c == '[') {
    size_t upto = end == npos ? text.size() : end;
    if (begin + sent_ < upto) {
      sink.args(text.substr(begin + sent_, upto - begin - sent_));
      sent_ = upto - begin;
    }
    done_ = end != npos;
    return;
  }
  if (end == npos) return;  // strings and primitives go whole
  std::string_view value = text.substr(begin, end - begin);
  done_ = true;
  if (c == '"') {
    // Some templates teach the arguments as a JSON string: send the JSON it holds.
    auto s = parse::try_parse_json(value);
    if (s && s->is_string()) {
      std::string inner = s->get<std::string>();
      if (parse::try_parse_json(inner)) {
        sink.args(inner);
        return;
      }
    }
  }
  sink.args(value);
}

void RawArgs::finish(CallSink& sink, std::string_view text, size_t begin) {
  if (done_ || begin == npos || begin >= text.size()) return;
  update(sink, text, begin, npos);
  if (!done_ && text[begin] != '{' && text[begin] != '[') sink.args(text.substr(begin));
  done_ = true;
}

}  // namespace mlxcpp::detail
