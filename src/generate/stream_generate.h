// The single-sequence generation loop users call: seed, sampler and processors from
// parameters, stop on eos ids or max tokens, and mlx-lm's stats (stream_generate).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "generate/generator.h"

namespace mlxcpp {

struct GenerationRequest {
  std::vector<int> prompt;
  SamplerParams sampling;
  LogitsProcessorParams processors;
  GenerateOptions options;
  std::optional<uint64_t> seed;  // mx.random.seed before the first step
  std::vector<int64_t> eos_ids;  // stop (without emitting) on any of these
  // When set, generation continues these caches (the prompt then holds only the new tokens) and
  // leaves them holding prompt + every token returned (a chat's next turn reuses them).
  LayerCaches* caches = nullptr;
};

struct GenerationStats {
  int prompt_tokens = 0;
  double prompt_tps = 0;      // prompt tokens / time to the first token
  int generation_tokens = 0;
  double generation_tps = 0;  // tokens after the first / time since the first
  double peak_memory_gb = 0;  // mx::get_peak_memory() / 1e9
  std::string finish_reason;  // "stop" or "length"
  // Under a grammar: each token mask's compute time (seconds, in order), the matcher's creation.
  std::vector<double> mask_seconds;
  double matcher_seconds = 0;
};

// Calls on_token for each generated token; return false from it to stop early.
GenerationStats stream_generate(const Model& model, const GenerationRequest& req,
                                const std::function<bool(const GeneratedToken&)>& on_token);

}  // namespace mlxcpp
