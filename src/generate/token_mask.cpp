#include "generate/token_mask.h"

#include <algorithm>
#include <limits>

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// A mask narrower than the logits is an Error naming both widths.
void check_width(const std::vector<uint32_t>& words, int vocab) {
  if (words.size() * 32 < static_cast<size_t>(vocab)) {
    throw Error("[token_mask] a mask of " + std::to_string(words.size() * 32) + " tokens for logits of " +
                std::to_string(vocab));
  }
}

// words' bits as bytes (1 allowed) for tokens 0..vocab-1; whole words at once where they are all
// clear or all set (most of a grammar's mask).
void unpack_mask(const std::vector<uint32_t>& words, int vocab, uint8_t* out) {
  check_width(words, vocab);
  for (int i = 0; i < vocab; i += 32) {
    const uint32_t w = words[i / 32];
    const int n = std::min(32, vocab - i);
    if (w == 0u || w == ~0u) {
      std::fill(out + i, out + i + n, w == 0u ? 0 : 1);
    } else {
      for (int j = 0; j < n; ++j) out[i + j] = (w >> j) & 1u;
    }
  }
}

mx::array masked(const mx::array& logits, std::vector<uint8_t>& allowed, const mx::Shape& shape) {
  // bool has no array constructor from a pointer here; uint8 then a cast is one small copy.
  auto mask = mx::astype(mx::array(allowed.data(), shape, mx::uint8), mx::bool_);
  return mx::where(mask, logits, mx::array(-std::numeric_limits<float>::infinity(), logits.dtype()));
}

}  // namespace

GrammarMatcher grammar_matcher(const Grammar& grammar, int vocab, const char* op) {
  if (grammar.mask_words() * 32 < static_cast<size_t>(vocab)) {
    throw RequestError(std::string("[") + op + "] the grammar was compiled for " +
                       std::to_string(grammar.mask_words() * 32) + " tokens at most, the model has " +
                       std::to_string(vocab));
  }
  return grammar.matcher();
}

std::string grammar_failure(const GrammarMatcher& m, int32_t token) {
  return "[grammar] failed at token " + std::to_string(token) + ": " + m.error().value_or("no reason given");
}

mx::array apply_token_mask(const mx::array& logits, const std::vector<uint32_t>& words, const kernels::FastPath& fast) {
  if (fast && logits.ndim() == 2) return apply_token_masks(logits, std::vector(logits.shape(0), &words), fast);
  const int vocab = logits.shape(-1);
  std::vector<uint8_t> allowed(vocab);
  unpack_mask(words, vocab, allowed.data());
  return masked(logits, allowed, {vocab});
}

mx::array apply_token_masks(const mx::array& logits, const std::vector<const std::vector<uint32_t>*>& masks,
                            const kernels::FastPath& fast) {
  const int B = logits.shape(0), vocab = logits.shape(-1);
  if (static_cast<int>(masks.size()) != B) throw Error("[token_mask] one mask (or none) per row");
  if (fast) {  // the packed words as they are, a free row's all set
    const int w = (vocab + 31) / 32;
    std::vector<uint32_t> words(static_cast<size_t>(B) * w, ~0u);
    for (int b = 0; b < B; ++b) {
      if (!masks[b]) continue;
      check_width(*masks[b], vocab);
      std::copy_n(masks[b]->data(), w, words.data() + static_cast<size_t>(b) * w);
    }
    if (auto out = kernels::token_mask(logits, mx::array(words.data(), {B, w}, mx::uint32), fast)) return *out;
  }
  std::vector<uint8_t> allowed(static_cast<size_t>(B) * vocab, 1);
  for (int b = 0; b < B; ++b) {
    if (masks[b]) unpack_mask(*masks[b], vocab, allowed.data() + static_cast<size_t>(b) * vocab);
  }
  return masked(logits, allowed, {B, vocab});
}

}  // namespace mlxcpp
