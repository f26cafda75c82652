// Token samplers: a port of mlx_lm/sample_utils.py (make_sampler and its filters) that draws
// the same tokens as mlx-lm for the same seed. Random draws use MLX's per-thread default key,
// so mx::random::seed(s) on the engine thread plays the role of Python's mx.random.seed(s).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <mlx/array.h>
#include <mlx/random.h>

namespace mlxcpp {

// make_sampler's arguments. Floating fields are double on purpose: mlx-lm computes
// `1.0 / temp` and `math.log(min_p)` on Python floats (doubles) before rounding to float32,
// and a float field already rounded would change the result for e.g. temp 1.1 or 0.85.
struct SamplerParams {
  double temp = 0.0;  // 0 -> greedy (argmax)
  double top_p = 0.0;  // applied when 0 < top_p < 1
  double min_p = 0.0;  // applied when != 0
  int min_tokens_to_keep = 1;
  int top_k = 0;  // applied when > 0; must then be < vocabulary size
  double xtc_probability = 0.0;  // applied when > 0
  double xtc_threshold = 0.1;
  std::vector<int> xtc_special_tokens;
};

// logprobs [B, V] -> tokens [B] (uint32, like mlx-lm).
using Sampler = std::function<mlx::core::array(const mlx::core::array& logprobs)>;

// Throws RequestError naming the field and value ("[sampler] top_p must be in [0, 1], got 1.5").
void validate_sampler_params(const SamplerParams& params);

// A sequence of its own for one request's random draws (a seeded request in a batch): made
// with KeySequence(seed), it draws exactly the keys mx::random::seed(seed) would give the
// default sequence. Null: the thread's default sequence.
using SamplerKeys = std::shared_ptr<mlx::core::random::KeySequence>;

// Same chain, order and conditions as mlx-lm: top_p, min_p, xtc, top_k, then categorical.
// The returned sampler owns its compiled filters (and `keys`); build it once per request.
Sampler make_sampler(const SamplerParams& params, SamplerKeys keys = nullptr);

// The pieces, each with mlx-lm's ops and (where mlx-lm uses @mx.compile) compiled the same way.
// These one-shot forms compile on every call; make_sampler reuses its compiled functions.
mlx::core::array greedy_sampler(const mlx::core::array& logprobs);
mlx::core::array apply_top_p(const mlx::core::array& logprobs, double top_p);
mlx::core::array apply_min_p(const mlx::core::array& logprobs, double min_p,
                             int min_tokens_to_keep = 1);
mlx::core::array apply_top_k(const mlx::core::array& logprobs, int top_k);
// Draws one uniform from the default key whether or not XTC fires (as mlx-lm does).
mlx::core::array apply_xtc(const mlx::core::array& logits, double xtc_probability,
                           double xtc_threshold, const std::vector<int>& xtc_special_tokens);
// Draws from the default key.
mlx::core::array categorical_sampling(const mlx::core::array& logits, double temp);

}  // namespace mlxcpp
