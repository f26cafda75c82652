// The text side of generate and chat, as mlx-lm does it: prompt arguments, and streaming through
// the output pipeline (mlx-lm's detokenizer, held-back stop strings) to an output stream. Eos ids
// and chat-template variables come from scheduler/model_text.h.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "scheduler/model_text.h"
#include "generate/stream_generate.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::cli {

// mlx-lm's main(): literal "\n" / "\t" escapes become characters; "-" reads stdin.
std::string read_prompt_arg(const std::string& arg);

struct TextResult {
  std::string text;         // what was printed (stop strings excluded)
  std::vector<int> tokens;  // every token the model produced (an eos included): the cache holds them
  GenerationStats stats;
};

// Generates from req.prompt and writes the text to `out` as it arrives. req.eos_ids end the
// answer (not printed); `stops` end it right before the first stop string.
TextResult stream_text(const Model& model, const Tokenizer& tok, GenerationRequest req,
                       const std::vector<std::string>& stops, std::ostream& out);

}  // namespace mlxcpp::cli
