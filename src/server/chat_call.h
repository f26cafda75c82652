// The protocol-neutral form of a generation call, filled by every translator (OpenAI chat and
// completions, Responses, Anthropic messages), and its preparation into an engine request:
// chat template, tools, reasoning switch, forced tool calls, tokenization, admission.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/message.h"
#include "scheduler/engine.h"
#include "server/json_fields.h"

namespace mlxcpp::server {

// Sampling and limits, as the protocols name them.
// Per-request KV-cache quantization (mlx-lm's kv_bits, kv_group_size, quantized_kv_start; an
// extension of every endpoint): unset fields take the server's --kv-bits / --kv-group-size /
// --quantized-kv-start. kv_bits 0 asks for a float cache.
struct KvParams {
  std::optional<int> bits, group_size, start;
};
// Reads kv_bits (0, 2, 4 or 8), kv_group_size (32, 64 or 128) and quantized_kv_start (>= 0);
// FieldError naming the field otherwise.
KvParams read_kv_params(const Fields& f);

struct GenParams {
  SamplerParams sampling;
  LogitsProcessorParams processors;
  std::optional<int> max_tokens;     // nullopt: the server's default
  std::optional<uint64_t> seed;
  int n = 1;
  std::vector<std::string> stops;
  int top_logprobs = -1;             // -1: none
  bool ignore_eos = false;           // vLLM / llama-server extension: generate past EOS
  std::optional<GrammarSpec> grammar; // response_format json_object / json_schema
  std::string grammar_param = "response_format";  // the field a grammar error names
  KvParams kv;                        // kv_bits / kv_group_size / quantized_kv_start
};

// Server-wide defaults for what a request leaves out (mlx_lm.server's flags).
struct ServerDefaults {
  double temp = 0.0;
  double top_p = 1.0;
  int top_k = 0;
  double min_p = 0.0;
  int max_tokens = 512;
};

struct ChatCall {
  std::vector<Message> messages;
  std::vector<Json> tools;          // OpenAI form {"type": "function", "function": {name, description, parameters}}
  std::string tool_choice = "auto"; // "auto", "none", "required", or a tool's name
  Json template_kwargs = Json::object();
  std::optional<bool> enable_thinking;  // reasoning on/off (reasoning_effort, thinking)
  bool add_generation_prompt = true;
  // Assistant prefill: the reply continues the last (assistant) message (transformers'
  // continue_final_message; add_generation_prompt off).
  bool continue_final_message = false;
  GenParams gen;
};

struct PreparedCall {
  sched::Request request;
  std::string prompt_text;  // the rendered prompt (echo, debugging)
  // A forced call (tool_choice required / named) or strict tools under "auto": the grammar the
  // output follows (chat/tool_grammar.h); nullopt where the format has none or nothing is strict.
  std::optional<GrammarSpec> tool_grammar;
};

// Reads the sampling fields shared by the OpenAI-shaped bodies: temperature, top_p, top_k, min_p,
// presence/frequency/repetition penalties, logit_bias, seed, stop, n. `max_tokens_keys` are
// tried in order ("max_completion_tokens", "max_tokens").
GenParams read_gen_params(const Fields& f, const std::vector<std::string>& max_tokens_keys);

// Applies server defaults and checks values against the model (vocabulary, sampler limits).
void finish_gen_params(const GenParams& g, const sched::ServedModel& m, const ServerDefaults& d, sched::Request& out);

// The chat template rendered for `call` (tools, reasoning switch, a forced call's opening) and
// tokenized, with the output options that follow from it; no sampling checks, no admission.
PreparedCall render_chat(const sched::ServedModel& m, const ChatCall& call);

// render_chat + the sampling fields, checked, and admission (413).
PreparedCall prepare_chat(const sched::Engine& engine, const ChatCall& call, const ServerDefaults& d);
// A raw prompt (text or token ids) for /v1/completions.
PreparedCall prepare_completion(const sched::Engine& engine, const std::vector<int>& ids, const std::string& text,
                                const GenParams& gen, const ServerDefaults& d);

// vLLM's add_generation_prompt / continue_final_message fields of an OpenAI-shaped body (the
// latter needs the last message to be the assistant's; both true is a FieldError).
void read_continuation(const Fields& f, ChatCall& call);

// The body's "model": absent, or the served model's id (else HttpStatusError 404 naming the
// model that is served).
void check_model_field(const Fields& f, const sched::ServedModel& m);

// The tool names of an OpenAI-form tool list (a tool_choice naming another is a FieldError).
std::vector<std::string> tool_names(const std::vector<Json>& tools);

}  // namespace mlxcpp::server
