// The engine: one thread owns the model, its caches and all MLX evaluation. Protocol handlers
// submit requests (token ids + output options) with an event sink and may cancel them; that is
// the whole interface. Behind it, continuous batching: every choice of every admitted request
// is a row of one BatchGenerator; each step decodes the running rows, then admits queued
// requests (oldest first, while rows and memory allow) and prefills them in chunks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "generate/batch_generator.h"
#include "scheduler/metrics.h"
#include "scheduler/prompt_cache_store.h"
#include "scheduler/request.h"
#include "scheduler/served_model.h"

namespace mlxcpp::sched {

struct EngineOptions {
  int64_t prompt_cache_bytes = 1LL << 30;
  size_t max_queue = 64;                  // waiting requests; beyond: 429
  std::chrono::milliseconds queue_timeout{0};  // a request waiting longer fails with 503 (0: no limit)
  int prefill_step_size = 2048;
  // While rows decode, a joining prompt runs chunks that take about a decode step's time, at
  // most this many tokens (0: the whole prefill_step_size), so running streams keep flowing.
  int decode_prefill_step = 256;
  // BatchOptions::max_prefill_share: how much of a step a queued prompt's prefill may take.
  double max_prefill_share = 4.0;
  int min_prefill_chunk = 64;  // BatchOptions::min_adaptive_chunk
  int max_batch = 16;                     // rows (choices) generated together
  // Rows prefilled together. 1 (each prompt alone, as it would run by itself) keeps a batched
  // request's output bit-identical to its solo run on the CPU fast path; more pads prompts.
  int prefill_batch = 1;
  // Bytes for weights + every running row's cache at prompt + max_tokens + one prefill step's
  // transient (0: no check). A request that does not fit next to the running ones waits.
  int64_t memory_budget = 0;
  bool log_prompts = false;               // debug log of each prompt's text (never logged otherwise)
  // --kv-bits / --kv-group-size / --quantized-kv-start: the default of the requests' kv_bits,
  // kv_group_size and quantized_kv_start. A request whose prompt holds at least `start` tokens
  // runs with its KV cache quantized from the first token; each kind of cache is its own batch.
  std::optional<KvQuantization> kv_quantization;
};

class Engine {
 public:
  Engine(const ServedModel& model, EngineOptions opts);
  ~Engine();  // cancels what is left and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks the request against the context window and the memory budget (CapacityError 413),
  // the queue (429) and a stopping engine (503), then queues it. Events arrive on `sink` from
  // the engine thread; Usage or Failure is the last one.
  RequestId submit(Request req, EventSink sink);
  // The request stops at its next step (or leaves the queue): Finish "cancelled" per open
  // choice, then Usage. Unknown or finished ids are ignored.
  void cancel(RequestId id);
  // Embeds the inputs on the engine thread, between batch steps (queued with the requests: 429
  // when the queue is full, 503 when stopping; RequestError for an empty or too long input).
  void submit_embedding(EmbeddingRequest req, EmbeddingSink sink);
  // Stops taking requests and cancels everything queued or running.
  void shutdown();

  // 413 checks only (the HTTP layer calls it before streaming starts).
  void check_admission(size_t prompt_tokens, int max_tokens) const;

  const ServedModel& model() const { return model_; }
  const EngineMetrics& metrics() const { return metrics_; }
  const PromptCacheStore& prompt_cache() const { return cache_; }

 private:
  struct Job {
    RequestId id;
    Request req;
    EventSink sink;
    std::chrono::steady_clock::time_point queued_at;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  struct EmbedJob {
    EmbeddingRequest req;
    EmbeddingSink sink;
  };
  struct Active;  // an admitted request (engine thread only)
  struct Row;     // one of its choices in the batch
  void loop();
  int64_t reserve_bytes(const Request& req) const;
  int64_t transient_bytes() const;
  void start(Job job);
  void handle(const BatchToken& t);
  void finish_row(RowId id, const std::string& reason, std::optional<LayerCaches> caches);
  void finish_job(RequestId id);
  void cancel_active(RequestId id);
  // Ends one request with a Failure (its other choices leave their batches); the rest run on.
  void fail_request(RequestId id, int status, const std::string& message);
  void fail_all(const std::exception& e);
  void run_embedding(EmbedJob job);
  // A request's KV-cache kind: 0 float, else bits * 1000 + group (also its prompt-cache kind),
  // and the quantization (start 0) its batch applies; RequestError for a group size the model's
  // heads cannot take.
  std::pair<int, std::optional<KvQuantization>> kv_kind(const Request& req);
  BatchGenerator& generator(int kind, const std::optional<KvQuantization>& q);
  int queued() const { return static_cast<int>(queue_.size() + embed_queue_.size()); }  // under mu_

  const ServedModel& model_;
  EngineOptions opts_;
  EngineMetrics metrics_;
  PromptCacheStore cache_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::deque<EmbedJob> embed_queue_;
  RequestId next_id_ = 1;
  std::map<RequestId, std::shared_ptr<std::atomic<bool>>> running_;  // admitted: cancel flags
  bool stopping_ = false;

  // Engine thread only.
  BatchOptions batch_options_;
  std::map<int, std::unique_ptr<BatchGenerator>> gens_;  // by KV-cache kind (kv_kind)
  std::map<int, bool> kv_group_fits_;                    // group size -> the model's heads take it
  std::map<RequestId, std::unique_ptr<Active>> active_;
  std::map<RowId, std::unique_ptr<Row>> rows_;
  std::map<RowId, LayerCaches> finished_caches_;  // rows that left at max_tokens
  int64_t reserved_bytes_ = 0;
  int active_rows_ = 0;

  std::thread thread_;
};

}  // namespace mlxcpp::sched
