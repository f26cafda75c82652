// Port of make_sampler, greedy_sampler, apply_top_k, apply_min_p, apply_top_p, apply_xtc and
// categorical_sampling from mlx_lm/sample_utils.py (mlx-lm 0.32.2). Same ops, dtypes and scalar
// constants, and the same mx.compile wrapping, so the fused kernels and the tokens match.
//
// mlx-lm compiles with inputs/outputs=mx.random.state: inside the trace, random calls split
// the captured key. The C++ API has no handle on the default key, so we split it outside
// (KeySequence::next(), the same split the trace performs) and pass the subkey in as an input:
// the key sequence and the float graph are unchanged.
#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <mlx/compile.h>
#include <mlx/ops.h>
#include <mlx/random.h>

#include "core/errors.h"
#include "generate/logits_processors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

constexpr const char* kTag = "[sampler]";
constexpr double kInf = std::numeric_limits<double>::infinity();

using ArrayFn = std::function<mx::array(const mx::array&)>;

// mlx's to_array(python_float, dtype): the double is cast to float, then to the array's
// (floating) dtype; float64 keeps the double.
mx::array weak_float(double v, mx::Dtype dtype) {
  if (dtype == mx::float64) return mx::array(v, dtype);
  auto out_t = mx::issubdtype(dtype, mx::floating) ? dtype : mx::float32;
  return mx::array(static_cast<float>(v), out_t);
}

// `x[..., start:stop]`.
mx::array slice_last(const mx::array& x, int start, int stop) {
  mx::Shape lo(x.ndim(), 0);
  mx::Shape hi = x.shape();
  lo.back() = start;
  hi.back() = stop;
  return mx::slice(x, lo, hi);
}

// A compiled x -> f(x); the returned function owns (and on destruction frees) the cache entry.
ArrayFn compiled(ArrayFn f) {
  auto c = mx::compile([f](const std::vector<mx::array>& in) {
    return std::vector<mx::array>{f(in[0])};
  });
  return [c](const mx::array& x) { return c({x})[0]; };
}

// A compiled x -> f(x, key) that draws its key on each call from `keys`, or from the default
// sequence when null.
ArrayFn compiled_keyed(std::function<mx::array(const mx::array&, const mx::array&)> f, SamplerKeys keys = nullptr) {
  auto c = mx::compile([f](const std::vector<mx::array>& in) {
    return std::vector<mx::array>{f(in[0], in[1])};
  });
  return [c, keys = std::move(keys)](const mx::array& x) {
    return c({x, keys ? keys->next() : mx::random::KeySequence::default_().next()})[0];
  };
}

mx::array top_p_graph(const mx::array& logprobs, double top_p) {
  auto sorted_logprobs = mx::sort(logprobs, -1);
  auto sorted_probs = mx::exp(mx::astype(sorted_logprobs, mx::float32));
  auto mass_above = mx::cumsum(sorted_probs, -1, /*reverse=*/true, /*inclusive=*/false);
  auto total_mass = mx::add(slice_last(mass_above, 0, 1), slice_last(sorted_probs, 0, 1));
  // `top_p * total_mass` is __rmul__: multiply(total_mass, top_p).
  auto scaled_mass = mx::multiply(total_mass, weak_float(top_p, total_mass.dtype()));
  auto num_dropped = mx::sum(mx::greater_equal(mass_above, scaled_mass), -1, /*keepdims=*/true);
  auto threshold = mx::take_along_axis(sorted_logprobs, num_dropped, -1);
  return mx::where(mx::less(logprobs, threshold), weak_float(-kInf, logprobs.dtype()), logprobs);
}

mx::array min_p_graph(const mx::array& logprobs, double min_p, int min_tokens_to_keep) {
  auto top_logprobs = mx::max(logprobs, -1, /*keepdims=*/true);
  auto scaled_min_p = mx::add(top_logprobs, weak_float(std::log(min_p), top_logprobs.dtype()));
  auto tokens_to_remove = mx::less(logprobs, scaled_min_p);
  if (min_tokens_to_keep > 1) {
    int v = logprobs.shape(-1);
    auto top_indices = mx::argpartition(logprobs, -min_tokens_to_keep, -1);
    top_indices = slice_last(top_indices, v - min_tokens_to_keep, v);
    tokens_to_remove = mx::put_along_axis(tokens_to_remove, top_indices, mx::array(false), -1);
  }
  return mx::where(tokens_to_remove, weak_float(-kInf, logprobs.dtype()), logprobs);
}

mx::array top_k_graph(const mx::array& logprobs, int top_k) {
  int v = logprobs.shape(-1);
  auto mask_idx = mx::argpartition(mx::negative(logprobs), top_k - 1, -1);
  mask_idx = slice_last(mask_idx, top_k, v);
  auto neg_inf = mx::array(-std::numeric_limits<float>::infinity(), logprobs.dtype());
  return mx::put_along_axis(logprobs, mask_idx, neg_inf, -1);
}

mx::array xtc_graph(const mx::array& logits, const mx::array& key, double probability,
                    double threshold, const std::vector<int>& special_tokens) {
  auto probs = mx::softmax(logits, std::vector<int>{-1});
  auto dt = probs.dtype();
  auto above =
      mx::where(mx::greater(probs, weak_float(threshold, dt)), probs, weak_float(kInf, dt));
  auto mask = mx::greater(probs, mx::min(above, -1, /*keepdims=*/true));
  if (!special_tokens.empty()) {
    int n = static_cast<int>(special_tokens.size());
    auto ids = mx::array(special_tokens.begin(), {n}, mx::int32);
    mask = put_last_axis(mask, ids, mx::array(false));  // mask[..., special] = False
  }
  // mx.random.uniform(0, 1): Python ints become int32 bounds.
  auto u = mx::random::uniform(mx::array(0), mx::array(1), {}, mx::float32, key);
  return mx::where(mx::greater(u, weak_float(probability, u.dtype())), logits,
                   mx::where(mask, weak_float(-kInf, logits.dtype()), logits));
}

void check_has_vocab_axis(const mx::array& x) {
  if (x.ndim() < 1) {
    throw std::invalid_argument(fmt::format("{} logprobs must have a vocabulary axis", kTag));
  }
}

ArrayFn top_p_fn(double top_p) {
  return compiled([top_p](const mx::array& x) { return top_p_graph(x, top_p); });
}

ArrayFn min_p_fn(double min_p, int min_tokens_to_keep) {
  auto f = compiled([=](const mx::array& x) { return min_p_graph(x, min_p, min_tokens_to_keep); });
  return [f, min_tokens_to_keep](const mx::array& x) {
    check_has_vocab_axis(x);
    if (min_tokens_to_keep > x.shape(-1)) {
      throw RequestError(fmt::format("{} min_tokens_to_keep must be <= vocabulary size {}, got {}",
                                     kTag, x.shape(-1), min_tokens_to_keep));
    }
    return f(x);
  };
}

ArrayFn top_k_fn(int top_k) {
  auto f = compiled([top_k](const mx::array& x) { return top_k_graph(x, top_k); });
  return [f, top_k](const mx::array& x) {
    check_has_vocab_axis(x);
    if (!(0 < top_k && top_k < x.shape(-1))) {  // mlx-lm raises the same way
      throw RequestError(fmt::format("{} top_k must be in (0, {}) for this vocabulary, got {}",
                                     kTag, x.shape(-1), top_k));
    }
    return f(x);
  };
}

ArrayFn xtc_fn(double probability, double threshold, std::vector<int> special_tokens, SamplerKeys keys = nullptr) {
  int max_id = -1;
  for (int t : special_tokens) max_id = std::max(max_id, t);
  auto f = compiled_keyed([=](const mx::array& x, const mx::array& key) {
    return xtc_graph(x, key, probability, threshold, special_tokens);
  }, std::move(keys));
  return [f, max_id](const mx::array& x) {
    check_has_vocab_axis(x);
    if (max_id >= x.shape(-1)) {
      throw RequestError(fmt::format("{} xtc_special_tokens id {} is out of range for vocabulary "
                                     "size {}",
                                     kTag, max_id, x.shape(-1)));
    }
    return f(x);
  };
}

ArrayFn categorical_fn(double temp, SamplerKeys keys = nullptr) {
  return compiled_keyed([temp](const mx::array& logits, const mx::array& key) {
    // `logits * (1.0 / temp)`: the reciprocal in double, then a weak float scalar.
    auto scaled = mx::multiply(logits, weak_float(1.0 / temp, logits.dtype()));
    return mx::random::categorical(scaled, -1, key);
  }, std::move(keys));
}

void require(bool ok, const std::string& message) {
  if (!ok) throw RequestError(fmt::format("{} {}", kTag, message));
}

}  // namespace

void validate_sampler_params(const SamplerParams& p) {
  // Written as !(in range) so that NaN fails too.
  require(p.temp >= 0 && std::isfinite(p.temp),
          fmt::format("temp must be a finite number >= 0, got {}", p.temp));
  require(p.top_p >= 0 && p.top_p <= 1, fmt::format("top_p must be in [0, 1], got {}", p.top_p));
  require(p.min_p >= 0 && p.min_p <= 1, fmt::format("min_p must be in [0, 1], got {}", p.min_p));
  require(p.min_tokens_to_keep >= 1,
          fmt::format("min_tokens_to_keep must be >= 1, got {}", p.min_tokens_to_keep));
  require(p.top_k >= 0, fmt::format("top_k must be >= 0, got {}", p.top_k));
  require(p.xtc_probability >= 0 && p.xtc_probability <= 1,
          fmt::format("xtc_probability must be in [0, 1], got {}", p.xtc_probability));
  require(p.xtc_threshold >= 0 && p.xtc_threshold <= 0.5,
          fmt::format("xtc_threshold must be in [0, 0.5], got {}", p.xtc_threshold));
  for (int t : p.xtc_special_tokens) {
    require(t >= 0, fmt::format("xtc_special_tokens ids must be >= 0, got {}", t));
  }
}

Sampler make_sampler(const SamplerParams& p, SamplerKeys keys) {
  validate_sampler_params(p);
  if (p.temp == 0) return greedy_sampler;

  std::vector<ArrayFn> methods;
  if (0 < p.top_p && p.top_p < 1.0) methods.push_back(top_p_fn(p.top_p));
  if (p.min_p != 0.0) methods.push_back(min_p_fn(p.min_p, p.min_tokens_to_keep));
  if (p.xtc_probability > 0.0) {
    methods.push_back(xtc_fn(p.xtc_probability, p.xtc_threshold, p.xtc_special_tokens, keys));
  }
  if (p.top_k > 0) methods.push_back(top_k_fn(p.top_k));
  auto sample = categorical_fn(p.temp, keys);

  return [methods = std::move(methods), sample](const mx::array& logprobs) {
    auto x = logprobs;
    for (const auto& method : methods) x = method(x);
    return sample(x);
  };
}

mx::array greedy_sampler(const mx::array& logprobs) { return mx::argmax(logprobs, -1); }

mx::array apply_top_p(const mx::array& logprobs, double top_p) {
  return top_p_fn(top_p)(logprobs);
}

mx::array apply_min_p(const mx::array& logprobs, double min_p, int min_tokens_to_keep) {
  require(min_p >= 0 && min_p <= 1, fmt::format("min_p must be in [0, 1], got {}", min_p));
  require(min_tokens_to_keep >= 1,
          fmt::format("min_tokens_to_keep must be >= 1, got {}", min_tokens_to_keep));
  return min_p_fn(min_p, min_tokens_to_keep)(logprobs);
}

mx::array apply_top_k(const mx::array& logprobs, int top_k) { return top_k_fn(top_k)(logprobs); }

mx::array apply_xtc(const mx::array& logits, double xtc_probability, double xtc_threshold,
                    const std::vector<int>& xtc_special_tokens) {
  require(xtc_threshold >= 0 && xtc_threshold <= 0.5,
          fmt::format("xtc_threshold must be in [0, 0.5], got {}", xtc_threshold));
  require(xtc_probability >= 0 && xtc_probability <= 1,
          fmt::format("xtc_probability must be in [0, 1], got {}", xtc_probability));
  return xtc_fn(xtc_probability, xtc_threshold, xtc_special_tokens)(logits);
}

mx::array categorical_sampling(const mx::array& logits, double temp) {
  return categorical_fn(temp)(logits);
}

}  // namespace mlxcpp
