#include "scheduler/chat_formats.h"

#include <fmt/format.h>

#include "core/errors.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::sched {

ChatFormats choose_chat_formats(const FamilyRecord* family, const Tokenizer& tok, const std::string& template_source,
                                const std::string& tool_call_format) {
  ChatFormats f;
  const bool chat = !template_source.empty();
  if (chat) f.reasoning = detect_reasoning_format(tok);
  bool declared = false;
  if (chat && family != nullptr && family->chat) {
    for (const auto& t : family->chat->tokens) {
      if (!tok.token_to_id(t)) f.missing_markers.push_back(t);
    }
    declared = f.missing_markers.empty();
    if (declared) f.reasoning = ReasoningFormat{family->chat->reasoning_start, family->chat->reasoning_end};
  }
  if (tool_call_format == "auto") {
    auto fmt = declared ? tool_call_format_from_string(family->chat->tool_call_format) : std::nullopt;
    f.tool_format = fmt ? *fmt : chat ? detect_tool_call_format(tok, template_source) : ToolCallFormat::kNone;
  } else {
    auto fmt = tool_call_format_from_string(tool_call_format);
    if (!fmt) throw ConfigError(fmt::format("--tool-call-format: unknown format '{}'", tool_call_format));
    f.tool_format = *fmt;
  }
  return f;
}

}  // namespace mlxcpp::sched
