// Logits processors: a port of make_logits_processors and the penalty factories of
// mlx_lm/sample_utils.py, built from the same gather/scatter calls as mlx's Python indexing
// (`logits[:, tokens]`, `logits.at[:, tokens].add(v)`) so results are bit-identical.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp {

struct LogitsProcessorParams {
  std::vector<std::pair<int, float>> logit_bias;  // token id -> additive bias
  std::optional<float> repetition_penalty;
  int repetition_context_size = 20;
  std::optional<float> presence_penalty;
  int presence_context_size = 20;
  std::optional<float> frequency_penalty;
  int frequency_context_size = 20;
};

// tokens: 1-D history (prompt + generated so far); logits [B, V] -> processed logits [B, V].
using LogitsProcessor =
    std::function<mlx::core::array(const mlx::core::array& tokens, const mlx::core::array& logits)>;

// Throws RequestError naming the field and value.
void validate_logits_processor_params(const LogitsProcessorParams& params);

// Same order and conditions as mlx-lm: logit_bias (when non-empty), then repetition, presence
// and frequency penalties (each when set and != 0).
std::vector<LogitsProcessor> make_logits_processors(const LogitsProcessorParams& params);

// The factories. A context size of 0 means the whole history, as `tokens[-0:]` does in mlx-lm.
LogitsProcessor make_logit_bias(const std::vector<std::pair<int, float>>& logit_bias);
LogitsProcessor make_repetition_penalty(float penalty, int context_size = 20);
LogitsProcessor make_presence_penalty(float penalty, int context_size = 20);
LogitsProcessor make_frequency_penalty(float penalty, int context_size = 20);

// Python's `a[..., idx]`, `a[..., idx] = v` and `a.at[..., idx].add(v)` for a 1-D index array,
// with the index/update arrays mlx's Python indexing builds (shared with the XTC filter).
mlx::core::array take_last_axis(const mlx::core::array& a, const mlx::core::array& idx);
mlx::core::array put_last_axis(const mlx::core::array& a, const mlx::core::array& idx,
                               const mlx::core::array& v);
mlx::core::array add_last_axis(const mlx::core::array& a, const mlx::core::array& idx,
                               const mlx::core::array& v);

}  // namespace mlxcpp
