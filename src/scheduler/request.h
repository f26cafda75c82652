// The one internal request and event model every protocol translates to and from. A request
// holds the prompt as token ids (templates are rendered before submission) and everything that
// shapes its output; the engine answers with a stream of events, per choice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parsers.h"
#include "generate/embedder.h"
#include "generate/logits_processors.h"
#include "generate/sampler.h"
#include "tokenizer/grammar.h"

namespace mlxcpp::sched {

using RequestId = uint64_t;

// How the generated text is split into content, reasoning and tool calls.
struct OutputOptions {
  std::vector<std::string> stops;    // stop strings (never emitted)
  std::optional<ReasoningFormat> reasoning;   // split reasoning when set
  bool starts_in_reasoning = false;           // the generation prompt already opened it
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  std::string forced_prefix;                  // generated-side text fed to the parsers first
  std::vector<nlohmann::ordered_json> tools;  // function schemas (to check arguments against)
  int top_logprobs = -1;                      // -1: no logprobs; 0: the chosen token's only
};

struct Request {
  std::vector<int> prompt;  // token ids, non-empty
  SamplerParams sampling;
  LogitsProcessorParams processors;
  int max_tokens = 256;          // counted per choice
  std::optional<uint64_t> seed;  // choice i is seeded with seed + i
  int n = 1;                     // choices, each generated from the same prompt
  bool ignore_eos = false;
  OutputOptions output;
  std::string endpoint;          // for the logs ("chat", "completions", "messages", "responses")
  std::shared_ptr<const Grammar> grammar;  // structured output (response_format); null: free
  // KV-cache quantization asked for by this request (unset: the server's; kv_bits 0: float).
  std::optional<int> kv_bits, kv_group_size, quantized_kv_start;
};

// One token's log-probability in the protocol-neutral shape (OpenAI's entries are built from it).
struct TokenLogprob {
  int id = 0;
  std::string token;   // the token's text as decoded alone (may hold partial UTF-8 bytes)
  float logprob = 0;
  std::vector<std::pair<int, float>> top;  // top_logprobs alternatives, best first
  std::vector<std::string> top_tokens;     // their texts, same order
};

// New output of one choice. Any field may be empty (e.g. a token held back by a stop string).
struct Delta {
  int choice = 0;
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<TokenLogprob> logprobs;  // the tokens generated since the previous delta
};

// One choice ended: "stop" (eos or stop string), "length", "tool_calls", "cancelled".
struct Finish {
  int choice = 0;
  std::string reason;
  std::string stop_sequence;        // the stop string that matched, if any
  std::vector<ToolCall> tool_calls; // the complete calls of this choice (arguments as JSON text)
  int completion_tokens = 0;
};

// After every choice finished: the request is over.
struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  double ttft_s = 0;
};

// The request failed after submission (the HTTP status it maps to and a message).
struct Failure {
  int status = 500;
  std::string message;
};

using Event = std::variant<Delta, Finish, Usage, Failure>;
// Called on the engine thread; must not block. Usage or Failure is always the last event.
using EventSink = std::function<void(Event)>;

// Embeddings: token ids per input (each non-empty, within the context window) and how they are
// pooled (generate/embedder.h). Answered once, on the engine thread: the vectors in input order,
// or a Failure. The sink must not block.
struct EmbeddingRequest {
  std::vector<std::vector<int>> inputs;
  EmbedOptions options;
};
using EmbeddingResult = std::variant<std::vector<std::vector<float>>, Failure>;
using EmbeddingSink = std::function<void(EmbeddingResult)>;

}  // namespace mlxcpp::sched
