#include "cli/text_session.h"

#include <algorithm>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "core/errors.h"
#include "generate/stop_matcher.h"
#include "tokenizer/streaming_detokenizer.h"

namespace mlxcpp::cli {

std::string read_prompt_arg(const std::string& arg) {
  if (arg == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::string out;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] == '\\' && i + 1 < arg.size() && (arg[i + 1] == 'n' || arg[i + 1] == 't')) {
      out += arg[i + 1] == 'n' ? '\n' : '\t';
      ++i;
    } else {
      out += arg[i];
    }
  }
  return out;
}

TextResult stream_text(const Model& model, const Tokenizer& tok, GenerationRequest req,
                       const std::vector<std::string>& stops, std::ostream& out) {
  TextResult r;
  StreamingDetokenizer detok(tok);
  StopMatcher matcher(stops);
  auto emit = [&](const std::string& piece) {
    auto step = matcher.push(piece);
    r.text += step.text;
    out << step.text << std::flush;
    return !step.stopped;
  };
  // eos is checked here rather than in stream_generate so the caller learns which id ended the
  // answer (it is in the cache); mlx-lm counts it in the stats too.
  std::vector<int64_t> eos = std::move(req.eos_ids);
  req.eos_ids.clear();
  r.stats = stream_generate(model, req, [&](const GeneratedToken& t) {
    r.tokens.push_back(t.id);
    if (std::find(eos.begin(), eos.end(), t.id) != eos.end()) return false;
    detok.add_token(t.id);
    return emit(detok.last_segment());
  });
  if (!matcher.stopped()) {
    detok.finalize();
    if (emit(detok.last_segment())) {
      std::string tail = matcher.flush();
      r.text += tail;
      out << tail;
    }
  }
  out << std::flush;
  return r;
}

}  // namespace mlxcpp::cli
