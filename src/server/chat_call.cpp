#include "server/chat_call.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "chat/tool_grammar.h"
#include "scheduler/model_text.h"
#include "server/api_error.h"

namespace mlxcpp::server {

namespace {


std::vector<std::pair<int, float>> read_logit_bias(const Fields& f) {
  std::vector<std::pair<int, float>> out;
  const Json* lb = f.object("logit_bias");
  if (!lb) return out;
  if (lb->size() > 1024) f.fail("logit_bias", fmt::format("may hold at most 1024 entries, got {}", lb->size()));
  for (const auto& [k, v] : lb->items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != k.size() || id < 0 || id > kMaxInt32) {
      f.fail("logit_bias", fmt::format("keys must be token ids, got '{}'", k));
    }
    if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100) {
      f.fail("logit_bias", fmt::format("values must be numbers in [-100, 100], got {} for '{}'", brief(v), k));
    }
    out.emplace_back(static_cast<int>(id), v.get<float>());
  }
  return out;
}

}  // namespace

KvParams read_kv_params(const Fields& f) {
  KvParams kv;
  if (auto b = f.integer("kv_bits", 0, 8)) {
    if (*b != 0 && *b != 2 && *b != 4 && *b != 8) f.fail("kv_bits", fmt::format("must be 0 (no quantization), 2, 4 or 8, got {}", *b));
    kv.bits = static_cast<int>(*b);
  }
  if (auto g = f.integer("kv_group_size", 32, 128)) {
    if (*g != 32 && *g != 64 && *g != 128) f.fail("kv_group_size", fmt::format("must be 32, 64 or 128, got {}", *g));
    kv.group_size = static_cast<int>(*g);
  }
  if (auto s = f.integer("quantized_kv_start", 0, kMaxInt32)) kv.start = static_cast<int>(*s);
  return kv;
}

GenParams read_gen_params(const Fields& f, const std::vector<std::string>& max_tokens_keys) {
  GenParams g;
  g.kv = read_kv_params(f);
  g.sampling.temp = f.number("temperature", 0, 100).value_or(-1);
  g.sampling.top_p = f.number("top_p", 0, 1).value_or(-1);
  g.sampling.top_k = static_cast<int>(f.integer("top_k", -1, kMaxInt32).value_or(-2));
  g.sampling.min_p = f.number("min_p", 0, 1).value_or(-1);
  if (auto v = f.number("presence_penalty", -2, 2); v && *v != 0) g.processors.presence_penalty = static_cast<float>(*v);
  if (auto v = f.number("frequency_penalty", -2, 2); v && *v != 0) g.processors.frequency_penalty = static_cast<float>(*v);
  if (auto v = f.number("repetition_penalty", 0, 10)) {
    if (*v == 0) f.fail("repetition_penalty", "must be positive, got 0");
    if (*v != 1) g.processors.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = f.integer("repetition_context_size", 0, 1 << 20)) g.processors.repetition_context_size = static_cast<int>(*v);
  g.processors.logit_bias = read_logit_bias(f);
  if (auto s = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    g.seed = static_cast<uint64_t>(*s);
  }
  g.stops = f.str_or_list("stop", 16);
  for (size_t i = 0; i < g.stops.size(); ++i) {
    if (g.stops[i].empty()) f.fail("stop", fmt::format("item {} is an empty string", i));
  }
  g.n = static_cast<int>(f.integer("n", 1, 16).value_or(1));
  g.ignore_eos = f.boolean("ignore_eos").value_or(false);
  for (const auto& k : max_tokens_keys) {
    if (auto v = f.integer(k, 0, kMaxInt32)) {
      g.max_tokens = static_cast<int>(*v);
      break;
    }
  }
  return g;
}

void finish_gen_params(const GenParams& g, const sched::ServedModel& m, const ServerDefaults& d, sched::Request& out) {
  SamplerParams s = g.sampling;
  if (s.temp < 0) s.temp = d.temp;
  if (s.top_p < 0) s.top_p = d.top_p;
  if (s.top_k == -2) s.top_k = d.top_k;
  if (s.top_k < 0) s.top_k = 0;  // -1: off (vLLM's convention)
  if (s.min_p < 0) s.min_p = d.min_p;
  const int vocab = m.model().vocab_size();
  if (s.top_k >= vocab) s.top_k = 0;  // keeping every token is no filter
  for (const auto& [id, bias] : g.processors.logit_bias) {
    if (id >= vocab) {
      throw FieldError("logit_bias", fmt::format("'logit_bias' token id {} is outside the vocabulary (size {})", id, vocab));
    }
  }
  validate_sampler_params(s);
  validate_logits_processor_params(g.processors);
  if (g.grammar) {
    if (g.ignore_eos) throw FieldError("ignore_eos", "'ignore_eos' cannot be combined with 'response_format'");
    try {
      out.grammar = m.grammars->get(*g.grammar);
    } catch (const RequestError& e) {
      throw FieldError(g.grammar_param, e.what());
    } catch (const TokenizerError& e) {
      throw FieldError(g.grammar_param, std::string("structured output is not available for this model: ") + e.what());
    }
  }
  out.sampling = s;
  out.processors = g.processors;
  out.max_tokens = g.max_tokens.value_or(d.max_tokens);
  out.seed = g.seed;
  out.n = g.n;
  out.ignore_eos = g.ignore_eos;
  out.output.stops = g.stops;
  out.output.top_logprobs = g.top_logprobs;
  out.kv_bits = g.kv.bits;
  out.kv_group_size = g.kv.group_size;
  out.quantized_kv_start = g.kv.start;
}

void read_continuation(const Fields& f, ChatCall& call) {
  const auto agp = f.boolean("add_generation_prompt");
  call.continue_final_message = f.boolean("continue_final_message").value_or(false);
  call.add_generation_prompt = agp.value_or(!call.continue_final_message);
  if (!call.continue_final_message) return;
  if (call.add_generation_prompt) {
    f.fail("continue_final_message", "excludes 'add_generation_prompt': true (continue the last message, or open a "
                                     "new assistant turn)");
  }
  if (call.messages.empty() || call.messages.back().role != "assistant") {
    f.fail("continue_final_message", "needs the last message to be the assistant's");
  }
}

void check_model_field(const Fields& f, const sched::ServedModel& m) {
  auto name = f.str("model");
  if (name && *name != m.id) {
    throw HttpStatusError(404, "model", fmt::format("the model '{}' does not exist; this server serves '{}'", *name, m.id));
  }
}

std::vector<std::string> tool_names(const std::vector<Json>& tools) {
  std::vector<std::string> names;
  for (const auto& t : tools) names.push_back(t.at("function").at("name").get<std::string>());
  return names;
}

PreparedCall render_chat(const sched::ServedModel& m, const ChatCall& call) {
  if (!m.chat_template) {
    throw FieldError("messages", fmt::format("model '{}' has no chat template; use /v1/completions with a raw prompt "
                                             "(or start the server with --chat-template-file)", m.id));
  }
  PreparedCall p;
  const bool use_tools = !call.tools.empty() && call.tool_choice != "none";
  Json kwargs = m.default_template_kwargs;
  for (const auto& [k, v] : call.template_kwargs.items()) kwargs[k] = v;
  if (call.enable_thinking) kwargs["enable_thinking"] = *call.enable_thinking;
  ChatTemplateInputs in;
  in.messages = call.messages;
  if (use_tools) in.tools = call.tools;
  in.add_generation_prompt = call.add_generation_prompt;
  in.continue_final_message = call.continue_final_message;
  in.variables = chat_template_variables(m.tokenizer, kwargs);
  p.prompt_text = m.chat_template->render(in);

  auto& out = p.request.output;
  if (m.reasoning) {
    out.reasoning = m.reasoning;
    out.starts_in_reasoning = prompt_opens_reasoning(p.prompt_text, *m.reasoning);
  }
  // gpt-oss's channels carry the reasoning and the answer too, so its parser runs always.
  if (m.tool_format == ToolCallFormat::kGptOss) out.tool_format = m.tool_format;
  if (use_tools) {
    out.tool_format = m.tool_format;
    for (const auto& t : call.tools) out.tools.push_back(t.at("function"));
    if (call.tool_choice != "auto") {
      if (call.continue_final_message) {
        throw FieldError("tool_choice", "a forced tool call cannot continue the final assistant message");
      }
      const std::string name = call.tool_choice == "required" ? "" : call.tool_choice;
      out.forced_prefix = forced_tool_call_prefix(m.tool_format, name);
      if (out.forced_prefix.empty()) {
        throw FieldError("tool_choice", fmt::format("'tool_choice' {} cannot be enforced for model '{}' (its tool-call "
                                                    "format is '{}'); use \"auto\"",
                                                    brief(Json(call.tool_choice)), m.id, to_string(m.tool_format)));
      }
      p.prompt_text += out.forced_prefix;
      out.starts_in_reasoning = false;
    }
    p.tool_grammar = tool_call_grammar(m.tool_format, out.tools, call.tool_choice, &m.tokenizer);
  }
  auto ids = m.tokenizer.encode(p.prompt_text, false);
  p.request.prompt.assign(ids.begin(), ids.end());
  if (p.request.prompt.empty()) throw FieldError("messages", "the rendered prompt is empty");
  return p;
}

PreparedCall prepare_chat(const sched::Engine& engine, const ChatCall& call, const ServerDefaults& d) {
  PreparedCall p = render_chat(engine.model(), call);
  GenParams gen = call.gen;
  if (p.tool_grammar) {  // a forced or strict call: held to the tools' grammar
    if (gen.grammar) {
      throw FieldError(gen.grammar_param,
                       fmt::format("'{}' cannot be combined with a forced or strict tool call", gen.grammar_param));
    }
    gen.grammar = p.tool_grammar;
    gen.grammar_param = "tools";
  }
  finish_gen_params(gen, engine.model(), d, p.request);
  engine.check_admission(p.request.prompt.size(), p.request.max_tokens);
  return p;
}

PreparedCall prepare_completion(const sched::Engine& engine, const std::vector<int>& ids, const std::string& text,
                                const GenParams& gen, const ServerDefaults& d) {
  const auto& m = engine.model();
  PreparedCall p;
  finish_gen_params(gen, m, d, p.request);
  p.prompt_text = text;
  if (!ids.empty()) {
    p.request.prompt = ids;
  } else {
    auto enc = m.tokenizer.encode(text, true);
    p.request.prompt.assign(enc.begin(), enc.end());
  }
  if (p.request.prompt.empty()) throw FieldError("prompt", "'prompt' is empty");
  const int vocab = m.model().vocab_size();
  for (int id : p.request.prompt) {
    if (id < 0 || id >= vocab) {
      throw FieldError("prompt", fmt::format("'prompt' token id {} is outside the vocabulary (size {})", id, vocab));
    }
  }
  engine.check_admission(p.request.prompt.size(), p.request.max_tokens);
  return p;
}

}  // namespace mlxcpp::server
