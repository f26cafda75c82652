// Reasoning split: mlx-lm's tokenizer_utils._infer_thinking (markers from the vocabulary) and
// generate.TextStateMachine's "normal" <-> "reasoning" transitions.
#include "chat/output_parsers.h"
#include "chat/parse_util.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {

std::optional<ReasoningFormat> detect_reasoning_format(const Tokenizer& tok) {
  auto has = [&](std::string_view t) { return tok.token_to_id(t).has_value(); };
  // Single-token markers, in mlx-lm's order.
  static const std::pair<const char*, const char*> kSingle[] = {
      {"<think>", "</think>"}, {"<longcat_think>", "</longcat_think>"}, {"<|think:start|>", "<|think:end|>"}};
  for (const auto& [start, end] : kSingle) {
    if (has(start) && has(end)) return ReasoningFormat{start, end};
  }
  // Multi-token markers: Gemma 4's thought channel, XTML's think section.
  if (has("<|channel>") && has("<channel|>")) return ReasoningFormat{"<|channel>thought", "<channel|>"};
  if (has("<|open|>") && has("<|close|>") && has("<|sep|>") && has("<|end_of_msg|>")) {
    return ReasoningFormat{"<|open|>think<|sep|>", "<|close|>think<|sep|>"};
  }
  return std::nullopt;
}

bool prompt_opens_reasoning(const std::string& rendered_prompt, const ReasoningFormat& fmt) {
  size_t start = rendered_prompt.rfind(fmt.start);
  if (start == std::string::npos) return false;
  size_t end = rendered_prompt.rfind(fmt.end);
  return end == std::string::npos || start > end;
}

ReasoningParser::ReasoningParser(ReasoningFormat fmt, bool starts_inside)
    : fmt_(std::move(fmt)), inside_(starts_inside) {}

void ReasoningParser::emit(Out& out, std::string_view text) const {
  (inside_ ? out.reasoning : out.content) += text;
}

ReasoningParser::Out ReasoningParser::push(std::string_view text) {
  Out out;
  std::string buf = held_;
  buf += text;
  // Only whole UTF-8 characters are split; markers are ASCII-delimited, so every cut below
  // lands on a character boundary.
  size_t whole = parse::complete_utf8_prefix(buf);
  std::string tail = buf.substr(whole);
  buf.resize(whole);
  size_t pos = 0;
  while (true) {
    const std::string& marker = inside_ ? fmt_.end : fmt_.start;
    size_t at = marker.empty() ? std::string::npos : buf.find(marker, pos);
    if (at == std::string::npos) break;
    emit(out, std::string_view(buf).substr(pos, at - pos));
    pos = at + marker.size();
    inside_ = !inside_;
  }
  std::string_view rest = std::string_view(buf).substr(pos);
  size_t keep = parse::partial_marker_suffix(rest, inside_ ? fmt_.end : fmt_.start);
  emit(out, rest.substr(0, rest.size() - keep));
  held_ = std::string(rest.substr(rest.size() - keep)) + tail;
  return out;
}

ReasoningParser::Out ReasoningParser::flush() {
  Out out;
  emit(out, held_);
  held_.clear();
  return out;
}

}  // namespace mlxcpp
