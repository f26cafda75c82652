#include "generate/stop_matcher.h"

#include <algorithm>

#include "core/markers.h"

namespace mlxcpp {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopMatcher::Step StopMatcher::push(std::string_view piece) {
  Step out;
  if (stopped_) return out;
  held_.append(piece);
  // The earliest match wins; it can only involve the new piece, since the held text had none.
  size_t first = std::string::npos;
  for (const auto& s : stops_) {
    size_t at = held_.find(s);
    if (at < first) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    out.text = held_.substr(0, first);
    out.stopped = stopped_ = true;
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string. Such a suffix
  // starts with a stop's first byte, so (stops being valid UTF-8) it starts on a character.
  const size_t keep = partial_marker_suffix(held_, stops_);
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace mlxcpp
