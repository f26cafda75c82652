// Hold-back of text that may be the start of a marker (a stop string, <think>, <tool_call>):
// shared by the stop matcher and the output parsers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mlxcpp {

// Length of the longest suffix of `s` that is a proper prefix of `marker` (or of one of
// `markers`): what must be held back because the next piece may complete a marker.
size_t partial_marker_suffix(std::string_view s, std::string_view marker);
size_t partial_marker_suffix(std::string_view s, const std::vector<std::string>& markers);

}  // namespace mlxcpp
