// What `mlxcpp bench` measures, apart from its CLI: prefill and decode throughput of a loaded
// model on random prompt ids, one or B sequences at once, timed like the Generator runs them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/quantized_kv_cache.h"
#include "models/model.h"

namespace mlxcpp::cli {

struct BenchSpec {
  int prompt_tokens = 512;
  int gen_tokens = 128;
  int batch = 1;
  int runs = 5;
  int decode_depth = -1;  // tokens in the cache when decode starts; -1: the prompt's
  int prefill_step_size = 2048;
  uint64_t seed = 0;
  // --kv-bits: every plain KVCache quantized from the first token (quantized_kv_start 0).
  std::optional<KvQuantization> kv;
};

struct RunTimes {
  double prefill_tps = 0;  // B * prompt_tokens / (time to the first token)
  double decode_tps = 0;   // B * gen_tokens / (time of gen_tokens pipelined steps)
  int64_t cache_bytes = 0;  // the caches' buffers after decode (all layers)
};

// Row 0 of the batched prefill against the same prompt run alone (B > 1 only).
struct BatchCheck {
  double max_abs_diff = 0;  // last-token logprobs
  bool same_argmax = false;
};

struct BenchResult {
  std::vector<RunTimes> runs;
  std::optional<BatchCheck> batch_check;
};

// B rows of random ids in [min(4, vocab-1), vocab), fixed by seed; row r differs per r.
std::vector<std::vector<int>> random_prompts(int batch, int tokens, int vocab, uint64_t seed);

// One untimed warm-up run, then spec.runs timed runs. Throws RequestError when the model
// rejects a batch of spec.batch sequences (with the model's own message).
BenchResult run_bench(const Model& model, const BenchSpec& spec);

// Bytes of weights one decode step reads: every parameter array once (a tied embedding is one
// array, read in full as lm_head) minus an untied input embedding, of which one row is read.
int64_t weight_bytes_per_step(const LoadedModel& loaded);

}  // namespace mlxcpp::cli
