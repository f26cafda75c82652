// How a served model's generated text is parsed: its tool-call format and reasoning markers, from
// the family record's declared chat markers when the vocabulary holds them, else as the chat
// template and vocabulary teach (mlx-lm's _infer_tool_parser / _infer_thinking).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/output_parsers.h"
#include "models/registry.h"

namespace mlxcpp::sched {

struct ChatFormats {
  std::optional<ReasoningFormat> reasoning;
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  std::vector<std::string> missing_markers;  // the family's declared tokens this vocabulary lacks
};

// `tool_call_format`: --tool-call-format ("auto", "none" or a format name; ConfigError naming an
// unknown one). Without a chat template there is neither reasoning nor a call format to infer.
ChatFormats choose_chat_formats(const FamilyRecord* family, const Tokenizer& tok, const std::string& template_source,
                                const std::string& tool_call_format);

}  // namespace mlxcpp::sched
