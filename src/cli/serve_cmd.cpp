// `mlxcpp serve`: the OpenAI (chat/completions, completions, Responses) and Anthropic (messages)
// APIs over one model on a local HTTP server. Prints "ready at URL" once listening.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/elapsed.h"
#include "core/errors.h"
#include "scheduler/model_text.h"
#include "server/server_app.h"

namespace mlxcpp::cli {

namespace {

struct ServeArgs {
  ModelArgs model;
  server::ServeOptions serve;
  sched::ServeModelOptions served;
  std::string template_kwargs;
  std::string allowed_origins;
  double queue_timeout_s = 0;
  double header_timeout_s = 10, body_timeout_s = 60, idle_timeout_s = 60;
  double prompt_cache_gb = -1;
  double memory_budget_gb = -1;
  std::string log_level = "info";
  std::optional<int> kv_bits;
  int kv_group_size = 64;
  int quantized_kv_start = 0;
};

int64_t physical_memory() { return static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE); }

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

int run(ServeArgs& a, std::chrono::steady_clock::time_point t0) {
  spdlog::set_level(spdlog::level::from_str(a.log_level));
  auto& s = a.serve;
  if (a.serve.http.api_key.empty()) {
    if (const char* k = std::getenv("MLXCPP_API_KEY")) s.http.api_key = k;
  }
  s.http.allowed_origins = split_list(a.allowed_origins);
  auto ms = [](double secs) { return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000)); };
  s.http.header_timeout = ms(a.header_timeout_s);
  s.http.body_timeout = ms(a.body_timeout_s);
  s.http.idle_timeout = ms(a.idle_timeout_s);
  s.engine.queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.queue_timeout_s * 1000));
  const int64_t ram = physical_memory();
  s.engine.prompt_cache_bytes = a.prompt_cache_gb >= 0 ? static_cast<int64_t>(a.prompt_cache_gb * 1e9) : ram / 4;
  s.engine.memory_budget = a.memory_budget_gb >= 0 ? static_cast<int64_t>(a.memory_budget_gb * 1e9) : ram * 9 / 10;
  s.engine.prefill_step_size = std::max(1, s.engine.prefill_step_size);
  if (a.kv_bits) {  // the requests' default (each may set kv_bits / kv_group_size / quantized_kv_start)
    s.engine.kv_quantization = KvQuantization{*a.kv_bits, a.kv_group_size, a.quantized_kv_start};
    try {
      check_kv_quantization(*s.engine.kv_quantization);
    } catch (const RequestError& e) {
      throw ConfigError(fmt::format("--kv-bits / --kv-group-size / --quantized-kv-start: {}", e.what()));
    }
  }
  if (!a.template_kwargs.empty()) {
    try {
      a.served.template_kwargs = OrderedJson::parse(a.template_kwargs);
    } catch (const std::exception& e) {
      throw ConfigError(fmt::format("--chat-template-kwargs: invalid JSON: {}", e.what()));
    }
    if (!a.served.template_kwargs.is_object()) throw ConfigError("--chat-template-kwargs: expected a JSON object");
  }
  ModelOptions mopts;
  mopts.parity = a.model.parity;
  mopts.kernels.isa = kernels::parse_isa(a.model.isa);
  mopts.kernels.threads = a.model.threads;
  mopts.kernels.int_dot = !a.model.f32_dot;
  mopts.kernels.kv_f16 = !a.model.kv_f32;
  mopts.kernels.repack = !a.model.mlx_layout;
  auto model = sched::load_served_model(a.model.model, mopts, a.served);
  spdlog::debug("model loaded {:.1f} ms after start", ms_since(t0));
  return server::run_server(model, s, [&](const std::string& url) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << fmt::format("mlxcpp serve: ready at {} (model {}, tool calls: {}, {:.2f} s)", url, model.id,
                             to_string(model.tool_format), secs)
              << std::endl;
  });
}

}  // namespace

Action add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand("serve", "Serve the OpenAI and Anthropic APIs over HTTP");
  add_model_options(sub, a->model);
  auto& h = a->serve.http;
  sub->add_option("--host", h.host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", h.port, "Port (0: any free port)")->capture_default_str();
  sub->add_option("--api-key", h.api_key, "Require this key (Bearer or x-api-key; env MLXCPP_API_KEY)");
  sub->add_option("--allowed-origins", a->allowed_origins, "CORS origins, comma-separated ('*': any)");
  sub->add_option("--max-body-bytes", h.max_body_bytes, "Largest request body")->capture_default_str();
  sub->add_option("--header-timeout", a->header_timeout_s, "Seconds to receive a request's headers")->capture_default_str();
  sub->add_option("--body-timeout", a->body_timeout_s, "Seconds to receive a request's body")->capture_default_str();
  sub->add_option("--idle-timeout", a->idle_timeout_s, "Seconds a kept-alive connection may idle")->capture_default_str();
  sub->add_option("--model-id,--served-model-name", a->served.id, "Model name clients use (default: the folder's)");
  sub->add_option("--chat-template-file", a->served.chat_template_file, "Use this Jinja chat template instead");
  sub->add_option("--chat-template-kwargs", a->template_kwargs, "Default chat-template variables (a JSON object)");
  sub->add_option("--tool-call-format", a->served.tool_call_format,
                  "auto (from the template), none, hermes, qwen3_coder, llama3_json, mistral, mistral_json, gemma, "
                  "gemma4, gpt_oss")
      ->capture_default_str();
  auto& e = a->serve.engine;
  sub->add_option("--prompt-cache-gb", a->prompt_cache_gb, "Prompt cache cap in GB (default: a quarter of RAM)");
  sub->add_option("--memory-budget-gb", a->memory_budget_gb,
                  "Weights + every running request's KV cache must fit; others wait (default: 90% of RAM)");
  sub->add_option("--max-batch", e.max_batch, "Sequences generated together (continuous batching)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--prefill-batch", e.prefill_batch, "Prompts prefilled together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--decode-prefill-step", e.decode_prefill_step,
                  "While other sequences decode, prompt chunks take about a decode step's time, at most "
                  "this many tokens (0: --prefill-step-size)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--min-prefill-chunk", e.min_prefill_chunk,
                  "While other sequences decode, prompt chunks take at least this many tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-prefill-share", e.max_prefill_share,
                  "With prompts queued, a prompt chunk may take up to this many decode steps' time (1 + the number "
                  "queued, at most this; 1: always about one)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 64.0));
  sub->add_option("--max-queue", e.max_queue, "Requests waiting beyond the running ones; more get 429")->capture_default_str();
  sub->add_option("--queue-timeout", a->queue_timeout_s, "Seconds a request may wait in the queue (0: no limit)");
  sub->add_option("--prefill-step-size", e.prefill_step_size, "Prompt tokens per prefill chunk")->capture_default_str();
  sub->add_option("--kv-bits", a->kv_bits,
                  "Hold requests' KV caches quantized to 2, 4 or 8 bits from their first token (batched; a request's "
                  "kv_bits overrides it, 0 for a float cache)");
  sub->add_option("--kv-group-size", a->kv_group_size, "Group size of the quantized KV cache")->capture_default_str();
  sub->add_option("--quantized-kv-start", a->quantized_kv_start,
                  "Quantize only the caches of requests whose prompt holds at least this many tokens")
      ->capture_default_str();
  auto& d = a->serve.defaults;
  sub->add_option("--temp", d.temp, "Default temperature")->capture_default_str();
  sub->add_option("--top-p", d.top_p, "Default top_p")->capture_default_str();
  sub->add_option("--top-k", d.top_k, "Default top_k")->capture_default_str();
  sub->add_option("--min-p", d.min_p, "Default min_p")->capture_default_str();
  sub->add_option("--max-tokens", d.max_tokens, "Default max_tokens")->capture_default_str();
  sub->add_option("--log-level", a->log_level, "trace, debug, info, warn, error")->capture_default_str();
  sub->add_flag("--log-prompts", a->serve.engine.log_prompts, "Log each prompt's text (with --log-level debug)");
  auto t0 = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  return [a, t0] {
    const std::string given = a->model.model;
    resolve_model(a->model);
    // A name from `mlxcpp ls` is the model's id (a cache snapshot's folder is a commit hash).
    if (a->served.id.empty() && a->model.model != given) a->served.id = given;
    return run(*a, *t0);
  };
}

}  // namespace mlxcpp::cli
