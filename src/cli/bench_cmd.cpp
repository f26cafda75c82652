// `mlxcpp bench`: prefill and decode tok/s of a model on random prompt ids (medians of runs),
// and `--bandwidth`: the machine's streaming-read bandwidth, the ceiling of a memory-bound
// decode, so decode can be reported as a share of it.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bandwidth.h"
#include "cli/bench_run.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/errors.h"
#include "kernels/cpu_features.h"

namespace mlxcpp::cli {

namespace {

struct BenchArgs {
  ModelArgs m;
  BenchSpec spec;
  bool json = false;
  bool bandwidth = false;
  int bandwidth_mib = 1024;
  std::optional<int> kv_bits;
  int kv_group_size = 64;
};

struct Summary {
  double median = 0, min = 0, max = 0;
  std::vector<double> all;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  s.all = v;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

nlohmann::json to_json(const Summary& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"runs", s.all}};
}

BandwidthResult probe(const BenchArgs& a) {
  if (a.bandwidth_mib <= 0) throw RequestError(fmt::format("[bench] --bandwidth-mib must be positive, got {}", a.bandwidth_mib));
  const int threads = a.m.threads > 0 ? a.m.threads : kernels::physical_cores();
  return measure_read_bandwidth(static_cast<size_t>(a.bandwidth_mib) << 20, threads, std::max(5, a.spec.runs));
}

int run_bandwidth_only(const BenchArgs& a) {
  auto bw = probe(a);
  if (a.json) {
    nlohmann::json j = {{"bandwidth_gbps", bw.median_gbps}, {"bandwidth_max_gbps", bw.max_gbps},
                        {"bandwidth_threads", bw.threads}, {"bandwidth_bytes", bw.bytes}, {"bandwidth_runs", bw.gbps}};
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << fmt::format("read bandwidth: {:.2f} GB/s median (max {:.2f}) of {} passes over {} MiB, {} threads\n",
                             bw.median_gbps, bw.max_gbps, bw.gbps.size(), bw.bytes >> 20, bw.threads);
  }
  return 0;
}

int run(const BenchArgs& a) {
  if (a.m.model.empty()) {
    if (a.bandwidth) return run_bandwidth_only(a);
    throw RequestError("[bench] --model is required (or --bandwidth alone for the bandwidth probe)");
  }
  auto loaded = load_model(a.m);
  const int64_t step_bytes = weight_bytes_per_step(loaded);
  auto result = run_bench(*loaded.model, a.spec);
  std::vector<double> pre, dec;
  for (const auto& r : result.runs) {
    pre.push_back(r.prefill_tps);
    dec.push_back(r.decode_tps);
  }
  const Summary prefill = summarize(pre), decode = summarize(dec);
  const int depth = a.spec.decode_depth < 0 ? a.spec.prompt_tokens : std::max(1, a.spec.decode_depth);
  // Parity mode runs stock MLX ops on MLX's own CPU threads.
  const std::string mode = loaded.kernels ? "fast" : "parity";
  const std::string isa = loaded.kernels ? kernels::isa_name(loaded.kernels->isa()) : "mlx";
  const int threads = loaded.kernels ? loaded.kernels->threads() : 0;
  std::optional<BandwidthResult> bw;
  if (a.bandwidth) bw = probe(a);
  // One decode step reads the weights once for all B sequences.
  const double step_gbps = decode.median / a.spec.batch * static_cast<double>(step_bytes) / 1e9;

  nlohmann::json j = {{"model", a.m.model}, {"model_type", loaded.checkpoint.model_type()}, {"mode", mode},
                      {"isa", isa}, {"threads", threads}, {"batch", a.spec.batch},
                      {"prompt_tokens", a.spec.prompt_tokens}, {"gen_tokens", a.spec.gen_tokens},
                      {"decode_depth", depth}, {"runs", a.spec.runs}, {"seed", a.spec.seed},
                      {"prefill_tps", to_json(prefill)}, {"decode_tps", to_json(decode)},
                      {"weight_bytes_per_step", step_bytes}, {"decode_weight_gbps", step_gbps},
                      {"kv_cache_bytes", result.runs.back().cache_bytes},
                      {"kv_bits", a.spec.kv ? nlohmann::json(a.spec.kv->bits) : nlohmann::json()}};
  if (result.batch_check) {
    j["batch_check"] = {{"max_abs_diff_logprobs", result.batch_check->max_abs_diff},
                        {"same_argmax", result.batch_check->same_argmax}};
  }
  if (bw) {
    j["bandwidth_gbps"] = bw->median_gbps;
    j["bandwidth_threads"] = bw->threads;
    j["decode_pct_of_bandwidth_limit"] = 100.0 * step_gbps / bw->median_gbps;
  }
  if (a.json) {
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << fmt::format("model: {} ({}), {} mode, isa {}, {} kernel threads\n", a.m.model, loaded.checkpoint.model_type(),
                           mode, isa, threads);
  std::cout << fmt::format("batch {}, prompt {} tokens, decode {} tokens from depth {}, median of {} runs (+1 warm-up)\n",
                           a.spec.batch, a.spec.prompt_tokens, a.spec.gen_tokens, depth, a.spec.runs);
  const char* agg = a.spec.batch > 1 ? " (all sequences)" : "";
  std::cout << fmt::format("  prefill: {:9.1f} tok/s{}  (min {:.1f}, max {:.1f})\n", prefill.median, agg, prefill.min, prefill.max);
  std::cout << fmt::format("  decode:  {:9.1f} tok/s{}  (min {:.1f}, max {:.1f})\n", decode.median, agg, decode.min, decode.max);
  if (result.batch_check) {
    std::cout << fmt::format("  batch check: row 0 vs alone: max |d logprob| {:.3g}, same first token: {}\n",
                             result.batch_check->max_abs_diff, result.batch_check->same_argmax ? "yes" : "NO");
  }
  std::cout << fmt::format("  weights read per decode step: {:.2f} MB -> {:.2f} GB/s at the median decode rate\n",
                           step_bytes / 1e6, step_gbps);
  std::cout << fmt::format("  KV cache after decode: {:.2f} MB ({})\n", result.runs.back().cache_bytes / 1e6,
                           a.spec.kv ? fmt::format("{}-bit, groups of {}", a.spec.kv->bits, a.spec.kv->group_size)
                                     : std::string("not quantized"));
  if (bw) {
    std::cout << fmt::format("  read bandwidth: {:.2f} GB/s ({} threads) -> decode at {:.1f}% of the bandwidth limit ({:.1f} steps/s)\n",
                             bw->median_gbps, bw->threads, 100.0 * step_gbps / bw->median_gbps,
                             bw->median_gbps * 1e9 / static_cast<double>(step_bytes));
  }
  return 0;
}

}  // namespace

Action add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* sub = app.add_subcommand("bench", "Measure prefill and decode tok/s (and memory bandwidth)");
  add_model_options(sub, a->m);
  sub->get_option("--model")->required(false);  // --bandwidth alone needs no model
  sub->add_option("--prompt-tokens", a->spec.prompt_tokens, "Random prompt ids per sequence (prefill)")->capture_default_str();
  sub->add_option("--gen-tokens", a->spec.gen_tokens, "Greedy decode steps (eos ignored)")->capture_default_str();
  sub->add_option("--batch", a->spec.batch, "Sequences run at once (aggregate tok/s)")->capture_default_str();
  sub->add_option("--runs", a->spec.runs, "Timed runs (after one warm-up); medians are reported")->capture_default_str();
  sub->add_option("--decode-depth", a->spec.decode_depth,
                  "Tokens in the cache when decode starts (-1: after the prompt; 0: a 1-token prompt)")
      ->capture_default_str();
  sub->add_option("--prefill-step-size", a->spec.prefill_step_size, "Prompt tokens per prefill chunk")->capture_default_str();
  sub->add_option("--seed", a->spec.seed, "Seed of the random prompt ids")->capture_default_str();
  sub->add_option("--kv-bits", a->kv_bits, "Quantize the KV cache (2, 4 or 8 bits) from the first token");
  sub->add_option("--kv-group-size", a->kv_group_size, "Group size of the KV cache quantization")->capture_default_str();
  sub->add_flag("--json", a->json, "Print one JSON object instead of the text report");
  sub->add_flag("--bandwidth", a->bandwidth, "Also measure streaming-read bandwidth, with --threads threads (alone without --model)");
  sub->add_option("--bandwidth-mib", a->bandwidth_mib, "Buffer the bandwidth probe reads")->capture_default_str();
  return [a] {
    if (a->kv_bits) a->spec.kv = KvQuantization{*a->kv_bits, a->kv_group_size, 0};
    resolve_model(a->m);
    return run(*a);
  };
}

}  // namespace mlxcpp::cli
