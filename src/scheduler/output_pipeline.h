// One choice's output processing, the same for every protocol: tokens -> text (mlx-lm's
// streaming detokenizer) -> stop strings (held back, never leaked) -> reasoning split -> tool
// calls. What comes out is a Delta per token (often empty while text is held back).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/output_parsers.h"
#include "generate/stop_matcher.h"
#include "scheduler/request.h"
#include "tokenizer/streaming_detokenizer.h"

namespace mlxcpp::sched {

class OutputPipeline {
 public:
  OutputPipeline(const Tokenizer& tok, StreamingDetokenizer::Kind detok, const OutputOptions& opts, int choice,
                 const std::string& id_prefix);

  // One generated token (an eos is not pushed). Sets stopped() when a stop string matched.
  Delta push(int id, std::optional<TokenLogprob> logprob);
  // The end of the choice: releases what the stages held back (nothing after a stop string).
  Delta finish();

  bool stopped() const { return matcher_.stopped(); }
  const std::string& stop_sequence() const { return matcher_.matched(); }
  std::vector<ToolCall> tool_calls() const;
  // Each complete call checked against the request's tools: a name not among them, or
  // arguments that fail the tool's JSON schema (one message per problem, naming the call). The
  // calls are still returned as generated (a client may repair them); the engine logs these.
  std::vector<std::string> tool_call_problems() const;
  // Whether anything of this choice may be emitted (false for an empty delta).
  static bool empty(const Delta& d);

 private:
  void route(const std::string& text, Delta& out);
  void route_content(const std::string& text, Delta& out);

  StreamingDetokenizer detok_;
  StopMatcher matcher_;
  std::optional<ReasoningParser> reasoning_;
  std::unique_ptr<ToolCallParser> tools_;
  std::vector<nlohmann::ordered_json> tool_defs_;  // the request's function definitions
  std::vector<ToolCallDelta> forced_;  // deltas the forced prefix produced, sent with the first token
  int choice_;
};

}  // namespace mlxcpp::sched
