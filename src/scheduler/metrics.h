// Engine counters and histograms for GET /metrics (Prometheus text exposition format).
// Updated on the engine thread, read from HTTP threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mlxcpp::sched {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // `name`_bucket{le=...}, _sum and _count lines.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bound, +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct EngineMetrics {
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> cached_prompt_tokens{0};
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> requests_finished{0};
  std::atomic<int64_t> requests_cancelled{0};
  std::atomic<int64_t> requests_failed{0};
  std::atomic<int64_t> tool_call_problems{0};
  std::atomic<int64_t> embedding_inputs{0};  // inputs embedded (/v1/embeddings)
  std::atomic<int64_t> embedding_tokens{0};  // their tokens  // calls naming unknown tools or failing the schema
  std::atomic<int> queue_depth{0};
  std::atomic<int> running{0};  // choices being generated now
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram inter_token{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};

  void render(std::string& out) const;
};

// "# HELP name help\n# TYPE name type\nname value\n".
void render_metric(std::string& out, const std::string& name, const std::string& type, const std::string& help,
                   double value);

}  // namespace mlxcpp::sched
