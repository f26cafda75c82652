#include "scheduler/model_text.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/output_parsers.h"
#include "core/errors.h"

namespace mlxcpp {

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

bool vocabulary_has_thinking(const Tokenizer& tok) { return detect_reasoning_format(tok).has_value(); }

OrderedJson chat_template_variables(const Tokenizer& tok, const OrderedJson& kwargs) {
  OrderedJson vars = special_token_variables(tok);
  if (!kwargs.contains("enable_thinking")) vars["enable_thinking"] = vocabulary_has_thinking(tok);
  for (const auto& [k, v] : kwargs.items()) vars[k] = v;
  return vars;
}

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
  return chat_template_variables(tok, kwargs);
}

ChatTemplate compile_chat_template(const Tokenizer& tok) {
  return ChatTemplate::compile(tok.chat_template(), (tok.dir() / "tokenizer_config.json").string());
}

}  // namespace mlxcpp
