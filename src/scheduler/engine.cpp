#include "scheduler/engine.h"

#include <algorithm>

#include <fmt/format.h>
#include <mlx/ops.h>
#include <mlx/random.h>
#include <mlx/transforms.h>
#include <spdlog/spdlog.h>

#include "cache/arrays_cache.h"
#include "cache/quantized_kv_cache.h"
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
  if (static_cast<size_t>(queued()) >= opts_.max_queue) {
    throw CapacityError(429, fmt::format("the request queue is full ({} waiting); retry later", queued()));
  }
  RequestId id = next_id_++;
  spdlog::debug("request {} ({}): {} prompt tokens, max_tokens {}, n {}, queue {}", id, req.endpoint, req.prompt.size(),
                req.max_tokens, req.n, queue_.size());
  if (opts_.log_prompts) {
    spdlog::debug("request {} prompt: {}", id, model_.tokenizer.decode({req.prompt.begin(), req.prompt.end()}));
  }
  queue_.push_back(Job{id, std::move(req), std::move(sink), Clock::now(), std::make_shared<std::atomic<bool>>(false)});
  metrics_.queue_depth = queued();
  cv_.notify_one();
  return id;
}

void Engine::cancel(RequestId id) {
  std::optional<Job> removed;
  {
    std::lock_guard lock(mu_);
    if (auto it = running_.find(id); it != running_.end()) {
      *it->second = true;  // the engine thread ends it at its next step
      cv_.notify_one();
      return;
    }
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Job& j) { return j.id == id; });
    if (it == queue_.end()) return;
    removed = std::move(*it);
    queue_.erase(it);
    metrics_.queue_depth = queued();
  }
  // Never started: the sink hears it from this thread, once.
  for (int c = 0; c < removed->req.n; ++c) removed->sink(Finish{.choice = c, .reason = "cancelled"});
  removed->sink(Usage{.prompt_tokens = static_cast<int>(removed->req.prompt.size())});
  ++metrics_.requests_cancelled;
}

void Engine::shutdown() {
  std::deque<Job> dropped;
  std::deque<EmbedJob> dropped_embeddings;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, flag] : running_) *flag = true;
    dropped.swap(queue_);
    dropped_embeddings.swap(embed_queue_);
    metrics_.queue_depth = 0;
    cv_.notify_all();
  }
  for (auto& j : dropped) {
    j.sink(Failure{503, "the server is shutting down"});
    ++metrics_.requests_cancelled;
  }
  for (auto& j : dropped_embeddings) {
    j.sink(Failure{503, "the server is shutting down"});
    ++metrics_.requests_cancelled;
  }
}

// An admitted request: its sink, usage so far and the choices still open.
struct Engine::Active {
  Job job;
  Usage usage;
  Clock::time_point start;
  int open = 0;
  int64_t reserved = 0;
  std::vector<RowId> rows;
};

// One choice of an admitted request, generating as a batch row.
struct Engine::Row {
  RequestId job;
  int choice;
  int kind;  // its KV-cache kind: the generator it is a row of
  OutputPipeline pipe;
  std::vector<int> generated;  // every token returned (the eos included)
  int completion = 0;          // tokens counted as output (no eos)
  Clock::time_point last;
};

int64_t Engine::reserve_bytes(const Request& req) const {
  const int64_t tokens = static_cast<int64_t>(req.prompt.size()) + std::max(0, req.max_tokens);
  return static_cast<int64_t>(req.n) * tokens * model_.kv_bytes_per_token;
}

int64_t Engine::transient_bytes() const {
  // A prefill step's logits (float32, step x vocab) dominate its transient memory.
  return static_cast<int64_t>(opts_.prefill_step_size) * model_.model().vocab_size() * 4;
}

void Engine::start(Job job) {
  const RequestId id = job.id;
  auto a = std::make_unique<Active>();
  a->start = Clock::now();
  a->usage.prompt_tokens = static_cast<int>(job.req.prompt.size());
  a->reserved = reserve_bytes(job.req);
  a->job = std::move(job);
  const Request& req = a->job.req;
  if (req.max_tokens == 0) {  // nothing to generate: every choice ends at once
    for (int c = 0; c < req.n; ++c) a->job.sink(Finish{.choice = c, .reason = "length"});
    {
      std::lock_guard lock(mu_);
      running_.erase(id);
    }
    metrics_.prompt_tokens += a->usage.prompt_tokens;
    ++metrics_.requests_finished;
    a->job.sink(a->usage);
    return;
  }
  try {
    auto [kind, quantization] = kv_kind(req);
    BatchGenerator& gen = generator(kind, quantization);
    for (int c = 0; c < req.n; ++c) {
      auto hit = cache_.fetch(req.prompt, kind);
      if (c == 0) a->usage.cached_tokens = hit.tokens;
      SamplerParams sp = req.sampling;
      if (sp.xtc_special_tokens.empty()) sp.xtc_special_tokens = model_.xtc_special;
      SamplerKeys keys;
      if (req.seed) keys = std::make_shared<mx::random::KeySequence>(*req.seed + static_cast<uint64_t>(c));
      BatchRow row;
      row.prompt.assign(req.prompt.begin() + hit.tokens, req.prompt.end());
      row.cache = std::move(hit.caches);
      row.history.assign(req.prompt.begin(), req.prompt.begin() + hit.tokens);
      if (sp.temp != 0) row.sampler = make_sampler(sp, std::move(keys));
      else validate_sampler_params(sp);
      row.processors = make_logits_processors(req.processors);
      row.grammar = req.grammar;
      row.max_tokens = req.max_tokens;
      const RowId rid = gen.insert(std::move(row));
      a->rows.push_back(rid);
      rows_[rid] = std::make_unique<Row>(Row{id, c, kind,
                                             OutputPipeline(model_.tokenizer, model_.detokenizer, req.output, c,
                                                            fmt::format("{}_{}", id, c)),
                                             {}, 0, Clock::now()});
      ++a->open;
      ++active_rows_;
      metrics_.running = active_rows_;
    }
  } catch (const std::exception& e) {
    // A bad row (ids outside the vocabulary, sampler values): nothing of this request runs.
    reserved_bytes_ += a->reserved;
    active_[id] = std::move(a);
    fail_request(id, error_status(e), e.what());
    return;
  }
  reserved_bytes_ += a->reserved;
  active_[id] = std::move(a);
}

void Engine::handle(const BatchToken& t) {
  auto rit = rows_.find(t.row);
  if (rit == rows_.end()) return;
  Row& row = *rit->second;
  Active& a = *active_.at(row.job);
  const Request& req = a.job.req;
  if (*a.job.cancelled) return;                // ended at the next step
  if (t.error) {  // its grammar failed (llguidance gave up on it): a 400, its token unshown
    fail_request(row.job, 400, *t.error);
    return;
  }
  auto now = Clock::now();
  if (row.generated.empty()) {
    if (row.choice == 0) {
      a.usage.ttft_s = seconds_since(a.start);
      metrics_.ttft.observe(a.usage.ttft_s);
    }
  } else {
    metrics_.inter_token.observe(std::chrono::duration<double>(now - row.last).count());
  }
  row.last = now;
  row.generated.push_back(t.token);
  ++metrics_.generated_tokens;
  const auto& eos = model_.eos_ids;
  if (!req.ignore_eos && std::find(eos.begin(), eos.end(), t.token) != eos.end()) {
    finish_row(t.row, "stop", std::nullopt);
    return;
  }
  ++row.completion;
  std::optional<TokenLogprob> lp;
  if (req.output.top_logprobs >= 0) lp = token_logprob(model_.tokenizer, t.token, t.logprobs, req.output.top_logprobs);
  Delta d = row.pipe.push(t.token, std::move(lp));
  if (!OutputPipeline::empty(d)) a.job.sink(std::move(d));
  if (row.pipe.stopped()) finish_row(t.row, "stop", std::nullopt);
  else if (t.length) finish_row(t.row, "length", std::nullopt);
}

// Ends one choice: its last text, Finish, and (unless cancelled) its caches into the prompt cache.
void Engine::finish_row(RowId id, const std::string& reason, std::optional<LayerCaches> caches) {
  auto node = rows_.extract(id);
  Row& row = *node.mapped();
  Active& a = *active_.at(row.job);
  const bool keep_cache = reason != "cancelled";
  if (!caches) {
    if (auto f = finished_caches_.find(id); f != finished_caches_.end()) {
      caches = std::move(f->second);
      finished_caches_.erase(f);
    } else {
      auto out = gens_.at(row.kind)->remove({id}, keep_cache);
      caches = std::move(out.front());
    }
  }
  --active_rows_;
  metrics_.running = active_rows_;  // before the sink: a client may read /metrics once answered
  Delta tail = row.pipe.finish();
  if (!OutputPipeline::empty(tail)) a.job.sink(std::move(tail));
  Finish fin{.choice = row.choice, .reason = reason, .stop_sequence = row.pipe.stop_sequence(),
             .tool_calls = row.pipe.tool_calls(), .completion_tokens = row.completion};
  if (!fin.tool_calls.empty() && reason == "stop" && fin.stop_sequence.empty()) fin.reason = "tool_calls";
  for (const auto& p : row.pipe.tool_call_problems()) {
    ++metrics_.tool_call_problems;
    spdlog::warn("request {} choice {}: {}", row.job, row.choice, p);
  }
  a.usage.completion_tokens += row.completion;
  if (keep_cache && caches && !caches->empty()) {
    // The caches hold the prompt and every token returned (the eos included).
    std::vector<int> tokens = a.job.req.prompt;
    tokens.insert(tokens.end(), row.generated.begin(), row.generated.end());
    // A recurrent state cannot be trimmed to its key: stored only when it holds exactly these tokens.
    const bool exact = std::all_of(caches->begin(), caches->end(), [&](const auto& c) {
      return recurrent_state(c.get()) == nullptr || c->offset() == static_cast<int>(tokens.size());
    });
    if (exact) cache_.insert(tokens, std::move(*caches), row.kind);
    else spdlog::debug("request {}: recurrent caches do not end at the key; not stored", row.job);
  }
  a.job.sink(std::move(fin));
  if (--a.open == 0) finish_job(row.job);
}

void Engine::finish_job(RequestId id) {
  auto node = active_.extract(id);
  Active& a = *node.mapped();
  reserved_bytes_ -= a.reserved;
  {
    std::lock_guard lock(mu_);
    running_.erase(id);
  }
  metrics_.prompt_tokens += a.usage.prompt_tokens;
  metrics_.cached_prompt_tokens += a.usage.cached_tokens;
  if (*a.job.cancelled) ++metrics_.requests_cancelled;
  else ++metrics_.requests_finished;
  spdlog::debug("request {} done: {} prompt ({} cached), {} generated, ttft {:.3f} s", id, a.usage.prompt_tokens,
                a.usage.cached_tokens, a.usage.completion_tokens, a.usage.ttft_s);
  a.job.sink(a.usage);
}

void Engine::cancel_active(RequestId id) {
  std::vector<RowId> open;
  for (RowId r : active_.at(id)->rows) {
    if (auto it = rows_.find(r); it != rows_.end()) {
      open.push_back(r);
      gens_.at(it->second->kind)->remove({r});
    }
  }
  for (RowId r : open) {
    finished_caches_.erase(r);
    finish_row(r, "cancelled", LayerCaches{});
  }
}

void Engine::fail_request(RequestId id, int status, const std::string& message) {
  auto node = active_.extract(id);
  Active& a = *node.mapped();
  for (RowId r : a.rows) {
    if (auto it = rows_.find(r); it != rows_.end()) {
      gens_.at(it->second->kind)->remove({r});  // nothing for a row that already left
      rows_.erase(it);
      --active_rows_;
    }
    finished_caches_.erase(r);
  }
  reserved_bytes_ -= a.reserved;
  {
    std::lock_guard lock(mu_);
    running_.erase(id);
  }
  ++metrics_.requests_failed;
  metrics_.running = active_rows_;
  spdlog::warn("request {} failed: {}", id, message);
  a.job.sink(Failure{status, message});
}

void Engine::fail_all(const std::exception& e) {
  spdlog::error("batch step failed: {}", e.what());
  const int status = error_status(e);
  for (auto& [id, a] : active_) {
    ++metrics_.requests_failed;
    a->job.sink(Failure{status, e.what()});
  }
  {
    std::lock_guard lock(mu_);
    for (auto& [id, a] : active_) running_.erase(id);
  }
  active_.clear();
  rows_.clear();
  finished_caches_.clear();
  reserved_bytes_ = 0;
  active_rows_ = 0;
}

std::pair<int, std::optional<KvQuantization>> Engine::kv_kind(const Request& req) {
  const auto& d = opts_.kv_quantization;
  const int bits = req.kv_bits.value_or(d ? d->bits : 0);
  const int group = req.kv_group_size.value_or(d ? d->group_size : 64);
  const int start = req.quantized_kv_start.value_or(d ? d->start : 0);
  if (bits == 0 || static_cast<int>(req.prompt.size()) < start) return {0, std::nullopt};
  KvQuantization q{bits, group, 0};
  check_kv_quantization(q);
  auto fit = kv_group_fits_.find(group);
  if (fit == kv_group_fits_.end()) {
    // Built, never evaluated: a layer whose head dimension the group does not divide refuses it.
    LayerCaches probe = model_.model().make_cache();
    maybe_quantize_kv_cache(probe, q);  // as BatchGenerator::insert holds a row's caches
    bool ok = true;
    try {
      const int token = 0;
      (void)model_.model()(mx::array(&token, {1, 1}, mx::int32), &probe);
    } catch (const RequestError&) {
      ok = false;
    }
    fit = kv_group_fits_.emplace(group, ok).first;
  }
  if (!fit->second) {
    throw RequestError(fmt::format("kv_group_size {} does not divide this model's attention head dimension", group));
  }
  return {bits * 1000 + group, q};
}

BatchGenerator& Engine::generator(int kind, const std::optional<KvQuantization>& q) {
  auto& g = gens_[kind];
  if (!g) {
    BatchOptions bo = batch_options_;
    bo.kv_quantization = q;
    bo.first_row_id = (static_cast<uint64_t>(kind) + 1) << 40;  // ids apart from the other kinds'
    g = std::make_unique<BatchGenerator>(model_.model(), bo);
  }
  return *g;
}

void Engine::loop() {
  batch_options_ = BatchOptions{.prefill_step_size = opts_.prefill_step_size,
                        .decode_prefill_step = opts_.decode_prefill_step,
                        .adaptive_prefill = true,
                        .min_adaptive_chunk = std::max(1, opts_.min_prefill_chunk),
                        .max_prefill_share = opts_.max_prefill_share,
                        .prefill_batch_size = std::max(1, std::min(opts_.prefill_batch, opts_.max_batch)),
                        .completion_batch_size = std::max(1, opts_.max_batch)};
  for (;;) {
    std::vector<Job> admitted, expired;
    std::optional<EmbedJob> embedding;  // one per step, so running streams keep flowing
    bool stopping;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty() || !embed_queue_.empty(); });
      stopping = stopping_;
      if (stopping && queue_.empty() && active_.empty()) break;
      if (!embed_queue_.empty()) {
        embedding = std::move(embed_queue_.front());
        embed_queue_.pop_front();
      }
      if (opts_.queue_timeout.count() > 0) {
        const auto now = Clock::now();
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (now - it->queued_at > opts_.queue_timeout) {
            expired.push_back(std::move(*it));
            it = queue_.erase(it);
          } else {
            ++it;
          }
        }
      }
      // Oldest first; a request that does not fit waits at the head (no overtaking: long
      // prompts are never starved by short ones).
      int64_t rows = active_rows_, bytes = reserved_bytes_;
      bool alone = active_.empty();  // a request alone always runs (it passed check_admission)
      while (!queue_.empty() && !stopping) {
        const Job& j = queue_.front();
        const int64_t need = reserve_bytes(j.req);
        if (!alone) {
          if (rows + j.req.n > opts_.max_batch) break;
          if (opts_.memory_budget > 0 && model_.weight_bytes + bytes + need + transient_bytes() > opts_.memory_budget) {
            break;
          }
        }
        rows += j.req.n;
        bytes += need;
        alone = false;
        running_[j.id] = j.cancelled;
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.queue_depth = queued();
    }
    for (auto& j : expired) {
      j.sink(Failure{503, fmt::format("the request waited longer than the queue timeout ({} ms)",
                                      opts_.queue_timeout.count())});
      ++metrics_.requests_failed;
    }
    for (auto& j : admitted) start(std::move(j));
    if (embedding) run_embedding(std::move(*embedding));
    std::vector<RequestId> cancelled;
    for (auto& [id, a] : active_) {
      if (stopping || *a->job.cancelled) cancelled.push_back(id);
    }
    for (RequestId id : cancelled) {
      *active_.at(id)->job.cancelled = true;
      cancel_active(id);
    }
    metrics_.running = active_rows_;
    try {
      for (auto& [kind, gen] : gens_) {  // one step of each kind's batch
        if (gen->idle()) continue;
        auto tokens = gen->next();
        for (auto& [rid, caches] : gen->take_finished_caches()) finished_caches_[rid] = std::move(caches);
        for (const auto& t : tokens) handle(t);
      }
    } catch (const std::exception& e) {
      fail_all(e);
      gens_.clear();
    }
    metrics_.running = active_rows_;
  }
  metrics_.running = 0;
}

}  // namespace mlxcpp::sched
