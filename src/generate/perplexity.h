// Perplexity the way llama-perplexity measures it, on an MLX model: the text's tokens (with BOS
// where the tokenizer adds one) cut into non-overlapping windows of `ctx` tokens, each window's
// first token replaced by BOS, one forward per window with no cache, and only the second half of
// each window scored (every scored token sees at least ctx/2 tokens of context). Optionally the
// KL divergence from a base model's distributions and how often their top tokens agree
// (llama-perplexity's --kl-divergence).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "models/model.h"

namespace mlxcpp {

struct PerplexityOptions {
  int ctx = 512;    // tokens a window
  int chunks = -1;  // windows to score (-1: as many as the text fills)
};

// Mean and standard error of a per-token quantity.
struct MeanError {
  double mean = 0, error = 0;  // error: NaN with fewer than 2 tokens
};

struct PerplexityResult {
  int ctx = 0, chunks = 0;
  long scored = 0;                  // tokens scored: chunks * (ctx - ctx/2 - 1)
  double ppl = 0, ppl_error = 0;    // exp(mean NLL); delta-method error (ppl * SE of the NLL)
  MeanError nll;                    // per-token negative log-likelihood (nats)
  std::vector<double> running_ppl;  // the perplexity after each window, as llama-perplexity prints
  // With a base model: KL(base || model) per token (nats) and the fraction of tokens whose
  // argmax agrees.
  std::optional<MeanError> kl, top1;
};

// Called after each window: (windows done, windows in all).
using PerplexityProgress = std::function<void(int, int)>;

// `tokens`: the whole text as the tokenizer encodes it with its special tokens. `bos`: the id put
// at each window's start (nullopt where the tokenizer adds no BOS: windows are scored as cut).
// RequestError for fewer than 2 * ctx tokens (llama-perplexity's minimum), ctx < 4, ids outside
// the vocabulary, or a base model with another vocabulary size.
PerplexityResult perplexity(const Model& model, const std::vector<int>& tokens, std::optional<int> bos,
                            const PerplexityOptions& opts, const Model* base = nullptr,
                            const PerplexityProgress& progress = {});

}  // namespace mlxcpp
