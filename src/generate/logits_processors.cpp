// Port of make_logits_processors, make_repetition_penalty, make_presence_penalty and
// make_frequency_penalty from mlx_lm/sample_utils.py (mlx-lm 0.32.2). Scalars follow mlx's
// weak typing (a Python float becomes a float cast to the logits' dtype), and indexing is
// built as mlx's python/src/indexing.cpp builds it, so outputs match mlx-lm bit for bit.
#include "generate/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

constexpr const char* kTag = "[logits_processors]";

// mlx's to_array(python_float, dtype): float first, then the (floating) array dtype.
mx::array weak_float(float v, mx::Dtype dtype) {
  return mx::array(v, mx::issubdtype(dtype, mx::floating) ? dtype : mx::float32);
}

// The index arrays `a[:, ..., :, idx]` expands to: an arange per leading axis placed on its
// own dimension, then idx on the last one (mlx_gather_nd / mlx_scatter_args_nd).
std::vector<mx::array> leading_aranges(const mx::array& a, int ndim) {
  std::vector<mx::array> out;
  for (int i = 0; i + 1 < static_cast<int>(a.ndim()); ++i) {
    mx::Shape shape(ndim, 1);
    shape[i] = a.shape(i);
    out.push_back(mx::reshape(mx::arange(0, a.shape(i), 1, mx::uint32), shape));
  }
  return out;
}

void check_index(const mx::array& a, const mx::array& idx, const char* who) {
  if (a.ndim() < 1 || idx.ndim() != 1) {
    throw std::invalid_argument(fmt::format("[{}] expected a 1-D index into an array with at "
                                            "least one axis, got ndim {} and {}",
                                            who, idx.ndim(), a.ndim()));
  }
}

// Scatter arguments of `a[..., idx] (op)= v` (mlx_scatter_args_nd): indices broadcast to
// [leading..., n]; the update broadcast to that shape, then given a size-1 dim per axis of a.
std::pair<std::vector<mx::array>, mx::array> scatter_args(const mx::array& a, const mx::array& idx,
                                                          const mx::array& v) {
  int ndim = static_cast<int>(a.ndim());
  auto indices = leading_aranges(a, ndim);
  mx::Shape idx_shape(ndim, 1);
  idx_shape.back() = idx.shape(0);
  indices.push_back(mx::reshape(idx, idx_shape));
  indices = mx::broadcast_arrays(indices);

  int lead = 0;  // squeeze_leading_singletons
  while (lead < static_cast<int>(v.ndim()) && v.shape(lead) == 1) ++lead;
  std::vector<int> lead_axes(lead);
  for (int i = 0; i < lead; ++i) lead_axes[i] = i;
  auto up = mx::broadcast_to(mx::squeeze(v, lead_axes), indices[0].shape());
  auto up_shape = indices[0].shape();
  up_shape.insert(up_shape.end(), ndim, 1);
  return {indices, mx::reshape(up, up_shape)};
}

std::vector<int> all_axes(const mx::array& a) {
  std::vector<int> axes(a.ndim());
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int>(i);
  return axes;
}

// `tokens[-context_size:]` (context_size 0 keeps everything, like Python's `[-0:]`).
mx::array recent_tokens(const mx::array& tokens, int context_size) {
  int n = tokens.shape(0);
  int start = context_size == 0 ? 0 : std::max(0, n - context_size);
  return mx::slice(tokens, {start}, {n});
}

void check_tokens(const mx::array& tokens, const char* who) {
  if (tokens.ndim() != 1) {
    throw std::invalid_argument(
        fmt::format("[{}] token history must be 1-D, got ndim {}", who, tokens.ndim()));
  }
}

void check_context_size(const char* field, int context_size) {
  if (context_size < 0) {
    throw RequestError(fmt::format("{} {} must be >= 0, got {}", kTag, field, context_size));
  }
}

void check_finite(const char* field, const std::optional<float>& v) {
  if (v && !std::isfinite(*v)) {
    throw RequestError(fmt::format("{} {} must be a finite number, got {}", kTag, field, *v));
  }
}

}  // namespace

mx::array take_last_axis(const mx::array& a, const mx::array& idx) {
  check_index(a, idx, "take_last_axis");
  int ndim = static_cast<int>(a.ndim());
  auto indices = leading_aranges(a, ndim);
  indices.push_back(idx);
  auto out = mx::gather(a, indices, all_axes(a), mx::Shape(ndim, 1));
  std::vector<int> squeeze(ndim);
  for (int i = 0; i < ndim; ++i) squeeze[i] = ndim + i;
  return mx::squeeze(out, squeeze);
}

mx::array put_last_axis(const mx::array& a, const mx::array& idx, const mx::array& v) {
  check_index(a, idx, "put_last_axis");
  auto [indices, up] = scatter_args(a, idx, v);
  return mx::scatter(a, indices, up, all_axes(a));
}

mx::array add_last_axis(const mx::array& a, const mx::array& idx, const mx::array& v) {
  check_index(a, idx, "add_last_axis");
  auto [indices, up] = scatter_args(a, idx, v);
  return mx::scatter_add(a, indices, up, all_axes(a));
}

void validate_logits_processor_params(const LogitsProcessorParams& p) {
  std::set<int> seen;
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0) {
      throw RequestError(fmt::format("{} logit_bias token id must be >= 0, got {}", kTag, token));
    }
    if (!seen.insert(token).second) {
      throw RequestError(fmt::format("{} logit_bias lists token id {} twice", kTag, token));
    }
    if (!std::isfinite(bias)) {
      throw RequestError(
          fmt::format("{} logit_bias[{}] must be a finite number, got {}", kTag, token, bias));
    }
  }
  check_finite("repetition_penalty", p.repetition_penalty);
  check_finite("presence_penalty", p.presence_penalty);
  check_finite("frequency_penalty", p.frequency_penalty);
  if (p.repetition_penalty && *p.repetition_penalty < 0) {
    throw RequestError(fmt::format("{} repetition_penalty must be >= 0, got {}", kTag,
                                   *p.repetition_penalty));
  }
  check_context_size("repetition_context_size", p.repetition_context_size);
  check_context_size("presence_context_size", p.presence_context_size);
  check_context_size("frequency_context_size", p.frequency_context_size);
}

LogitsProcessor make_logit_bias(const std::vector<std::pair<int, float>>& logit_bias) {
  std::vector<int> ids;
  std::vector<float> values;
  for (const auto& [token, bias] : logit_bias) {
    ids.push_back(token);
    values.push_back(bias);
  }
  int n = static_cast<int>(ids.size());
  int max_id = n == 0 ? -1 : *std::max_element(ids.begin(), ids.end());
  // mx.array(list(keys)) / mx.array(list(values)): int32 ids, float32 values.
  auto indices = mx::array(ids.begin(), {n}, mx::int32);
  auto bias = mx::array(values.begin(), {n}, mx::float32);
  return [indices, bias, max_id](const mx::array&, const mx::array& logits) {
    if (max_id >= logits.shape(-1)) {
      throw RequestError(fmt::format("{} logit_bias token id {} is out of range for vocabulary "
                                     "size {}",
                                     kTag, max_id, logits.shape(-1)));
    }
    return add_last_axis(logits, indices, bias);  // logits.at[:, indices].add(values)
  };
}

LogitsProcessor make_repetition_penalty(float penalty, int context_size) {
  if (!(penalty >= 0)) {
    throw RequestError(fmt::format("{} repetition_penalty must be >= 0, got {}", kTag, penalty));
  }
  check_context_size("repetition_context_size", context_size);
  return [penalty, context_size](const mx::array& tokens, const mx::array& logits) {
    check_tokens(tokens, "repetition_penalty");
    if (tokens.shape(0) == 0) return logits;
    auto recent = recent_tokens(tokens, context_size);
    auto selected = take_last_axis(logits, recent);
    auto dt = selected.dtype();
    // `selected < 0` compares with Python int 0 cast to the logits' dtype.
    selected = mx::where(mx::less(selected, mx::array(int64_t{0}, dt)),
                         mx::multiply(selected, weak_float(penalty, dt)),
                         mx::divide(selected, weak_float(penalty, dt)));
    return put_last_axis(logits, recent, selected);
  };
}

LogitsProcessor make_presence_penalty(float penalty, int context_size) {
  check_context_size("presence_context_size", context_size);
  return [penalty, context_size](const mx::array& tokens, const mx::array& logits) {
    check_tokens(tokens, "presence_penalty");
    if (tokens.shape(0) == 0) return logits;
    auto recent = recent_tokens(tokens, context_size);
    // logits[:, tokens] -= penalty: gather, subtract, scatter (duplicates write one value).
    auto selected = take_last_axis(logits, recent);
    selected = mx::subtract(selected, weak_float(penalty, selected.dtype()));
    return put_last_axis(logits, recent, selected);
  };
}

LogitsProcessor make_frequency_penalty(float penalty, int context_size) {
  check_context_size("frequency_context_size", context_size);
  return [penalty, context_size](const mx::array& tokens, const mx::array& logits) {
    check_tokens(tokens, "frequency_penalty");
    if (tokens.shape(0) == 0) return logits;
    auto recent = recent_tokens(tokens, context_size);
    // logits.at[:, tokens].subtract(penalty) = scatter_add of the negated update, so each
    // occurrence subtracts once, in history order.
    auto [indices, up] = scatter_args(logits, recent, weak_float(penalty, logits.dtype()));
    return mx::scatter_add(logits, indices, mx::negative(up), all_axes(logits));
  };
}

std::vector<LogitsProcessor> make_logits_processors(const LogitsProcessorParams& p) {
  validate_logits_processor_params(p);
  std::vector<LogitsProcessor> out;
  if (!p.logit_bias.empty()) out.push_back(make_logit_bias(p.logit_bias));
  auto enabled = [](const std::optional<float>& v) { return v && *v != 0; };
  if (enabled(p.repetition_penalty)) {
    out.push_back(make_repetition_penalty(*p.repetition_penalty, p.repetition_context_size));
  }
  if (enabled(p.presence_penalty)) {
    out.push_back(make_presence_penalty(*p.presence_penalty, p.presence_context_size));
  }
  if (enabled(p.frequency_penalty)) {
    out.push_back(make_frequency_penalty(*p.frequency_penalty, p.frequency_context_size));
  }
  return out;
}

}  // namespace mlxcpp
