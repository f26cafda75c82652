#include "generate/embedder.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

void check_inputs(const Model& model, const std::vector<std::vector<int>>& inputs, const EmbedOptions& o) {
  if (o.dimensions < 0 || o.dimensions > model.hidden_size()) {
    throw RequestError(fmt::format("[embed] dimensions must be in [1, {}] (the model's hidden size), got {}",
                                   model.hidden_size(), o.dimensions));
  }
  if (o.step_size <= 0 || o.max_batch_tokens <= 0) {
    throw RequestError(fmt::format("[embed] step_size ({}) and max_batch_tokens ({}) must be positive", o.step_size,
                                   o.max_batch_tokens));
  }
  const int vocab = model.vocab_size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) throw RequestError(fmt::format("[embed] input {} is empty", i));
    for (int id : inputs[i]) {
      if (id < 0 || id >= vocab) {
        throw RequestError(fmt::format("[embed] input {}: token id {} is outside the vocabulary (size {})", i, id,
                                       vocab));
      }
    }
  }
}

// The inputs' indices grouped by length (shortest first), each group cut into batches of at most
// max_batch_tokens tokens (one row at least).
std::vector<std::vector<size_t>> batches(const std::vector<std::vector<int>>& inputs, int max_batch_tokens) {
  std::map<size_t, std::vector<size_t>> by_length;
  for (size_t i = 0; i < inputs.size(); ++i) by_length[inputs[i].size()].push_back(i);
  std::vector<std::vector<size_t>> out;
  for (const auto& [length, rows] : by_length) {
    const size_t per_batch = std::max<size_t>(1, static_cast<size_t>(max_batch_tokens) / length);
    for (size_t a = 0; a < rows.size(); a += per_batch) {
      out.emplace_back(rows.begin() + a, rows.begin() + std::min(rows.size(), a + per_batch));
    }
  }
  return out;
}

// [B, hidden] -> [B, D]: truncated to `dimensions`, then normalized.
mx::array pool(mx::array states, const EmbedOptions& o) {
  if (o.dimensions > 0 && o.dimensions < states.shape(1)) {
    states = mx::slice(states, {0, 0}, {states.shape(0), o.dimensions});
  }
  return o.normalize ? l2_normalize(states) : states;
}

}  // namespace

mx::array l2_normalize(const mx::array& x) {
  auto norm = mx::sqrt(mx::sum(mx::multiply(x, x), -1, /*keepdims=*/true));
  return mx::divide(x, mx::maximum(norm, mx::array(1e-12f, norm.dtype())));
}

mx::array last_token_states(const Model& model, const mx::array& ids, int step_size) {
  const int rows = ids.shape(0), length = ids.shape(1);
  std::optional<mx::array> h;
  if (length <= step_size) {
    h = model.hidden_states(ids, nullptr);
  } else {
    auto caches = model.make_cache();
    for (int a = 0; a < length; a += step_size) {
      h = model.hidden_states(mx::slice(ids, {0, a}, {rows, std::min(length, a + step_size)}), &caches);
      mx::eval(*h);
    }
  }
  const int n = h->shape(1);
  auto last = mx::squeeze(mx::slice(*h, {0, n - 1, 0}, {rows, n, h->shape(2)}), 1);
  return mx::astype(last, mx::float32);
}

std::vector<std::vector<float>> embed(const Model& model, const std::vector<std::vector<int>>& inputs,
                                      const EmbedOptions& opts) {
  check_inputs(model, inputs, opts);
  std::vector<std::vector<float>> out(inputs.size());
  for (const auto& rows : batches(inputs, opts.max_batch_tokens)) {
    const int length = static_cast<int>(inputs[rows.front()].size());
    std::vector<int32_t> flat;
    for (size_t r : rows) flat.insert(flat.end(), inputs[r].begin(), inputs[r].end());
    mx::array ids(flat.data(), {static_cast<int>(rows.size()), length}, mx::int32);
    auto e = mx::contiguous(pool(last_token_states(model, ids, opts.step_size), opts));
    mx::eval(e);
    const float* p = e.data<float>();
    const size_t dims = e.shape(1);
    for (size_t k = 0; k < rows.size(); ++k) out[rows[k]].assign(p + k * dims, p + (k + 1) * dims);
  }
  return out;
}

}  // namespace mlxcpp
