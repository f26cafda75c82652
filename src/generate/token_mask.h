// A grammar's allowed-token bitmask applied to logits before the sampler: the tokens it forbids
// become -inf, so every sampler, penalty and logit_bias works on what the grammar allows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "generate/logits_processors.h"
#include "kernels/ops.h"
#include "tokenizer/grammar.h"

namespace mlxcpp {

// logits [B, V]; words: bit (i % 32) of words[i / 32] allows token i (the same mask for every row).
mlx::core::array apply_token_mask(const mlx::core::array& logits, const std::vector<uint32_t>& words,
                                  const kernels::FastPath& fast = nullptr);
// A matcher of `grammar` for a model whose logits are `vocab` wide; RequestError (op-tagged) when
// the grammar's token environment is narrower.
GrammarMatcher grammar_matcher(const Grammar& grammar, int vocab, const char* op);
// What the request reads when its grammar failed at `token` (llguidance rejected it, or gave up
// on the mask after it): "[grammar] failed at token N: <the matcher's error>".
std::string grammar_failure(const GrammarMatcher& m, int32_t token);
// logits [B, V] with row b masked by masks[b] (null: row b is free): one op for the batch (our
// TokenMaskPrimitive on the fast path, reading the packed words; stock ops in parity mode; the
// same values either way).
mlx::core::array apply_token_masks(const mlx::core::array& logits, const std::vector<const std::vector<uint32_t>*>& masks,
                                   const kernels::FastPath& fast = nullptr);

}  // namespace mlxcpp
