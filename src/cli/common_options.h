// Options generate and chat share (model loading, kernels, sampling), how they become a
// GenerationRequest, and the stats line mlx-lm prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "generate/stream_generate.h"

namespace mlxcpp::cli {

struct ModelArgs {
  std::string model;
  bool parity = false;
  std::string isa = "auto";
  int threads = 0;
  bool f32_dot = false;
  bool kv_f32 = false;
  bool mlx_layout = false;
};

struct SamplingArgs {
  int max_tokens = 256;
  double temp = 0.0, top_p = 0.0, min_p = 0.0;
  int top_k = 0;
  int min_tokens_to_keep = 1;
  double xtc_probability = 0.0, xtc_threshold = 0.1;
  std::optional<uint64_t> seed;
  std::optional<float> repetition_penalty;
  int repetition_context_size = 20;
  int prefill_step_size = 2048;
  std::optional<int> max_kv_size;
  std::optional<int> kv_bits;  // mlx-lm's --kv-bits, --kv-group-size, --quantized-kv-start
  int kv_group_size = 64;
  int quantized_kv_start = 5000;
  bool ignore_eos = false;
};

// What text prompts add: stop strings and extra chat-template variables.
struct TextArgs {
  std::vector<std::string> stops;
  std::string template_kwargs;  // a JSON object, "" = none
};

// --model, --parity, --isa, --threads, --f32-dot, --kv-f32, --mlx-layout.
void add_model_options(CLI::App* sub, ModelArgs& a);
// --max-tokens, --temp, --top-p, --top-k, --min-p, --min-tokens-to-keep, --xtc-*, --seed,
// --repetition-*, --prefill-step-size, --max-kv-size, --kv-bits, --kv-group-size,
// --quantized-kv-start, --ignore-eos.
void add_sampling_options(CLI::App* sub, SamplingArgs& a);
// --stop (repeatable), --chat-template-kwargs (alias --chat-template-config, mlx-lm's name).
void add_text_options(CLI::App* sub, TextArgs& a);

// --model as a folder: given as one, or a name `mlxcpp ls` shows (Error otherwise, naming it).
void resolve_model(ModelArgs& a);
LoadedModel load_model(const ModelArgs& a);
// Sampling, processors and options from the flags; prompt and eos ids are the caller's.
GenerationRequest make_request(const SamplingArgs& a);
// "1,2,3" -> ids; RequestError naming `option` for anything but non-negative integers.
std::vector<int> parse_ids(const std::string& text, const std::string& option);
// mlx-lm's numbers on one line (stderr).
void print_stats(const GenerationStats& stats);
// Ends the answer's line on stdout, then print_stats.
void end_answer(const GenerationStats& stats);

}  // namespace mlxcpp::cli
