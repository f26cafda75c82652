#include "generate/generator.h"

#include <algorithm>
#include <chrono>

#include <mlx/memory.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>
#include <spdlog/spdlog.h>

#include "cache/arrays_cache.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"
#include "generate/host_ids.h"
#include "generate/token_mask.h"
#include "kernels/ops.h"

namespace mx = mlx::core;

namespace mlxcpp {

Generator::Generator(const Model& model, std::vector<int> prompt, Sampler sampler,
                     std::vector<LogitsProcessor> processors, GenerateOptions opts, LayerCaches caches)
    : model_(model),
      prompt_(std::move(prompt)),
      sampler_(std::move(sampler)),
      processors_(std::move(processors)),
      opts_(opts),
      caches_(std::move(caches)) {
  if (prompt_.empty()) throw RequestError("[generate] the prompt is empty");
  for (int id : prompt_) {
    if (id < 0 || id >= model_.vocab_size()) {
      throw RequestError("[generate] token id " + std::to_string(id) + " is outside the vocabulary (size " +
                         std::to_string(model_.vocab_size()) + ")");
    }
  }
  if (opts_.prefill_step_size <= 0) throw RequestError("[generate] prefill_step_size must be positive");
  if (opts_.kv_quantization) check_kv_quantization(*opts_.kv_quantization);
  if (opts_.grammar) {
    const auto t0 = std::chrono::steady_clock::now();
    matcher_.emplace(grammar_matcher(*opts_.grammar, model_.vocab_size(), "generate"));
    matcher_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!processors_.empty() && !opts_.history.empty()) {
    tokens_ = mx::array(opts_.history.data(), {static_cast<int>(opts_.history.size())}, mx::int32);
  }
  if (caches_.empty()) {
    caches_ = model_.make_cache();
    // make_prompt_cache(max_kv_size) for models without their own make_cache; a model with
    // recurrent layers keeps its own (mlx-lm's make_cache ignores max_kv_size).
    const bool recurrent = std::any_of(caches_.begin(), caches_.end(),
                                       [](const auto& c) { return recurrent_state(c.get()) != nullptr; });
    if (opts_.max_kv_size && !recurrent) {
      caches_.clear();
      for (int i = 0; i < model_.num_layers(); ++i) {
        caches_.push_back(std::make_unique<RotatingKVCache>(*opts_.max_kv_size, 4));
      }
    }
  }
}

Generator::~Generator() {
  try {
    mx::synchronize();
  } catch (const std::exception& e) {
    spdlog::error("[generate] waiting for the queued step: {}", e.what());
  }
}

std::pair<mx::array, mx::array> Generator::step(const mx::array& input) { return sample(forward(input), input); }

// logits[:, -1, :] of the model on `input`.
mx::array Generator::forward(const mx::array& input) {
  auto logits = model_(mx::expand_dims(input, 0), &caches_);
  const int L = logits.shape(1);
  return mx::squeeze(mx::slice(logits, {0, L - 1, 0}, {logits.shape(0), L, logits.shape(2)}), 1);
}

std::pair<mx::array, mx::array> Generator::sample(mx::array logits, const mx::array& input) {
  if (!processors_.empty() && input.size() > 0) {
    tokens_ = tokens_ ? mx::concatenate({*tokens_, input}) : input;
    for (const auto& p : processors_) logits = p(*tokens_, logits);
  }
  maybe_quantize();
  if (matcher_) {
    const auto t0 = std::chrono::steady_clock::now();
    // Into one buffer reused every step (a fresh 32 KiB at Gemma's vocabulary was zeroed each time).
    mask_words_.resize(matcher_->mask_words());
    matcher_->compute_mask(mask_words_.data());
    mask_seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    logits = apply_token_mask(logits, mask_words_, model_.fast_path());
  }
  // mlx-lm: logits - mx.logsumexp(logits, keepdims=True); fast mode: one primitive of ours.
  auto fast = kernels::log_softmax(logits, model_.fast_path());
  auto logprobs = fast ? *fast : mx::subtract(logits, mx::logsumexp(logits, /*keepdims=*/true));
  auto sampled = sampler_(logprobs);
  return {sampled, mx::squeeze(logprobs, 0)};
}

void Generator::prefill() {
  mx::array prompt(prompt_.data(), {static_cast<int>(prompt_.size())}, mx::int32);
  int total = static_cast<int>(prompt_.size());
  int done = 0;
  const int tail = prefill_min_tail(model_);
  while (total - done > 1) {
    int n = std::min(opts_.prefill_step_size, total - done - 1);
    if (const int rest = total - done - 1 - n; rest > 0 && rest <= tail) n += rest;
    auto chunk = mx::slice(prompt, {0}, {n});
    model_(mx::expand_dims(chunk, 0), &caches_);
    maybe_quantize();
    std::vector<mx::array> state;
    for (const auto& c : caches_) {
      for (auto& a : c->state_to_eval()) state.push_back(a);
    }
    mx::eval(state);
    if (!processors_.empty()) tokens_ = tokens_ ? mx::concatenate({*tokens_, chunk}) : chunk;
    done += n;
    prompt = mx::slice(prompt, {n}, {prompt.shape(0)});
    mx::clear_cache();
  }
  auto [y, lp] = step(prompt);
  mx::async_eval({y, lp});
  y_ = y;
  logprobs_ = lp;
}

void Generator::maybe_quantize() {
  if (opts_.kv_quantization) maybe_quantize_kv_cache(caches_, *opts_.kv_quantization);
}

std::optional<GeneratedToken> Generator::next() {
  if (!started_) {
    started_ = true;
    prefill();
  }
  if (opts_.max_tokens >= 0 && n_ >= opts_.max_tokens) return std::nullopt;
  if (matcher_) return next_constrained();
  // Build and start step n+1 before reading token n (mlx-lm's pipelining).
  auto [next_y, next_lp] = step(*y_);
  mx::async_eval({next_y, next_lp});
  if (n_ == 0) mx::eval({*y_});
  GeneratedToken out{host_ids(*y_).at(0), *logprobs_};
  if (n_ % 256 == 0) mx::clear_cache();
  ++n_;
  y_ = next_y;
  logprobs_ = next_lp;
  return out;
}

// Under a grammar, step n+1's mask needs token n: step n+1's forward is started first and the
// matcher advances and computes the mask here, on this thread, while the forward runs.
// Tokens the grammar forces after token n are fast-forwarded: one forward runs all of them, they
// are returned by the next calls without sampling (their logprobs: the model's, unmasked), and the
// token after them is sampled from that forward's last row.
std::optional<GeneratedToken> Generator::next_constrained() {
  if (!forced_.empty()) {
    GeneratedToken t = std::move(forced_.front());
    forced_.pop_front();
    ++n_;
    return t;
  }
  auto logits = forward(*y_);
  mx::async_eval({logits});
  GeneratedToken out{host_ids(*y_).at(0), *logprobs_};
  auto advance = [this](int id) {
    if (!matcher_->consume(id)) {
      throw RequestError(grammar_failure(*matcher_, id));
    }
  };
  advance(out.id);
  mx::array input = *y_;
  if (auto ff = matcher_->forced_tokens(); !ff.empty()) {
    for (int id : ff) advance(id);
    const int k = static_cast<int>(ff.size());
    mx::array f(ff.data(), {k}, mx::int32);
    auto all = mx::squeeze(model_(mx::expand_dims(f, 0), &caches_), 0);  // [k, V]
    // Row i predicts ff[i]: `logits` the first, the forward's rows the rest.
    auto rows = mx::concatenate({logits, mx::slice(all, {0, 0}, {k - 1, all.shape(1)})}, 0);
    auto lp = mx::subtract(rows, mx::logsumexp(rows, -1, /*keepdims=*/true));
    for (int i = 0; i < k; ++i) forced_.push_back({ff[i], mx::squeeze(mx::slice(lp, {i, 0}, {i + 1, lp.shape(1)}), 0)});
    logits = mx::slice(all, {k - 1, 0}, {k, all.shape(1)});
    input = mx::concatenate({mx::astype(mx::reshape(*y_, {-1}), mx::int32), f});
  }
  auto [next_y, next_lp] = sample(logits, input);
  mx::async_eval({next_y, next_lp});
  if (n_ % 256 == 0) mx::clear_cache();
  ++n_;
  y_ = next_y;
  logprobs_ = next_lp;
  return out;
}

}  // namespace mlxcpp
