#include "models/registry.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mlx/transforms.h>
#include <spdlog/spdlog.h>

#include "core/elapsed.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Gemma 4's chat template: turns <|turn>role ... <turn|>, tool declarations <|tool>...<tool|>,
// calls <|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>, results <|tool_response>...<tool_response|>,
// <|think|> in the system turn to turn thinking on, thoughts <|channel>thought ... <channel|>
// (mlx-lm: tool_parsers/gemma4.py, tokenizer_utils._infer_thinking).
ChatMarkers gemma4_chat() {
  return {"gemma4",
          "<|channel>thought",
          "<channel|>",
          {"<|turn>", "<turn|>", "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
           "<tool_response|>", "<|\"|>", "<|channel>", "<channel|>", "<|think|>"}};
}

}  // namespace

const std::vector<FamilyRecord>& families() {
  static const std::vector<FamilyRecord> kFamilies = {
      {"llama", "llama", load_llama},
      {"mistral", "llama", load_llama},
      {"qwen2", "llama", load_llama},
      {"qwen3", "llama", load_llama},
      {"smollm3", "llama", load_llama},
      {"phi3", "llama", load_llama},
      {"minicpm", "llama", load_llama},
      {"olmo2", "llama", load_llama},
      {"granite", "llama", load_llama},
      {"ministral3", "llama", load_llama},
      {"mistral3", "llama", load_llama},
      {"qwen3_moe", "llama", load_llama},
      {"glm4", "llama", load_llama},
      {"glm4_moe", "llama", load_llama},
      {"gemma3_text", "gemma3", load_gemma3},
      {"gemma3", "gemma3", load_gemma3},
      {"qwen3_5", "qwen3_5", load_qwen3_5},
      {"qwen3_5_moe", "qwen3_5", load_qwen3_5},
      {"qwen3_next", "qwen3_5", load_qwen3_5},
      {"gemma4_text", "gemma4", load_gemma4, gemma4_chat()},
      {"gemma4", "gemma4", load_gemma4, gemma4_chat()},
  };
  return kFamilies;
}

const FamilyRecord* find_family(const std::string& model_type) {
  for (const auto& f : families()) {
    if (f.model_type == model_type) return &f;
  }
  return nullptr;
}

std::vector<FamilySummary> family_summaries() {
  // What each family file runs beyond plain causal text generation (every family: parity mode
  // bit-identical to mlx-lm, the fused CPU fast path, batching; tools and thinking come from the
  // chat template, not the family).
  static const std::vector<std::pair<std::string, std::string>> kCapabilities = {
      {"llama", "text; sliding-window layers (mistral/qwen2 configs), NoPE layers (smollm3), q/k norms (qwen3, "
                "olmo2), fused qkv/gate_up and longrope (phi3), scaled embeddings/residuals/logits (minicpm, granite), "
                "post-norms (olmo2), query temperature (ministral3), mistral3's text model, mixture of experts (qwen3_moe: "
                "softmax router; glm4_moe: grouped sigmoid router, shared experts, dense first layers), glm4's "
                "input+output norms and partial RoPE; GGUF import"},
      {"gemma3", "text; sliding-window and global layers, q/k norms, sandwich norms; GGUF import"},
      {"qwen3_5", "text; gated-DeltaNet linear-attention layers (causal conv, delta-rule recurrence in a recurrent "
                  "cache; one fused primitive on the CPU fast path) interleaved with gated full attention, partial "
                  "RoPE, sparse MLPs with a gated shared expert (qwen3_5_moe, qwen3_next)"},
      {"gemma4", "text (gemma4's text model); sliding and full layers, proportional partial RoPE, q/k/v norms, KV "
                 "sharing, per-layer input embeddings, logit softcapping"},
  };
  std::vector<FamilySummary> out;
  for (const auto& r : families()) {
    auto it = std::find_if(out.begin(), out.end(), [&](const FamilySummary& f) { return f.family == r.family; });
    if (it == out.end()) {
      std::string caps = "text";
      for (const auto& [fam, c] : kCapabilities) {
        if (fam == r.family) caps = c;
      }
      out.push_back({r.family, {}, caps});
      it = out.end() - 1;
    }
    it->model_types.push_back(r.model_type);
  }
  return out;
}

LoadedModel load_model(const std::filesystem::path& dir, const ModelOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  Checkpoint ckpt = Checkpoint::open(dir);
  const FamilyRecord* fam = find_family(ckpt.model_type());
  if (fam == nullptr) {
    std::vector<std::string> known;
    for (const auto& f : families()) known.push_back(f.model_type);
    throw ConfigError(fmt::format("{}: field 'model_type': '{}' is not supported (known: {})",
                                  ckpt.config_file().string(), ckpt.model_type(), fmt::join(known, ", ")));
  }
  WeightMap weights = ckpt.load_weights();
  // On CPU both modes run float32 activations (MLX's CPU quantized matmul accumulates bf16 in
  // bf16); elsewhere only parity mode casts.
  const bool cpu = mx::default_device() == mx::Device::cpu;
  LoadContext ctx{weights, ckpt.quant(), (opts.parity || cpu) ? std::optional<mx::Dtype>(mx::float32) : std::nullopt};
  if (cpu && !opts.parity) ctx.fast = std::make_shared<const kernels::KernelContext>(opts.kernels);
  spdlog::debug("load: checkpoint opened {:.1f} ms", ms_since(t0));
  auto model = fam->load(ckpt, ctx);
  weights.expect_consumed();
  spdlog::debug("load: graph built {:.1f} ms", ms_since(t0));
  auto params = model->parameters();
  try {
    mx::eval(params);
  } catch (const std::exception& e) {
    throw WeightError(fmt::format("{}: reading the weights failed: {}", dir.string(), e.what()));
  }
  model->set_fast_path(ctx.fast);
  spdlog::debug("load: weights evaluated {:.1f} ms", ms_since(t0));
  return LoadedModel{std::move(model), std::move(ckpt), ctx.fast};
}

}  // namespace mlxcpp
