// Stop strings over streamed text, as vLLM and mlx-lm's server apply them: the output ends right
// before the first occurrence of any stop string, which is not emitted. Text that could be the
// start of a stop string is held back until the next piece settles it, so a match that spans
// token boundaries is never half-printed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mlxcpp {

class StopMatcher {
 public:
  // Empty stop strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops = {});

  struct Step {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found; `text` ends right before it
  };

  // Feeds the next piece of decoded text. After a stop, further pieces yield nothing.
  Step push(std::string_view piece);
  // The end of the stream: releases the held-back text (nothing after a stop).
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched ("" before a stop).
  const std::string& matched() const { return matched_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace mlxcpp
