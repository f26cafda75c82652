// Continuous batching: a port of mlx_lm/generate.py BatchGenerator (PromptProcessingBatch,
// GenerationBatch). Rows join and leave between steps; each step decodes every running row in
// one model call, then admits waiting rows and prefills them in chunks, batched too. The model
// calls (batch composition, padding, chunking) are mlx-lm's, so with the same schedule every
// step's logits are bit-identical to mlx-lm's in parity mode. Beyond mlx-lm, every row has its
// own sampler (its own random key sequence when seeded) and logits processors.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "cache/batch_kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "generate/logits_processors.h"
#include "generate/sampler.h"
#include "models/model.h"
#include "tokenizer/grammar.h"

namespace mlxcpp {

using RowId = uint64_t;

struct BatchRow {
  std::vector<int> prompt;  // tokens to run (those not already in `cache`); non-empty
  LayerCaches cache;        // solo caches holding `history` (empty: the model's make_cache())
  std::vector<int> history; // tokens already in `cache` (the logits processors' context)
  Sampler sampler;          // null: greedy
  std::vector<LogitsProcessor> processors;
  // Structured output: the row's tokens follow this grammar (masked after the processors). Its
  // mask for a step is computed on the host while the step's forward pass runs.
  std::shared_ptr<const Grammar> grammar;
  int max_tokens = 256;     // the row reports finished "length" at this many tokens (< 0: no limit)
};

struct BatchOptions {
  int prefill_step_size = 2048;   // prompt tokens per row per step
  // While rows are decoding, a prompt row runs at most this many tokens per step, so the
  // running streams keep flowing while a long prompt joins (0: prefill_step_size).
  int decode_prefill_step = 0;
  // While rows are decoding, size each prompt chunk so that it takes about as long as a decode
  // step (from the measured decode step time and prefill rate), between min_adaptive_chunk and
  // decode_prefill_step tokens: a joining prompt at most about doubles the running streams'
  // inter-token time.
  bool adaptive_prefill = false;
  int min_adaptive_chunk = 32;
  // With prompts queued behind the one being prefilled, a chunk may take up to this many decode
  // steps' time (1 + the number queued, at most this): a queue drains sooner, running streams
  // slow down while it does. A lone joining prompt takes about one decode step's time.
  double max_prefill_share = 1.0;
  // A chunk never leaves a tail of 1..min_tail prompt tokens: it takes them too. With our CPU
  // kernels (one kernel for up to 8 rows of a sequence, another beyond) every token then runs
  // through the same kernel however the prompt was chunked. -1: that on the fast path, mlx-lm's
  // chunking (0) in parity mode.
  int min_tail = -1;
  // Ragged batches (RaggedKVCache: each row's keys in a buffer of its own, no left padding;
  // rows join and leave without copying the others'): -1 wherever the model's fused CPU blocks
  // take them (the fast path), 0 never (mlx-lm's left-padded BatchKVCache), 1 always (Error
  // where the model cannot).
  int ragged = -1;
  int prefill_batch_size = 8;     // rows prefilled together
  int completion_batch_size = 32; // rows decoding together (at least prefill_batch_size)
  // Quantized KV caches (--kv-bits / --kv-group-size): every row's KV layers quantized from its
  // first token, plain ones and sliding rings (BatchQuantizedKVCache, BatchQuantizedRotatingKVCache;
  // quantized_kv_start must be 0), left-padded batches.
  std::optional<KvQuantization> kv_quantization;
  // The first row id insert() hands out (then counting up): an engine running several
  // generators side by side keeps their ids apart.
  uint64_t first_row_id = 1;
};

struct BatchToken {
  RowId row = 0;
  int token = 0;
  mlx::core::array logprobs;  // [vocab]
  bool length = false;        // the row reached max_tokens (it has left the batch)
  // The row's grammar failed (llguidance failed at the fed token, or on its mask): the row has
  // left the batch and `token` must not be shown; the rest of the batch goes on.
  std::optional<std::string> error;
};

class BatchGenerator {
 public:
  BatchGenerator(const Model& model, BatchOptions opts);
  // Waits for the step still queued: work left running past its owner raced the static
  // destructors at exit (a corrupted heap, DestructionWaitsForTheQueuedStep).
  ~BatchGenerator();
  BatchGenerator(const BatchGenerator&) = delete;
  BatchGenerator& operator=(const BatchGenerator&) = delete;

  // Queues a row (it joins at the next step). Throws RequestError for an empty prompt, ids
  // outside the vocabulary or max_tokens == 0.
  RowId insert(BatchRow row);
  // One step: decodes the running rows (one token each, returned), then admits and prefills
  // waiting rows. Rows that reached max_tokens leave; others stay until remove().
  std::vector<BatchToken> next();
  // Takes rows out wherever they are (waiting, prefilling or decoding). With `extract`, each
  // removed row's caches come back as solo caches holding every token the row has run (the
  // prompt and the generated tokens up to the last returned one); otherwise empty.
  std::vector<LayerCaches> remove(const std::vector<RowId>& rows, bool extract = false);
  // The caches of rows that left by themselves (max_tokens) at the last next(), by row.
  std::vector<std::pair<RowId, LayerCaches>> take_finished_caches();

  bool idle() const { return waiting_.empty() && prompt_.rows.empty() && gen_.rows.empty(); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int prefilling() const { return static_cast<int>(prompt_.rows.size()); }
  int decoding() const { return static_cast<int>(gen_.rows.size()); }
  int64_t cache_bytes() const;
  bool ragged() const { return ragged_; }

 private:
  struct RowState {
    RowId id = 0;
    std::vector<std::vector<int>> segments;  // prompt still to run; the last one is one token
    std::vector<int> tokens;                 // every token in the row's cache
    Sampler sampler;
    std::vector<LogitsProcessor> processors;
    std::optional<mlx::core::array> context;  // processors' history (prompt + inputs)
    std::optional<GrammarMatcher> matcher;    // BatchRow::grammar's, past the tokens fed so far
    bool matcher_started = false;             // the first step feeds the last prompt token
    std::optional<std::string> grammar_error;  // why the matcher failed (the row leaves at this step)
    int max_tokens = 0;
    int generated = 0;
  };
  using Caches = LayerCaches;  // every layer's a BatchCacheBase
  struct PromptBatch {
    std::vector<RowState> rows;
    Caches cache;
  };
  struct GenBatch {
    std::vector<RowState> rows;
    Caches cache;
    std::optional<mlx::core::array> next_tokens;  // [B]
    std::vector<mlx::core::array> next_logprobs;  // per row [vocab]
  };
  struct Waiting {
    RowState row;
    LayerCaches cache;
  };

  void admit(int n);
  void prefill(std::vector<std::vector<int>> chunks);
  void start_generation(std::vector<int> rows);
  // One decode step of gen_: the model runs the tokens sampled last step and samples the next
  // ones (evaluated asynchronously); returns last step's tokens and logprobs.
  std::pair<std::vector<int>, std::vector<mlx::core::array>> step(GenBatch& g);
  void filter(Caches& cache, const std::vector<int>& keep);
  void eval_caches(const Caches& cache) const;
  LayerCaches extract(const Caches& cache, int idx) const;

  // Whether the model's fused blocks take a ragged batch (a graph built, not run, on one).
  bool ragged_supported() const;

  const Model& model_;
  BatchOptions opts_;
  bool ragged_ = false;
  RowId next_id_;
  std::deque<Waiting> waiting_;
  PromptBatch prompt_;
  GenBatch gen_;
  std::vector<std::pair<RowId, LayerCaches>> finished_caches_;
  int64_t steps_ = 0;
  double decode_s_ = 0;           // moving average of a decode step's time
  double prefill_s_per_token_ = 0;  // moving average of prefill time per token beside decoding
};

}  // namespace mlxcpp
