#include "scheduler/engine.h"

#include <algorithm>

#include <fmt/format.h>
#include <mlx/ops.h>
#include <mlx/random.h>
#include <mlx/transforms.h>
#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "generate/generator.h"
#include "scheduler/output_pipeline.h"

namespace mx = mlx::core;

namespace mlxcpp::sched {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The chosen token's log-probability and the k best alternatives, with their texts.
TokenLogprob token_logprob(const Tokenizer& tok, int id, const mx::array& logprobs, int k) {
  TokenLogprob out;
  out.id = id;
  out.token = tok.decode({id});
  auto chosen = mx::take(logprobs, mx::array(id));
  if (k <= 0) {
    out.logprob = chosen.item<float>();
    return out;
  }
  k = std::min(k, static_cast<int>(logprobs.size()));
  auto neg = mx::negative(logprobs);
  auto idx = mx::slice(mx::argpartition(neg, k - 1), {0}, {k});
  auto vals = mx::take(logprobs, idx);
  auto order = mx::argsort(mx::negative(vals));
  idx = mx::take(idx, order);
  vals = mx::take(vals, order);
  idx = mx::astype(idx, mx::int32);
  mx::eval({chosen, idx, vals});
  out.logprob = chosen.item<float>();
  const int32_t* ip = idx.data<int32_t>();
  const float* vp = vals.data<float>();
  for (int i = 0; i < k; ++i) {
    out.top.emplace_back(ip[i], vp[i]);
    out.top_tokens.push_back(tok.decode({ip[i]}));
  }
  return out;
}

}  // namespace

Engine::Engine(const ServedModel& model, EngineOptions opts)
    : model_(model), opts_(opts), cache_(opts.prompt_cache_bytes) {
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  shutdown();
  if (thread_.joinable()) thread_.join();
}

void Engine::check_admission(size_t prompt_tokens, int max_tokens) const {
  const int64_t total = static_cast<int64_t>(prompt_tokens) + std::max(0, max_tokens);
  if (model_.context_length > 0 && total > model_.context_length) {
    throw CapacityError(413, fmt::format("the prompt ({} tokens) plus max_tokens ({}) is {} tokens, over the model's "
                                         "context window of {} tokens",
                                         prompt_tokens, max_tokens, total, model_.context_length));
  }
  if (opts_.memory_budget > 0) {
    const int64_t need = model_.weight_bytes + total * model_.kv_bytes_per_token;
    if (need > opts_.memory_budget) {
      throw CapacityError(413, fmt::format("the request needs about {:.1f} MB (weights {:.1f} MB + KV cache for {} "
                                           "tokens), over the memory budget of {:.1f} MB (--memory-budget)",
                                           need / 1e6, model_.weight_bytes / 1e6, total, opts_.memory_budget / 1e6));
    }
  }
}

RequestId Engine::submit(Request req, EventSink sink) {
  if (req.prompt.empty()) throw RequestError("the prompt is empty");
  if (req.n < 1) throw RequestError(fmt::format("'n' must be at least 1, got {}", req.n));
  check_admission(req.prompt.size(), req.max_tokens);
  std::lock_guard lock(mu_);
  if (stopping_) throw CapacityError(503, "the server is shutting down");
  if (queue_.size() >= opts_.max_queue) {
    throw CapacityError(429, fmt::format("the request queue is full ({} waiting); retry later", queue_.size()));
  }
  RequestId id = next_id_++;
  spdlog::debug("request {} ({}): {} prompt tokens, max_tokens {}, n {}, queue {}", id, req.endpoint, req.prompt.size(),
                req.max_tokens, req.n, queue_.size());
  if (opts_.log_prompts) {
    spdlog::debug("request {} prompt: {}", id, model_.tokenizer.decode({req.prompt.begin(), req.prompt.end()}));
  }
  queue_.push_back(Job{id, std::move(req), std::move(sink), Clock::now(), std::make_shared<std::atomic<bool>>(false)});
  metrics_.queue_depth = static_cast<int>(queue_.size());
  cv_.notify_one();
  return id;
}

void Engine::cancel(RequestId id) {
  std::optional<Job> removed;
  {
    std::lock_guard lock(mu_);
    if (id == running_id_ && running_cancel_) {
      *running_cancel_ = true;
      return;
    }
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Job& j) { return j.id == id; });
    if (it == queue_.end()) return;
    removed = std::move(*it);
    queue_.erase(it);
    metrics_.queue_depth = static_cast<int>(queue_.size());
  }
  // Never started: the sink hears it from this thread, once.
  for (int c = 0; c < removed->req.n; ++c) removed->sink(Finish{.choice = c, .reason = "cancelled"});
  removed->sink(Usage{.prompt_tokens = static_cast<int>(removed->req.prompt.size())});
  ++metrics_.requests_cancelled;
}

void Engine::shutdown() {
  std::deque<Job> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (running_cancel_) *running_cancel_ = true;
    dropped.swap(queue_);
    metrics_.queue_depth = 0;
    cv_.notify_all();
  }
  for (auto& j : dropped) {
    j.sink(Failure{503, "the server is shutting down"});
    ++metrics_.requests_cancelled;
  }
}

void Engine::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = std::move(queue_.front());
      queue_.pop_front();
      metrics_.queue_depth = static_cast<int>(queue_.size());
      running_id_ = job.id;
      running_cancel_ = job.cancelled;
    }
    if (opts_.queue_timeout.count() > 0 && Clock::now() - job.queued_at > opts_.queue_timeout) {
      job.sink(Failure{503, fmt::format("the request waited longer than the queue timeout ({} ms)",
                                        opts_.queue_timeout.count())});
      ++metrics_.requests_failed;
    } else {
      run(job);
    }
    std::lock_guard lock(mu_);
    running_id_ = 0;
    running_cancel_.reset();
  }
}

void Engine::run(Job& job) {
  Usage usage;
  usage.prompt_tokens = static_cast<int>(job.req.prompt.size());
  const auto start = Clock::now();
  int choice = 0;
  try {
    for (; choice < job.req.n; ++choice) {
      if (*job.cancelled) break;
      usage.completion_tokens += run_choice(job, choice, usage, start);
    }
  } catch (const std::exception& e) {
    metrics_.running = 0;
    spdlog::error("request {} failed: {}", job.id, e.what());
    ++metrics_.requests_failed;
    job.sink(Failure{error_status(e), e.what()});
    return;
  }
  for (int c = choice; c < job.req.n; ++c) job.sink(Finish{.choice = c, .reason = "cancelled"});
  metrics_.prompt_tokens += usage.prompt_tokens;
  metrics_.cached_prompt_tokens += usage.cached_tokens;
  if (*job.cancelled) {
    ++metrics_.requests_cancelled;
  } else {
    ++metrics_.requests_finished;
  }
  spdlog::debug("request {} done: {} prompt ({} cached), {} generated, ttft {:.3f} s", job.id, usage.prompt_tokens,
                usage.cached_tokens, usage.completion_tokens, usage.ttft_s);
  job.sink(usage);
}

int Engine::run_choice(Job& job, int choice, Usage& usage, Clock::time_point start) {
  const Request& req = job.req;
  const Tokenizer& tok = model_.tokenizer;
  if (req.seed) mx::random::seed(*req.seed + static_cast<uint64_t>(choice));
  auto hit = cache_.fetch(req.prompt);
  if (choice == 0) usage.cached_tokens = hit.tokens;
  GenerateOptions gopts;
  gopts.max_tokens = req.max_tokens;
  gopts.prefill_step_size = opts_.prefill_step_size;
  gopts.history.assign(req.prompt.begin(), req.prompt.begin() + hit.tokens);
  SamplerParams sp = req.sampling;
  if (sp.xtc_special_tokens.empty()) sp.xtc_special_tokens = model_.xtc_special;
  Generator gen(model_.model(), std::vector<int>(req.prompt.begin() + hit.tokens, req.prompt.end()), make_sampler(sp),
                make_logits_processors(req.processors), gopts, std::move(hit.caches));
  OutputPipeline pipe(tok, model_.detokenizer, req.output, choice, fmt::format("{}_{}", job.id, choice));
  std::vector<int> generated;
  std::string reason = "length";
  int completion = 0;
  metrics_.running = 1;
  auto last = Clock::now();
  while (auto t = gen.next()) {
    if (*job.cancelled) {
      reason = "cancelled";
      break;
    }
    auto now = Clock::now();
    if (generated.empty()) {
      if (choice == 0) {
        usage.ttft_s = seconds_since(start);
        metrics_.ttft.observe(usage.ttft_s);
      }
    } else {
      metrics_.inter_token.observe(std::chrono::duration<double>(now - last).count());
    }
    last = now;
    generated.push_back(t->id);
    ++metrics_.generated_tokens;
    if (!req.ignore_eos && std::find(model_.eos_ids.begin(), model_.eos_ids.end(), t->id) != model_.eos_ids.end()) {
      reason = "stop";
      break;
    }
    ++completion;
    std::optional<TokenLogprob> lp;
    if (req.output.top_logprobs >= 0) lp = token_logprob(tok, t->id, t->logprobs, req.output.top_logprobs);
    Delta d = pipe.push(t->id, std::move(lp));
    if (!OutputPipeline::empty(d)) job.sink(std::move(d));
    if (pipe.stopped()) {
      reason = "stop";
      break;
    }
  }
  Delta tail = pipe.finish();
  if (!OutputPipeline::empty(tail)) job.sink(std::move(tail));
  Finish fin{.choice = choice, .reason = reason, .stop_sequence = pipe.stop_sequence(), .tool_calls = pipe.tool_calls(),
             .completion_tokens = completion};
  if (!fin.tool_calls.empty() && reason == "stop" && fin.stop_sequence.empty()) fin.reason = "tool_calls";
  metrics_.running = 0;
  if (reason != "cancelled") {
    // The caches hold the prompt and every token returned (the eos included).
    std::vector<int> tokens = req.prompt;
    tokens.insert(tokens.end(), generated.begin(), generated.end());
    cache_.insert(tokens, std::move(gen.caches()));
  }
  job.sink(std::move(fin));
  return completion;
}

}  // namespace mlxcpp::sched
