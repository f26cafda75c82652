#include "generate/stream_generate.h"

#include <algorithm>
#include <chrono>

#include <mlx/memory.h>
#include <mlx/random.h>

namespace mx = mlx::core;

namespace mlxcpp {

GenerationStats stream_generate(const Model& model, const GenerationRequest& req,
                                const std::function<bool(const GeneratedToken&)>& on_token) {
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  if (req.seed) mx::random::seed(*req.seed);
  Generator gen(model, req.prompt, make_sampler(req.sampling), make_logits_processors(req.processors),
                req.options, req.caches ? std::move(*req.caches) : LayerCaches{});
  GenerationStats stats;
  stats.prompt_tokens = static_cast<int>(req.prompt.size());
  stats.finish_reason = "length";
  auto tic = clock::now();
  int n = 0;
  while (auto tok = gen.next()) {
    if (n == 0) {
      // As mlx-lm: prompt time runs to the first token; generation time from there.
      stats.prompt_tps = stats.prompt_tokens / seconds(tic, clock::now());
      tic = clock::now();
    }
    if (std::find(req.eos_ids.begin(), req.eos_ids.end(), tok->id) != req.eos_ids.end()) {
      stats.finish_reason = "stop";
      break;
    }
    ++n;
    stats.generation_tokens = n;
    if (!on_token(*tok)) {
      stats.finish_reason = "stop";
      break;
    }
  }
  if (req.caches) *req.caches = std::move(gen.caches());
  double gen_time = seconds(tic, clock::now());
  stats.generation_tps = gen_time > 0 ? stats.generation_tokens / gen_time : 0;
  stats.peak_memory_gb = static_cast<double>(mx::get_peak_memory()) / 1e9;
  stats.mask_seconds = gen.mask_seconds();
  stats.matcher_seconds = gen.matcher_seconds();
  return stats;
}

}  // namespace mlxcpp
