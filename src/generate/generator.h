// One sequence's token generator: mlx-lm's generate_step. Chunked prefill (all but the last
// prompt token, prefill_step_size at a time), then a pipelined decode loop in which step n+1
// is built and async_eval'ed before token n is read.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <mlx/array.h>

#include "cache/kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "generate/logits_processors.h"
#include "generate/sampler.h"
#include "models/model.h"
#include "tokenizer/grammar.h"

namespace mlxcpp {

struct GenerateOptions {
  int max_tokens = 256;          // -1: no limit
  int prefill_step_size = 2048;
  std::optional<int> max_kv_size;  // use RotatingKVCache(max_kv_size, keep=4) when set
  // kv_bits: each plain KVCache becomes a QuantizedKVCache once it holds kv_quantization->start
  // tokens (checked after every forward, as generate_step's maybe_quantize_kv_cache).
  std::optional<KvQuantization> kv_quantization;
  // Tokens the given caches already hold (a prompt-cache hit): the logits processors' history
  // starts with them, so penalties see the same context as without the cache.
  std::vector<int> history;
  // Constrains the output to a grammar (JSON schema, regex, Lark): forbidden tokens' logits are
  // -inf before the processors' output reaches the sampler; EOS is allowed only where the grammar
  // accepts. Compiled against a TokenEnv of the model's vocabulary width and EOS ids.
  std::shared_ptr<const Grammar> grammar;
};

struct GeneratedToken {
  int id = 0;
  mlx::core::array logprobs;  // [vocab], float32
};

// The shortest prompt tail a prefill chunk may leave (see BatchOptions::min_tail): the fast
// path's row limit for its one-to-eight-row kernel, 0 in parity mode (mlx-lm's chunking).
int prefill_min_tail(const Model& model);

class Generator {
 public:
  // `caches` may be empty: the model's own make_cache() is used.
  Generator(const Model& model, std::vector<int> prompt, Sampler sampler,
            std::vector<LogitsProcessor> processors, GenerateOptions opts, LayerCaches caches = {});
  // Waits for the step still queued (pipelining): work left running past its owner raced the
  // static destructors at exit (a corrupted heap, BatchGenerator.DestructionWaitsForTheQueuedStep).
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // The next token, or nullopt after max_tokens. The first call runs the prefill.
  std::optional<GeneratedToken> next();

  LayerCaches& caches() { return caches_; }
  int prompt_tokens() const { return static_cast<int>(prompt_.size()); }
  // Under a grammar: seconds each token mask took to compute (in order; the first includes the
  // matcher's first use), and the matcher's creation.
  const std::vector<double>& mask_seconds() const { return mask_seconds_; }
  double matcher_seconds() const { return matcher_seconds_; }

 private:
  std::pair<mlx::core::array, mlx::core::array> step(const mlx::core::array& input);
  mlx::core::array forward(const mlx::core::array& input);
  std::pair<mlx::core::array, mlx::core::array> sample(mlx::core::array logits, const mlx::core::array& input);
  void prefill();
  void maybe_quantize();
  std::optional<GeneratedToken> next_constrained();

  const Model& model_;
  std::vector<int> prompt_;
  Sampler sampler_;
  std::vector<LogitsProcessor> processors_;
  GenerateOptions opts_;
  LayerCaches caches_;
  std::optional<mlx::core::array> tokens_;  // history for the logits processors
  std::optional<mlx::core::array> y_, logprobs_;
  std::optional<GrammarMatcher> matcher_;  // with opts_.grammar
  std::deque<GeneratedToken> forced_;      // fast-forwarded tokens not yet returned
  std::vector<double> mask_seconds_;
  std::vector<uint32_t> mask_words_;  // the grammar's mask, reused step to step
  double matcher_seconds_ = 0;
  int n_ = 0;
  bool started_ = false;
};

}  // namespace mlxcpp
