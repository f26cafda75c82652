// A model as the server holds it: the weights, its tokenizer and chat template, eos ids, the
// output formats its template teaches, and the sizes admission needs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/output_parsers.h"
#include "models/model.h"
#include "tokenizer/grammar.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::sched {

struct ServeModelOptions {
  std::string id;                        // the name clients use ("" = the folder's name)
  std::string chat_template_file;        // overrides the tokenizer's template ("" = none)
  std::string tool_call_format = "auto"; // auto (from the template), none, or a format name
  OrderedJson template_kwargs = OrderedJson::object();  // default chat-template variables
};

struct ServedModel {
  std::string id;
  LoadedModel loaded;
  Tokenizer tokenizer;
  // mlx-lm's detokenizer class for this tokenizer, found once (it reads tokenizer.json).
  StreamingDetokenizer::Kind detokenizer = StreamingDetokenizer::Kind::kNaive;
  std::string template_source;             // "" when the model has no chat template
  std::optional<ChatTemplate> chat_template;
  OrderedJson default_template_kwargs = OrderedJson::object();
  std::vector<int64_t> eos_ids;
  std::vector<int> xtc_special;
  std::optional<ReasoningFormat> reasoning;
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  int context_length = 0;        // max_position_embeddings (0: unknown)
  int64_t kv_bytes_per_token = 0;  // all layers, as the cache stores them
  int64_t weight_bytes = 0;
  int64_t created = 0;           // unix time of the load (OpenAI's "created")
  // Structured output: grammars compiled against this model's tokens (the token environment is
  // built on the first structured request).
  std::shared_ptr<LazyGrammarCache> grammars;

  const Model& model() const { return *loaded.model; }
};

// Loads weights and tokenizer; runs one token through the model to warm it up and to measure
// the KV cache's bytes per token. Errors name the file.
ServedModel load_served_model(const std::filesystem::path& dir, const ModelOptions& mopts,
                              const ServeModelOptions& sopts);

}  // namespace mlxcpp::sched
