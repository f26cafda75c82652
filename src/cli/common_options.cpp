#include "cli/common_options.h"

#include <algorithm>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "core/errors.h"
#include "kernels/cpu_features.h"
#include "models/catalog.h"

namespace mlxcpp::cli {

void add_model_options(CLI::App* sub, ModelArgs& a) {
  sub->add_option("--model", a.model, "MLX snapshot folder (config.json + safetensors), or a name `mlxcpp ls` shows")
      ->required();
  sub->add_flag("--parity", a.parity, "Stock MLX kernels with float32 activations (bit-identical to mlx-lm)");
  sub->add_option("--isa", a.isa, "CPU kernels' vector ISA: auto, avx512, avx2, scalar")->capture_default_str();
  sub->add_option("--threads", a.threads, "CPU kernel threads (0 = physical cores)")->capture_default_str();
  sub->add_flag("--f32-dot", a.f32_dot,
                "Quantized matmuls in float32 (default: integer dot products on int16 activations: "
                "decode GEMVs and prefill GEMMs, AVX2 and up)");
  sub->add_flag("--kv-f32", a.kv_f32, "Keep the KV cache in float32 on the CPU fast path (default: float16)");
  sub->add_flag("--mlx-layout", a.mlx_layout,
                "Keep quantized weights in MLX's layout on the CPU fast path (default: 4/5/6/8-bit ones repacked at load "
                "for the integer kernels)");
}

void add_sampling_options(CLI::App* sub, SamplingArgs& a) {
  sub->add_option("--max-tokens,-m", a.max_tokens, "Maximum tokens to generate")->capture_default_str();
  sub->add_option("--temp", a.temp, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-p", a.top_p, "Nucleus sampling threshold (0 = off)")->capture_default_str();
  sub->add_option("--top-k", a.top_k, "Keep only the k most likely tokens (0 = off)")->capture_default_str();
  sub->add_option("--min-p", a.min_p, "Minimum probability relative to the top token (0 = off)")->capture_default_str();
  sub->add_option("--min-tokens-to-keep", a.min_tokens_to_keep, "Minimum tokens min-p keeps")->capture_default_str();
  sub->add_option("--xtc-probability", a.xtc_probability, "Probability of XTC sampling per token (0 = off)")
      ->capture_default_str();
  sub->add_option("--xtc-threshold", a.xtc_threshold, "Probability threshold of XTC's candidates")->capture_default_str();
  sub->add_option("--seed", a.seed, "PRNG seed (mx.random.seed)");
  sub->add_option("--repetition-penalty", a.repetition_penalty, "Penalty for repeated tokens");
  sub->add_option("--repetition-context-size", a.repetition_context_size, "Tokens the repetition penalty looks back")
      ->capture_default_str();
  sub->add_option("--prefill-step-size", a.prefill_step_size, "Prompt tokens per prefill chunk")->capture_default_str();
  sub->add_option("--max-kv-size", a.max_kv_size, "Bound the KV cache (rotating, keeps 4 tokens)");
  sub->add_option("--kv-bits", a.kv_bits, "Quantize the KV cache to 2, 4 or 8 bits (mlx-lm's QuantizedKVCache)");
  sub->add_option("--kv-group-size", a.kv_group_size, "Group size of the KV cache quantization")->capture_default_str();
  sub->add_option("--quantized-kv-start", a.quantized_kv_start, "Tokens in the cache before it is quantized")
      ->capture_default_str();
  sub->add_flag("--ignore-eos", a.ignore_eos, "Do not stop at the end-of-sequence ids");
}

void add_text_options(CLI::App* sub, TextArgs& a) {
  sub->add_option("--stop", a.stops, "Stop before this text (repeatable; not printed)");
  sub->add_option("--chat-template-kwargs,--chat-template-config", a.template_kwargs,
                  "JSON object of extra chat-template variables, e.g. '{\"enable_thinking\": false}'");
}

std::vector<int> parse_ids(const std::string& text, const std::string& option) {
  std::vector<int> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int>(v));
    } catch (const std::exception&) {
      throw RequestError(fmt::format("{}: '{}' is not a non-negative integer", option, item));
    }
  }
  if (ids.empty()) throw RequestError(fmt::format("{}: no token ids given", option));
  return ids;
}

void resolve_model(ModelArgs& a) {
  if (!a.model.empty()) a.model = resolve_model_dir(a.model).string();
}

LoadedModel load_model(const ModelArgs& a) {
  ModelOptions mopts;
  mopts.parity = a.parity;
  mopts.kernels.isa = kernels::parse_isa(a.isa);
  mopts.kernels.threads = a.threads;
  mopts.kernels.int_dot = !a.f32_dot;
  mopts.kernels.kv_f16 = !a.kv_f32;
  mopts.kernels.repack = !a.mlx_layout;
  return mlxcpp::load_model(a.model, mopts);
}

GenerationRequest make_request(const SamplingArgs& a) {
  GenerationRequest req;
  req.sampling.temp = a.temp;
  req.sampling.top_p = a.top_p;
  req.sampling.min_p = a.min_p;
  req.sampling.top_k = a.top_k;
  req.sampling.min_tokens_to_keep = a.min_tokens_to_keep;
  req.sampling.xtc_probability = a.xtc_probability;
  req.sampling.xtc_threshold = a.xtc_threshold;
  req.processors.repetition_penalty = a.repetition_penalty;
  req.processors.repetition_context_size = a.repetition_context_size;
  req.options.max_tokens = a.max_tokens;
  req.options.prefill_step_size = a.prefill_step_size;
  req.options.max_kv_size = a.max_kv_size;
  if (a.kv_bits) {
    req.options.kv_quantization = KvQuantization{*a.kv_bits, a.kv_group_size, a.quantized_kv_start};
    check_kv_quantization(*req.options.kv_quantization);
  }
  req.seed = a.seed;
  return req;
}

void print_stats(const GenerationStats& stats) {
  std::cerr << fmt::format(
      "prompt: {} tokens, {:.3f} tokens-per-sec | generation: {} tokens, {:.3f} tokens-per-sec | "
      "peak memory: {:.3f} GB | finish: {}\n",
      stats.prompt_tokens, stats.prompt_tps, stats.generation_tokens, stats.generation_tps, stats.peak_memory_gb,
      stats.finish_reason);
  if (stats.mask_seconds.empty()) return;
  // Structured output: what computing the token masks cost (on the host, while the forward runs).
  auto us = stats.mask_seconds;
  for (auto& v : us) v *= 1e6;
  const double first = us.front();
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * (us.size() - 1) + 0.5))]; };
  double sum = 0;
  for (double v : us) sum += v;
  std::cerr << fmt::format("grammar: {} masks, mean {:.1f} us, p50 {:.1f} us, p99 {:.1f} us, max {:.1f} us | "
                           "first mask {:.1f} us after a {:.1f} us matcher\n",
                           us.size(), sum / us.size(), pct(0.5), pct(0.99), us.back(), first, stats.matcher_seconds * 1e6);
}

void end_answer(const GenerationStats& stats) {
  std::cout << std::endl;
  print_stats(stats);
}

}  // namespace mlxcpp::cli
