#include "cli/text_session.h"

#include <algorithm>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "core/errors.h"
#include "generate/stop_matcher.h"
#include "tokenizer/streaming_detokenizer.h"

namespace mlxcpp::cli {

std::vector<int64_t> merged_eos_ids(const Checkpoint& ckpt, const Tokenizer& tok) {
  std::vector<int64_t> eos = ckpt.eos_token_ids();
  for (int32_t id : tok.eos_token_ids()) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
  return eos;
}

std::vector<int> xtc_special_tokens(const Tokenizer& tok, const std::vector<int64_t>& eos) {
  auto nl = tok.encode("\n", true);
  std::vector<int> out(nl.begin(), nl.end());
  for (auto id : eos) out.push_back(static_cast<int>(id));
  return out;
}

namespace {

// mlx-lm's _infer_thinking: a vocabulary with thinking markers.
bool has_thinking(const Tokenizer& tok) {
  auto has = [&](const char* t) { return tok.token_to_id(t).has_value(); };
  static const std::pair<const char*, const char*> kPairs[] = {
      {"<think>", "</think>"}, {"<longcat_think>", "</longcat_think>"}, {"<|think:start|>", "<|think:end|>"}};
  for (const auto& [a, b] : kPairs) {
    if (has(a) && has(b)) return true;
  }
  if (has("<|channel>") && has("<channel|>")) return true;
  return has("<|open|>") && has("<|close|>") && has("<|sep|>") && has("<|end_of_msg|>");
}

}  // namespace

OrderedJson chat_template_variables(const Tokenizer& tok, const std::string& kwargs_json, const std::string& flag) {
  OrderedJson kwargs = OrderedJson::object();
  if (!kwargs_json.empty()) {
    try {
      kwargs = OrderedJson::parse(kwargs_json);
    } catch (const OrderedJson::parse_error& e) {
      throw ConfigError(fmt::format("{}: invalid JSON: {}", flag, e.what()));
    }
    if (!kwargs.is_object()) throw ConfigError(fmt::format("{}: expected a JSON object, got '{}'", flag, kwargs_json));
  }
  OrderedJson vars = special_token_variables(tok);
  if (!kwargs.contains("enable_thinking")) vars["enable_thinking"] = has_thinking(tok);
  for (const auto& [k, v] : kwargs.items()) vars[k] = v;
  return vars;
}

ChatTemplate compile_chat_template(const Tokenizer& tok) {
  return ChatTemplate::compile(tok.chat_template(), (tok.dir() / "tokenizer_config.json").string());
}

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
