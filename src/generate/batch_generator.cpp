// Port of mlx_lm/generate.py BatchGenerator._next, PromptProcessingBatch and GenerationBatch.
#include "generate/batch_generator.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <fmt/format.h>
#include <mlx/memory.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>
#include <spdlog/spdlog.h>

#include "cache/ragged_kv_cache.h"
#include "core/errors.h"
#include "generate/host_ids.h"
#include "generate/token_mask.h"
#include "kernels/block_kernels.h"
#include "kernels/ops.h"
#include "kernels/qmatmul.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

BatchCacheBase& batch(const std::unique_ptr<KVCacheBase>& c) { return static_cast<BatchCacheBase&>(*c); }

mx::array int_array(const std::vector<int>& v) {
  return mx::array(v.data(), {static_cast<int>(v.size())}, mx::int32);
}

// a[i:i+1] along axis 0.
mx::array row_of(const mx::array& a, int i) {
  mx::Shape lo(a.ndim(), 0), hi = a.shape();
  lo[0] = i;
  hi[0] = i + 1;
  return mx::slice(a, lo, hi);
}

// _extend_cache: a's layers extended with b's (or b's when a has none).
void extend_caches(LayerCaches& a, LayerCaches& b) {
  if (a.empty()) {
    a = std::move(b);
    return;
  }
  if (b.empty()) return;
  for (size_t i = 0; i < a.size(); ++i) batch(a[i]).extend(batch(b[i]));
}

}  // namespace

int prefill_min_tail(const Model& model) { return model.fast_path() ? kernels::kI16MaxRows : 0; }

BatchGenerator::BatchGenerator(const Model& model, BatchOptions opts)
    : model_(model), opts_(opts), next_id_(opts.first_row_id) {
  if (opts_.prefill_step_size <= 0) throw RequestError("[batch] prefill_step_size must be positive");
  if (opts_.prefill_batch_size <= 0) throw RequestError("[batch] prefill_batch_size must be positive");
  opts_.completion_batch_size = std::max(opts_.completion_batch_size, opts_.prefill_batch_size);
  if (opts_.min_tail < 0) opts_.min_tail = prefill_min_tail(model);
  if (opts_.kv_quantization) {
    check_kv_quantization(*opts_.kv_quantization);
    if (opts_.kv_quantization->start != 0) {
      throw RequestError("[batch] quantized KV caches in a batch start at the first token (quantized_kv_start 0)");
    }
    if (opts_.ragged > 0) throw Error("[batch] ragged batches hold plain KV caches, not quantized ones");
    opts_.ragged = 0;
  }
  if (opts_.ragged != 0) {
    ragged_ = ragged_supported();
    if (!ragged_ && opts_.ragged > 0) {
      throw Error("[batch] ragged batches need the fused CPU fast path (float32 activations, quantized layers it covers)");
    }
  }
  spdlog::debug("batch generator: {} caches", ragged_ ? "ragged (fast path)" : "left-padded (mlx-lm's)");
}

bool BatchGenerator::ragged_supported() const {
  const auto& fast = model_.fast_path();
  if (!fast) return false;
  LayerCaches probe;
  for (const auto& c : model_.make_cache()) {
    if (dynamic_cast<const KVCache*>(c.get()) == nullptr) return false;
    probe.push_back(std::make_unique<RaggedKVCache>(1, fast->kv_f16()));
  }
  try {
    const int token = 0;
    (void)model_(mx::array(&token, {1, 1}, mx::int32), &probe);  // built, never evaluated
    return true;
  } catch (const Error&) {
    return false;  // some layer fell back to stock ops (RaggedKVCache::update_and_fetch)
  }
}

RowId BatchGenerator::insert(BatchRow row) {
  if (row.prompt.empty()) throw RequestError("[batch] the prompt is empty");
  for (int id : row.prompt) {
    if (id < 0 || id >= model_.vocab_size()) {
      throw RequestError(fmt::format("[batch] token id {} is outside the vocabulary (size {})", id, model_.vocab_size()));
    }
  }
  if (row.max_tokens == 0) throw RequestError("[batch] max_tokens must not be 0");
  RowState st;
  st.id = next_id_++;
  // The last prompt token is its own segment: the row starts decoding from it.
  if (row.prompt.size() == 1) {
    st.segments = {row.prompt};
  } else {
    st.segments = {std::vector<int>(row.prompt.begin(), row.prompt.end() - 1), {row.prompt.back()}};
  }
  st.tokens = std::move(row.history);
  st.sampler = std::move(row.sampler);
  st.processors = std::move(row.processors);
  if (row.grammar) st.matcher.emplace(grammar_matcher(*row.grammar, model_.vocab_size(), "batch"));
  st.max_tokens = row.max_tokens;
  LayerCaches cache = row.cache.empty() ? model_.make_cache() : std::move(row.cache);
  // Every KV layer held quantized, sliding rings too (start 0: from the first token).
  if (opts_.kv_quantization) maybe_quantize_kv_cache(cache, *opts_.kv_quantization);
  waiting_.push_back(Waiting{std::move(st), std::move(cache)});
  return waiting_.back().row.id;
}

void BatchGenerator::eval_caches(const Caches& cache) const {
  std::vector<mx::array> state;
  for (const auto& c : cache) {
    for (auto& a : c->state_to_eval()) state.push_back(a);
  }
  if (!state.empty()) mx::eval(state);
}

BatchGenerator::~BatchGenerator() {
  try {
    mx::synchronize();
  } catch (const std::exception& e) {
    spdlog::error("[batch] waiting for queued steps: {}", e.what());
  }
}

void BatchGenerator::filter(Caches& cache, const std::vector<int>& keep) {
  if (keep.empty()) {
    cache.clear();
    return;
  }
  for (auto& c : cache) batch(c).filter(keep);
}

LayerCaches BatchGenerator::extract(const Caches& cache, int idx) const {
  LayerCaches out;
  for (const auto& c : cache) out.push_back(batch(c).extract(idx));
  return out;
}

void BatchGenerator::admit(int n) {
  std::vector<Waiting> taken;
  for (int i = 0; i < n; ++i) {
    taken.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  LayerCaches merged;
  const size_t layers = taken.front().cache.size();
  for (size_t l = 0; l < layers; ++l) {
    std::vector<const KVCacheBase*> layer;
    for (const auto& w : taken) layer.push_back(w.cache[l].get());
    if (!ragged_) {
      merged.push_back(merge_layer_caches(layer));
      continue;
    }
    std::vector<const KVCache*> solo;
    for (const auto* c : layer) {
      solo.push_back(dynamic_cast<const KVCache*>(c));
      if (solo.back() == nullptr) throw Error("[batch] a ragged batch takes rows whose caches are plain KVCaches");
    }
    merged.push_back(RaggedKVCache::merge(solo, model_.fast_path()->kv_f16()));
  }
  for (auto& w : taken) prompt_.rows.push_back(std::move(w.row));
  extend_caches(prompt_.cache, merged);
}

void BatchGenerator::prefill(std::vector<std::vector<int>> chunks) {
  if (chunks.empty()) return;
  std::vector<int> lengths;
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto& t = prompt_.rows[i].tokens;
    t.insert(t.end(), chunks[i].begin(), chunks[i].end());
    lengths.push_back(static_cast<int>(chunks[i].size()));
  }
  const int max_length = *std::max_element(lengths.begin(), lengths.end());
  std::vector<int> padding;
  for (int l : lengths) padding.push_back(max_length - l);
  const bool padded = *std::max_element(padding.begin(), padding.end()) > 0;
  std::vector<int> flat;
  for (auto& c : chunks) {
    c.resize(max_length, 0);  // right padding
    flat.insert(flat.end(), c.begin(), c.end());
  }
  auto tokens = mx::array(flat.data(), {static_cast<int>(chunks.size()), max_length}, mx::int32);
  if (padded) {
    for (auto& c : prompt_.cache) batch(c).prepare({}, lengths, padding);
  }
  for (int done = 0; done < max_length;) {
    const int n = std::min(opts_.prefill_step_size + opts_.min_tail, max_length - done);
    model_(mx::slice(tokens, {0, done}, {tokens.shape(0), done + n}), &prompt_.cache);
    eval_caches(prompt_.cache);
    mx::clear_cache();
    done += n;
  }
  if (padded) {
    for (auto& c : prompt_.cache) batch(c).finalize();
    eval_caches(prompt_.cache);
    mx::clear_cache();
  }
}

void BatchGenerator::start_generation(std::vector<int> split) {
  std::vector<int> keep;
  for (int i = 0; i < static_cast<int>(prompt_.rows.size()); ++i) {
    if (std::find(split.begin(), split.end(), i) == split.end()) keep.push_back(i);
  }
  // PromptProcessingBatch.split: a copy filtered to `split`, the original to the rest.
  GenBatch g;
  for (const auto& c : prompt_.cache) g.cache.push_back(batch(c).split_off(split));
  filter(prompt_.cache, keep);
  std::vector<int> last;
  for (int i : split) {
    auto& r = prompt_.rows[i];
    last.push_back(r.segments.front().front());
    if (!r.processors.empty() && !r.tokens.empty()) r.context = int_array(r.tokens);
    g.rows.push_back(std::move(r));
  }
  std::vector<RowState> rest;
  for (int i : keep) rest.push_back(std::move(prompt_.rows[i]));
  prompt_.rows = std::move(rest);
  // GenerationBatch.__init__: the first step runs the last prompt tokens.
  g.next_tokens = int_array(last);
  step(g);
  // GenerationBatch.extend
  if (gen_.rows.empty()) {
    gen_ = std::move(g);
    return;
  }
  extend_caches(gen_.cache, g.cache);
  for (auto& r : g.rows) gen_.rows.push_back(std::move(r));
  gen_.next_tokens = mx::concatenate({*gen_.next_tokens, *g.next_tokens});
  for (auto& lp : g.next_logprobs) gen_.next_logprobs.push_back(std::move(lp));
}

std::pair<std::vector<int>, std::vector<mx::array>> BatchGenerator::step(GenBatch& g) {
  const auto current = *g.next_tokens;
  auto current_lp = std::move(g.next_logprobs);
  const int B = static_cast<int>(g.rows.size());
  const bool any_grammar =
      std::any_of(g.rows.begin(), g.rows.end(), [](const RowState& r) { return r.matcher.has_value(); });
  auto logits = model_(mx::expand_dims(current, 1), &g.cache);
  const int L = logits.shape(1);
  logits = mx::squeeze(mx::slice(logits, {0, L - 1, 0}, {B, L, logits.shape(2)}), 1);
  // The forward pass runs while the host computes the grammar rows' masks: it is queued before
  // the host waits for the fed tokens (the grammar rows consume them; the previous step's, queued
  // earlier), so the stream never idles while the host waits or builds.
  std::vector<int> fed;
  if (any_grammar) {
    mx::async_eval(logits);
    fed = host_ids(current);
  }
  std::vector<std::optional<std::vector<uint32_t>>> masks(B);
  for (int e = 0; any_grammar && e < B; ++e) {
    auto& r = g.rows[e];
    if (!r.matcher) continue;
    const bool consumed = !r.matcher_started || r.matcher->consume(fed[e]);
    r.matcher_started = true;
    masks[e].emplace(r.matcher->mask_words());
    const bool masked = r.matcher->compute_mask(masks[e]->data());  // only EOS when it fails
    if (!(consumed && masked) && !r.grammar_error) r.grammar_error = grammar_failure(*r.matcher, fed[e]);
  }
  std::vector<mx::array> contexts;
  const bool any_processors =
      std::any_of(g.rows.begin(), g.rows.end(), [](const RowState& r) { return !r.processors.empty(); });
  if (any_processors) {
    std::vector<mx::array> rows;
    for (int e = 0; e < B; ++e) {
      auto sl = row_of(logits, e);
      auto& r = g.rows[e];
      if (!r.processors.empty()) {
        auto in = row_of(current, e);
        r.context = r.context ? mx::concatenate({*r.context, in}) : in;
        contexts.push_back(*r.context);
        for (const auto& p : r.processors) sl = p(*r.context, sl);
      }
      rows.push_back(sl);
    }
    logits = mx::concatenate(rows, 0);
  }
  if (any_grammar) {  // after the processors: the masked logits are what the samplers see
    std::vector<const std::vector<uint32_t>*> ptrs;
    for (const auto& m : masks) ptrs.push_back(m ? &*m : nullptr);
    logits = apply_token_masks(logits, ptrs, model_.fast_path());
  }
  auto fast = kernels::log_softmax(logits, model_.fast_path());
  auto logprobs = fast ? *fast : mx::subtract(logits, mx::logsumexp(logits, -1, /*keepdims=*/true));
  const bool all_greedy = std::all_of(g.rows.begin(), g.rows.end(), [](const RowState& r) { return !r.sampler; });
  mx::array sampled = mx::array(0);
  if (all_greedy) {
    // mx::argmax's values from our vectorized kernel on the fast path.
    auto fast_pick = kernels::argmax_last(logprobs, model_.fast_path());
    sampled = fast_pick ? *fast_pick : greedy_sampler(logprobs);
  } else {
    std::vector<mx::array> picks;
    for (int e = 0; e < B; ++e) {
      auto lp = row_of(logprobs, e);
      picks.push_back(g.rows[e].sampler ? g.rows[e].sampler(lp) : greedy_sampler(lp));
    }
    sampled = mx::concatenate(picks, 0);
  }
  g.next_tokens = sampled;
  g.next_logprobs.clear();
  for (int e = 0; e < B; ++e) g.next_logprobs.push_back(mx::squeeze(row_of(logprobs, e), 0));
  std::vector<mx::array> pending{sampled};
  pending.insert(pending.end(), g.next_logprobs.begin(), g.next_logprobs.end());
  pending.insert(pending.end(), contexts.begin(), contexts.end());
  mx::async_eval(pending);
  // One wait for the previous step's tokens and log-probabilities (queued before this step's
  // forward pass, so the wait ends while this step computes).
  mx::eval(current_lp);
  std::vector<int> out = any_grammar ? std::move(fed) : host_ids(current);
  for (int e = 0; e < B; ++e) g.rows[e].tokens.push_back(out[e]);
  return {std::move(out), std::move(current_lp)};
}

std::vector<BatchToken> BatchGenerator::next() {
  std::vector<BatchToken> out;
  using Clock = std::chrono::steady_clock;
  auto ema = [](double& avg, double v) { avg = avg == 0 ? v : 0.7 * avg + 0.3 * v; };
  if (!gen_.rows.empty()) {
    const auto t0 = Clock::now();
    auto [tokens, logprobs] = step(gen_);
    const double ds = std::chrono::duration<double>(Clock::now() - t0).count();
    ema(decode_s_, ds);
    spdlog::trace("batch step: decode {} rows {:.1f} ms", gen_.rows.size(), ds * 1e3);
    std::vector<int> keep;
    for (size_t i = 0; i < gen_.rows.size(); ++i) {
      auto& r = gen_.rows[i];
      ++r.generated;
      const bool length = r.max_tokens >= 0 && r.generated >= r.max_tokens;
      out.push_back(BatchToken{r.id, tokens[i], logprobs[i], length, r.grammar_error});
      if (r.grammar_error) continue;  // leaves, its cache with it
      if (length) finished_caches_.emplace_back(r.id, extract(gen_.cache, static_cast<int>(i)));
      else keep.push_back(static_cast<int>(i));
    }
    if (keep.size() < gen_.rows.size()) {
      filter(gen_.cache, keep);
      std::vector<RowState> rows;
      std::vector<mx::array> lps;
      for (int i : keep) {
        rows.push_back(std::move(gen_.rows[i]));
        lps.push_back(gen_.next_logprobs[i]);
      }
      gen_.rows = std::move(rows);
      gen_.next_logprobs = std::move(lps);
      if (keep.empty()) gen_.next_tokens.reset();
      else gen_.next_tokens = mx::take(*gen_.next_tokens, int_array(keep), 0);
    }
    if (++steps_ % 512 == 0) mx::clear_cache();
  }
  if (static_cast<int>(gen_.rows.size()) >= opts_.completion_batch_size) return out;

  const int n = std::min({opts_.prefill_batch_size - static_cast<int>(prompt_.rows.size()),
                          opts_.completion_batch_size - static_cast<int>(gen_.rows.size()),
                          static_cast<int>(waiting_.size())});
  if (n > 0) admit(n);

  std::vector<int> split;
  for (int i = 0; i < static_cast<int>(prompt_.rows.size()); ++i) {
    const auto& seg = prompt_.rows[i].segments;
    if (seg.size() == 1 && seg.front().size() == 1) split.push_back(i);
  }
  if (!split.empty()) start_generation(split);

  int step = !gen_.rows.empty() && opts_.decode_prefill_step > 0
                 ? std::min(opts_.decode_prefill_step, opts_.prefill_step_size)
                 : opts_.prefill_step_size;
  const bool beside_decode = !gen_.rows.empty();
  if (beside_decode && opts_.adaptive_prefill) {
    // Until a chunk beside decoding rows was timed, the smallest: a long chunk's cost per
    // token (a prompt prefilled alone) says little about a short one's.
    const int floor = std::min(opts_.min_adaptive_chunk, step);
    int fit = floor;
    const double share = std::clamp(1.0 + static_cast<double>(waiting_.size()), 1.0, opts_.max_prefill_share);
    if (decode_s_ > 0 && prefill_s_per_token_ > 0) fit = static_cast<int>(share * decode_s_ / prefill_s_per_token_);
    step = std::clamp(fit, floor, step);
    // A multiple of the attention's query block: each chunk's queries then fall in the blocks
    // of an unchunked prefill, and the row's logits equal its solo run's.
    if (step > kernels::kAttentionQueryBlock) step -= step % kernels::kAttentionQueryBlock;
  }
  std::vector<std::vector<int>> chunks;
  for (auto& r : prompt_.rows) {
    auto& seg = r.segments.front();
    int take = std::min(static_cast<int>(seg.size()), step);
    const int rest = static_cast<int>(seg.size()) - take;
    if (rest > 0 && rest <= opts_.min_tail) take += rest;
    chunks.emplace_back(seg.begin(), seg.begin() + take);
    seg.erase(seg.begin(), seg.begin() + take);
    if (seg.empty()) r.segments.erase(r.segments.begin());
  }
  int prompt_tokens = 0;
  for (const auto& c : chunks) prompt_tokens = std::max(prompt_tokens, static_cast<int>(c.size()));
  const auto t0 = Clock::now();
  prefill(std::move(chunks));
  const double ps = std::chrono::duration<double>(Clock::now() - t0).count();
  if (prompt_tokens > 0) spdlog::trace("batch step: prefill {} tokens {:.1f} ms", prompt_tokens, ps * 1e3);
  if (prompt_tokens > 0 && beside_decode) ema(prefill_s_per_token_, ps / prompt_tokens);
  return out;
}

std::vector<LayerCaches> BatchGenerator::remove(const std::vector<RowId>& ids, bool want_cache) {
  std::vector<LayerCaches> out(ids.size());
  auto slot = [&](RowId id) { return static_cast<size_t>(std::find(ids.begin(), ids.end(), id) - ids.begin()); };
  // Waiting rows: their caches as given.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const size_t k = slot(it->row.id);
    if (k == ids.size()) {
      ++it;
      continue;
    }
    if (want_cache) out[k] = std::move(it->cache);
    it = waiting_.erase(it);
  }
  auto take_from = [&](std::vector<RowState>& rows, Caches& cache, std::vector<int>& keep) {
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
      const size_t k = slot(rows[i].id);
      if (k == ids.size()) {
        keep.push_back(i);
      } else if (want_cache && !cache.empty()) {
        out[k] = extract(cache, i);
      }
    }
    if (keep.size() == rows.size()) return false;
    filter(cache, keep);
    std::vector<RowState> kept;
    for (int i : keep) kept.push_back(std::move(rows[i]));
    rows = std::move(kept);
    return true;
  };
  std::vector<int> keep_prompt;
  take_from(prompt_.rows, prompt_.cache, keep_prompt);
  std::vector<int> keep_gen;
  if (take_from(gen_.rows, gen_.cache, keep_gen)) {
    std::vector<mx::array> lps;
    for (int i : keep_gen) lps.push_back(gen_.next_logprobs[i]);
    gen_.next_logprobs = std::move(lps);
    if (keep_gen.empty()) gen_.next_tokens.reset();
    else gen_.next_tokens = mx::take(*gen_.next_tokens, int_array(keep_gen), 0);
  }
  return out;
}

std::vector<std::pair<RowId, LayerCaches>> BatchGenerator::take_finished_caches() {
  return std::exchange(finished_caches_, {});
}

int64_t BatchGenerator::cache_bytes() const {
  int64_t total = 0;
  for (const auto& w : waiting_) {
    for (const auto& c : w.cache) total += c->nbytes();
  }
  for (const auto& c : prompt_.cache) total += c->nbytes();
  for (const auto& c : gen_.cache) total += c->nbytes();
  return total;
}

}  // namespace mlxcpp
