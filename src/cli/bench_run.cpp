#include "cli/bench_run.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <fmt/format.h>
#include <mlx/memory.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"
#include "kernels/ops.h"

namespace mx = mlx::core;

namespace mlxcpp::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

mx::array to_ids(const std::vector<std::vector<int>>& rows, int begin, int end) {
  std::vector<int> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin() + begin, r.begin() + end);
  return mx::array(flat.data(), {static_cast<int>(rows.size()), end - begin}, mx::int32);
}

// Last-position logprobs [B, vocab] of ids [B, L] run through the caches (Generator::step).
mx::array last_logprobs(const Model& model, const mx::array& ids, LayerCaches& caches) {
  auto logits = model(ids, &caches);
  const int B = logits.shape(0), L = logits.shape(1), V = logits.shape(2);
  logits = mx::squeeze(mx::slice(logits, {0, L - 1, 0}, {B, L, V}), 1);
  if (auto fast = kernels::log_softmax(logits, model.fast_path())) return *fast;
  return mx::subtract(logits, mx::logsumexp(logits, -1, /*keepdims=*/true));
}

void eval_cache_state(const LayerCaches& caches) {
  std::vector<mx::array> state;
  for (const auto& c : caches) {
    for (auto& a : c->state_to_eval()) state.push_back(a);
  }
  mx::eval(state);
}

struct Prefilled {
  LayerCaches caches;
  mx::array logprobs;  // [B, vocab] of the last prompt token
  mx::array next;      // [B] greedy tokens, evaluated
};

// Generator::prefill for B rows: all but the last token in chunks (only the cache state is
// evaluated, so no logits are computed for them), then one step that yields the first token.
Prefilled prefill(const Model& model, const std::vector<std::vector<int>>& rows, int tokens, int step_size,
                  const std::optional<KvQuantization>& kv) {
  LayerCaches caches = model.make_cache();
  int done = 0;
  while (tokens - done > 1) {
    const int n = std::min(step_size, tokens - done - 1);
    model(to_ids(rows, done, done + n), &caches);
    if (kv) maybe_quantize_kv_cache(caches, *kv);
    eval_cache_state(caches);
    done += n;
    mx::clear_cache();
  }
  auto lp = last_logprobs(model, to_ids(rows, done, tokens), caches);
  if (kv) maybe_quantize_kv_cache(caches, *kv);
  auto y = mx::argmax(lp, -1);
  mx::eval({y, lp});
  return {std::move(caches), lp, y};
}

// Pipelined greedy decode (Generator::next): step n+1 is built and async_eval'ed before token
// n is waited for. Returns seconds for `steps` steps.
double decode(const Model& model, mx::array y, LayerCaches& caches, int steps, const std::optional<KvQuantization>& kv) {
  const int B = y.shape(0);
  auto tic = Clock::now();
  for (int i = 0; i < steps; ++i) {
    auto lp = last_logprobs(model, mx::reshape(y, {B, 1}), caches);
    if (kv) maybe_quantize_kv_cache(caches, *kv);
    auto next = mx::argmax(lp, -1);
    mx::async_eval({next, lp});
    mx::eval({y});
    y = next;
  }
  mx::eval({y});
  return seconds_since(tic);
}

RunTimes one_run(const Model& model, const BenchSpec& s, const std::vector<std::vector<int>>& rows, int gen) {
  RunTimes t;
  auto tic = Clock::now();
  auto p = prefill(model, rows, s.prompt_tokens, s.prefill_step_size, s.kv);
  t.prefill_tps = static_cast<double>(s.batch) * s.prompt_tokens / seconds_since(tic);
  const int depth = s.decode_depth < 0 ? s.prompt_tokens : std::max(1, s.decode_depth);
  if (depth != s.prompt_tokens) p = prefill(model, rows, depth, s.prefill_step_size, s.kv);
  if (gen > 0) t.decode_tps = static_cast<double>(s.batch) * gen / decode(model, p.next, p.caches, gen, s.kv);
  for (const auto& c : p.caches) t.cache_bytes += c->nbytes();
  return t;
}

}  // namespace

std::vector<std::vector<int>> random_prompts(int batch, int tokens, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(std::min(4, vocab - 1), vocab - 1);
  std::vector<std::vector<int>> rows(batch, std::vector<int>(tokens));
  for (auto& r : rows) {
    for (auto& id : r) id = dist(rng);
  }
  return rows;
}

BenchResult run_bench(const Model& model, const BenchSpec& s) {
  if (s.prompt_tokens < 1) throw RequestError(fmt::format("[bench] --prompt-tokens must be >= 1, got {}", s.prompt_tokens));
  if (s.gen_tokens < 0) throw RequestError(fmt::format("[bench] --gen-tokens must be >= 0, got {}", s.gen_tokens));
  if (s.batch < 1) throw RequestError(fmt::format("[bench] --batch must be >= 1, got {}", s.batch));
  if (s.runs < 1) throw RequestError(fmt::format("[bench] --runs must be >= 1, got {}", s.runs));
  if (s.prefill_step_size < 1) throw RequestError("[bench] --prefill-step-size must be positive");
  if (s.kv) check_kv_quantization(*s.kv);
  const int depth = s.decode_depth < 0 ? s.prompt_tokens : std::max(1, s.decode_depth);
  const auto rows = random_prompts(s.batch, std::max(s.prompt_tokens, depth), model.vocab_size(), s.seed);
  BenchResult r;
  try {
    one_run(model, s, rows, std::min(s.gen_tokens, 16));  // warm-up: pool threads, allocator
  } catch (const std::exception& e) {
    if (s.batch == 1) throw;
    throw RequestError(fmt::format("[bench] this model does not run a batch of {} sequences: {}", s.batch, e.what()));
  }
  if (s.batch > 1) {
    // The batch must compute what each sequence alone computes (else batching is faked).
    auto batched = prefill(model, rows, s.prompt_tokens, s.prefill_step_size, s.kv);
    auto alone = prefill(model, {rows[0]}, s.prompt_tokens, s.prefill_step_size, s.kv);
    auto row0 = mx::slice(batched.logprobs, {0, 0}, {1, batched.logprobs.shape(1)});
    BatchCheck c;
    c.max_abs_diff = mx::max(mx::abs(mx::subtract(row0, alone.logprobs))).item<float>();
    c.same_argmax = mx::slice(batched.next, {0}, {1}).item<uint32_t>() == alone.next.item<uint32_t>();
    r.batch_check = c;
  }
  for (int i = 0; i < s.runs; ++i) {
    r.runs.push_back(one_run(model, s, rows, s.gen_tokens));
    mx::clear_cache();
  }
  return r;
}

int64_t weight_bytes_per_step(const LoadedModel& loaded) {
  int64_t bytes = 0;
  for (const auto& p : loaded.model->parameters()) bytes += static_cast<int64_t>(p.nbytes());
  auto weights = loaded.checkpoint.load_weights();  // headers only; data stays lazy
  if (weights.has("lm_head.weight")) {
    for (const char* s : {".weight", ".scales", ".biases"}) {
      const std::string name = std::string("model.embed_tokens") + s;
      if (weights.has(name)) bytes -= static_cast<int64_t>(weights.peek(name).nbytes());
    }
  }
  return bytes;
}

}  // namespace mlxcpp::cli
