// The engine's embeddings: queued beside the generation requests, run on the engine thread (it
// owns the model) one request per loop turn, between batch steps.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "scheduler/engine.h"

namespace mlxcpp::sched {

void Engine::submit_embedding(EmbeddingRequest req, EmbeddingSink sink) {
  if (req.inputs.empty()) throw RequestError("there is nothing to embed");
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const size_t n = req.inputs[i].size();
    if (n == 0) throw RequestError(fmt::format("input {} is empty", i));
    if (model_.context_length > 0 && n > static_cast<size_t>(model_.context_length)) {
      throw RequestError(fmt::format("input {} has {} tokens, over the model's context window of {} tokens", i, n,
                                     model_.context_length));
    }
  }
  std::lock_guard lock(mu_);
  if (stopping_) throw CapacityError(503, "the server is shutting down");
  if (static_cast<size_t>(queued()) >= opts_.max_queue) {
    throw CapacityError(429, fmt::format("the request queue is full ({} waiting); retry later", queued()));
  }
  spdlog::debug("embedding request: {} inputs, queue {}", req.inputs.size(), queued());
  embed_queue_.push_back(EmbedJob{std::move(req), std::move(sink)});
  metrics_.queue_depth = queued();
  cv_.notify_one();
}

void Engine::run_embedding(EmbedJob job) {
  EmbeddingResult result;
  try {
    result = embed(model_.model(), job.req.inputs, job.req.options);
    size_t tokens = 0;
    for (const auto& in : job.req.inputs) tokens += in.size();
    metrics_.embedding_inputs += static_cast<int64_t>(job.req.inputs.size());
    metrics_.embedding_tokens += static_cast<int64_t>(tokens);
    ++metrics_.requests_finished;
  } catch (const std::exception& e) {
    spdlog::debug("embedding request failed: {}", e.what());
    ++metrics_.requests_failed;
    result = Failure{error_status(e), e.what()};
  }
  job.sink(std::move(result));
}

}  // namespace mlxcpp::sched
