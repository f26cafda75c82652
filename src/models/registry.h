// The one list of model families: model_type -> loader. Everything else derives from it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model.h"
#include "nn/load_context.h"

namespace mlxcpp {

using FamilyLoader = std::unique_ptr<Model> (*)(const Checkpoint&, const LoadContext&);

// The chat markers a family's own tokenizers define (its chat template's turn, tool and thinking
// tokens). When a checkpoint's vocabulary holds every one of `tokens`, the server parses tool calls
// and reasoning with these; otherwise (a checkpoint with another tokenizer) as its own chat
// template and vocabulary teach, which is what mlx-lm infers either way for the family's own.
struct ChatMarkers {
  std::string tool_call_format;                // a ToolCallFormat name ("gemma4")
  std::string reasoning_start, reasoning_end;  // what opens and closes reasoning in generated text
  std::vector<std::string> tokens;             // the special tokens the chat format is made of
};

struct FamilyRecord {
  std::string model_type;  // config.json's model_type
  std::string family;      // the file in src/models/ that implements it
  FamilyLoader load;
  std::optional<ChatMarkers> chat = std::nullopt;  // none: the chat format varies by checkpoint
};

const std::vector<FamilyRecord>& families();
const FamilyRecord* find_family(const std::string& model_type);

// One line per family file for `mlxcpp ls --families`: its name, the model_types it accepts
// (from families()) and what it runs.
struct FamilySummary {
  std::string family;
  std::vector<std::string> model_types;
  std::string capabilities;
};
std::vector<FamilySummary> family_summaries();

// Family entry points (one per family file).
std::unique_ptr<Model> load_llama(const Checkpoint& ckpt, const LoadContext& ctx);
std::unique_ptr<Model> load_gemma3(const Checkpoint& ckpt, const LoadContext& ctx);
std::unique_ptr<Model> load_qwen3_5(const Checkpoint& ckpt, const LoadContext& ctx);
std::unique_ptr<Model> load_gemma4(const Checkpoint& ckpt, const LoadContext& ctx);

}  // namespace mlxcpp
