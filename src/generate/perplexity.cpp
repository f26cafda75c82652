#include "generate/perplexity.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Sums in double, token by token in order (llama-perplexity's nll / nll2).
struct Accumulator {
  double sum = 0, sum2 = 0;
  long n = 0;

  void add(double v) {
    sum += v;
    sum2 += v * v;
    ++n;
  }
  MeanError result() const {
    MeanError m;
    m.mean = sum / static_cast<double>(n);
    const double var = sum2 / static_cast<double>(n) - m.mean * m.mean;
    m.error = n < 2 ? std::numeric_limits<double>::quiet_NaN() : var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
    return m;
  }
};

void check(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& o, const Model* base) {
  if (o.ctx < 4) throw RequestError(fmt::format("[perplexity] ctx must be at least 4, got {}", o.ctx));
  if (o.chunks == 0 || o.chunks < -1) {
    throw RequestError(fmt::format("[perplexity] chunks must be positive (or -1 for all), got {}", o.chunks));
  }
  if (tokens.size() < 2 * static_cast<size_t>(o.ctx)) {
    throw RequestError(fmt::format("[perplexity] the text has {} tokens; a context of {} needs at least {} (two windows)",
                                   tokens.size(), o.ctx, 2 * o.ctx));
  }
  const int vocab = model.vocab_size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw RequestError(fmt::format("[perplexity] token {} (id {}) is outside the vocabulary (size {})", i, tokens[i],
                                     vocab));
    }
  }
  if (base && base->vocab_size() != vocab) {
    throw RequestError(fmt::format("[perplexity] the base model's vocabulary has {} tokens, the model's {}: KL needs the same",
                                   base->vocab_size(), vocab));
  }
}

// One window's logits, rows [first, first + n) as [n, vocab] float32.
mx::array scored_rows(const Model& model, const mx::array& ids, int first, int n) {
  auto logits = model(ids, nullptr);
  const int vocab = logits.shape(-1);
  auto rows = mx::slice(logits, {0, first, 0}, {1, first + n, vocab});
  return mx::astype(mx::reshape(rows, {n, vocab}), mx::float32);
}

std::vector<float> to_floats(const mx::array& a) {
  auto f = mx::astype(a, mx::float32);
  f.eval();
  return {f.data<float>(), f.data<float>() + f.size()};
}

}  // namespace

PerplexityResult perplexity(const Model& model, const std::vector<int>& tokens, std::optional<int> bos,
                            const PerplexityOptions& opts, const Model* base, const PerplexityProgress& progress) {
  check(model, tokens, opts, base);
  const int ctx = opts.ctx, first = ctx / 2, n = ctx - first - 1;
  const int fits = static_cast<int>(tokens.size() / ctx);
  PerplexityResult r;
  r.ctx = ctx;
  r.chunks = opts.chunks < 0 ? fits : std::min(opts.chunks, fits);
  Accumulator nll, kl, top1;
  for (int c = 0; c < r.chunks; ++c) {
    std::vector<int32_t> window(tokens.begin() + static_cast<long>(c) * ctx, tokens.begin() + static_cast<long>(c + 1) * ctx);
    if (bos) window[0] = *bos;
    mx::array ids(window.data(), {1, ctx}, mx::int32);
    auto rows = scored_rows(model, ids, first, n);
    mx::array targets(window.data() + first + 1, {n}, mx::int32);
    // mlx-lm's cross entropy: logsumexp minus the target's logit.
    auto token_nll = mx::subtract(mx::logsumexp(rows, -1),
                                  mx::squeeze(mx::take_along_axis(rows, mx::expand_dims(targets, -1), -1), -1));
    std::vector<mx::array> outs{token_nll};
    if (base) {
      auto brows = scored_rows(*base, ids, first, n);
      auto lb = mx::subtract(brows, mx::logsumexp(brows, -1, true));
      auto lm = mx::subtract(rows, mx::logsumexp(rows, -1, true));
      outs.push_back(mx::sum(mx::multiply(mx::exp(lb), mx::subtract(lb, lm)), -1));
      outs.push_back(mx::equal(mx::argmax(brows, -1), mx::argmax(rows, -1)));
    }
    mx::eval(outs);
    for (float v : to_floats(outs[0])) nll.add(v);
    if (base) {
      for (float v : to_floats(outs[1])) kl.add(v);
      for (float v : to_floats(outs[2])) top1.add(v);
    }
    r.running_ppl.push_back(std::exp(nll.sum / static_cast<double>(nll.n)));
    if (progress) progress(c + 1, r.chunks);
  }
  r.scored = nll.n;
  r.nll = nll.result();
  r.ppl = std::exp(r.nll.mean);
  r.ppl_error = r.ppl * r.nll.error;
  if (base) {
    r.kl = kl.result();
    r.top1 = top1.result();
  }
  return r;
}

}  // namespace mlxcpp
