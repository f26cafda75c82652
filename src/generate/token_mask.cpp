#include "generate/token_mask.h"

#include <limits>

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

mx::array apply_token_mask(const mx::array& logits, const std::vector<uint32_t>& words) {
  const int vocab = logits.shape(-1);
  if (words.size() * 32 < static_cast<size_t>(vocab)) {
    throw Error("[token_mask] a mask of " + std::to_string(words.size() * 32) + " tokens for logits of " +
                std::to_string(vocab));
  }
  std::vector<uint8_t> allowed(vocab);
  for (int i = 0; i < vocab; ++i) allowed[i] = (words[i / 32] >> (i % 32)) & 1u;
  // bool has no array constructor from a pointer here; uint8 then a cast is one small copy.
  auto mask = mx::astype(mx::array(allowed.data(), {vocab}, mx::uint8), mx::bool_);
  return mx::where(mask, logits, mx::array(-std::numeric_limits<float>::infinity(), logits.dtype()));
}

LogitsProcessor make_grammar_processor(const std::shared_ptr<const Grammar>& grammar) {
  struct State {
    GrammarMatcher matcher;
    int seen = -1;  // history tokens already consumed (-1: before the first call)
  };
  auto state = std::make_shared<State>(State{grammar->matcher()});
  return [state](const mx::array& tokens, const mx::array& logits) {
    const int n = static_cast<int>(tokens.size());
    if (state->seen >= 0 && n > state->seen) {
      auto added = mx::astype(mx::slice(tokens, {state->seen}, {n}), mx::int32);
      mx::eval(added);
      const int32_t* ids = added.data<int32_t>();
      for (int i = 0; i < n - state->seen; ++i) {
        if (!state->matcher.consume(ids[i])) {
          throw Error("[generate] the grammar rejected token " + std::to_string(ids[i]) + ": " +
                      state->matcher.error().value_or("no reason given"));
        }
      }
    }
    state->seen = n;
    return apply_token_mask(logits, state->matcher.compute_mask());
  };
}

}  // namespace mlxcpp
