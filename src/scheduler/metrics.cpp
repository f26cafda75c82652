#include "scheduler/metrics.h"

#include <fmt/format.h>

namespace mlxcpp::sched {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard lock(mu_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_, name, count_);
}

void render_metric(std::string& out, const std::string& name, const std::string& type, const std::string& help,
                   double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

void EngineMetrics::render(std::string& out) const {
  render_metric(out, "mlxcpp_prompt_tokens_total", "counter", "Prompt tokens of finished requests",
                static_cast<double>(prompt_tokens.load()));
  render_metric(out, "mlxcpp_prompt_cached_tokens_total", "counter", "Prompt tokens taken from the prompt cache",
                static_cast<double>(cached_prompt_tokens.load()));
  render_metric(out, "mlxcpp_generation_tokens_total", "counter", "Generated tokens",
                static_cast<double>(generated_tokens.load()));
  render_metric(out, "mlxcpp_requests_finished_total", "counter", "Requests the engine finished",
                static_cast<double>(requests_finished.load()));
  render_metric(out, "mlxcpp_requests_cancelled_total", "counter", "Requests cancelled (client gone or stop)",
                static_cast<double>(requests_cancelled.load()));
  render_metric(out, "mlxcpp_requests_failed_total", "counter", "Requests that failed in the engine",
                static_cast<double>(requests_failed.load()));
  render_metric(out, "mlxcpp_tool_call_problems_total", "counter",
                "Generated tool calls naming an unknown tool or whose arguments fail the tool's schema",
                static_cast<double>(tool_call_problems.load()));
  render_metric(out, "mlxcpp_embedding_inputs_total", "counter", "Inputs embedded",
                static_cast<double>(embedding_inputs.load()));
  render_metric(out, "mlxcpp_embedding_tokens_total", "counter", "Tokens of the inputs embedded",
                static_cast<double>(embedding_tokens.load()));
  render_metric(out, "mlxcpp_queue_depth", "gauge", "Requests waiting for the engine", queue_depth.load());
  render_metric(out, "mlxcpp_running_rows", "gauge", "Sequences being generated", running.load());
  ttft.render(out, "mlxcpp_time_to_first_token_seconds", "Time from admission to the first token");
  inter_token.render(out, "mlxcpp_inter_token_seconds", "Time between consecutive tokens of a sequence");
}

}  // namespace mlxcpp::sched
