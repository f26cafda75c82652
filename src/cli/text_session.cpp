#include "cli/text_session.h"

#include <algorithm>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "core/errors.h"
#include "scheduler/output_pipeline.h"

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
  // The server's output pipeline with stop strings only: detokenizer, then held-back stops.
  sched::OutputOptions opts;
  opts.stops = stops;
  sched::OutputPipeline pipe(tok, StreamingDetokenizer::kind_for(tok), opts, 0, "");
  auto emit = [&](const sched::Delta& d) {
    r.text += d.content;
    out << d.content << std::flush;
  };
  // eos is checked here rather than in stream_generate so the caller learns which id ended the
  // answer (it is in the cache); mlx-lm counts it in the stats too.
  std::vector<int64_t> eos = std::move(req.eos_ids);
  req.eos_ids.clear();
  r.stats = stream_generate(model, req, [&](const GeneratedToken& t) {
    r.tokens.push_back(t.id);
    if (std::find(eos.begin(), eos.end(), t.id) != eos.end()) return false;
    emit(pipe.push(t.id, std::nullopt));
    return !pipe.stopped();
  });
  emit(pipe.finish());
  return r;
}

}  // namespace mlxcpp::cli
