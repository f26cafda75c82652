// The engine: one thread owns the model, its caches and all MLX evaluation. Protocol handlers
// submit requests (token ids + output options) with an event sink and may cancel them; that is
// the whole interface. This engine runs one sequence at a time from a FIFO queue; a batching
// scheduler can replace the loop behind the same interface.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

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
  int64_t memory_budget = 0;              // bytes for weights + one request's cache (0: no check)
  bool log_prompts = false;               // debug log of each prompt's text (never logged otherwise)
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
  void loop();
  void run(Job& job);
  int run_choice(Job& job, int choice, Usage& usage, std::chrono::steady_clock::time_point start);

  const ServedModel& model_;
  EngineOptions opts_;
  EngineMetrics metrics_;
  PromptCacheStore cache_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  RequestId next_id_ = 1;
  RequestId running_id_ = 0;
  std::shared_ptr<std::atomic<bool>> running_cancel_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mlxcpp::sched
