#include "scheduler/output_pipeline.h"

#include <algorithm>

#include <fmt/format.h>

namespace mlxcpp::sched {

OutputPipeline::OutputPipeline(const Tokenizer& tok, StreamingDetokenizer::Kind detok, const OutputOptions& opts,
                               int choice, const std::string& id_prefix)
    : detok_(tok, detok), matcher_(opts.stops), tool_defs_(opts.tools), choice_(choice) {
  if (opts.reasoning) reasoning_.emplace(*opts.reasoning, opts.starts_in_reasoning);
  if (opts.tool_format != ToolCallFormat::kNone) tools_ = make_tool_call_parser(opts.tool_format, id_prefix, opts.tools);
  if (!opts.forced_prefix.empty() && tools_) {
    // The forced call's opening is part of the prompt; the parser sees it as generated text.
    Delta ignored;
    route_content(opts.forced_prefix, ignored);
    forced_.swap(ignored.tool_calls);
  }
}

void OutputPipeline::route_content(const std::string& text, Delta& out) {
  if (!tools_) {
    out.content += text;
    return;
  }
  auto r = tools_->push(text);
  out.content += r.content;
  out.reasoning += r.reasoning;
  for (auto& c : r.calls) out.tool_calls.push_back(std::move(c));
}

void OutputPipeline::route(const std::string& text, Delta& out) {
  if (text.empty()) return;
  if (!reasoning_) {
    route_content(text, out);
    return;
  }
  auto r = reasoning_->push(text);
  out.reasoning += r.reasoning;
  route_content(r.content, out);
}

Delta OutputPipeline::push(int id, std::optional<TokenLogprob> logprob) {
  Delta out;
  out.choice = choice_;
  if (!forced_.empty()) {
    // The forced call's first delta (id and name) goes out with the first token.
    out.tool_calls.swap(forced_);
  }
  if (logprob) out.logprobs.push_back(std::move(*logprob));
  if (matcher_.stopped()) return out;
  detok_.add_token(id);
  auto step = matcher_.push(detok_.last_segment());
  route(step.text, out);
  return out;
}

Delta OutputPipeline::finish() {
  Delta out;
  out.choice = choice_;
  if (!forced_.empty()) out.tool_calls.swap(forced_);
  if (!matcher_.stopped()) {
    detok_.finalize();
    auto step = matcher_.push(detok_.last_segment());
    route(step.text, out);
    if (!matcher_.stopped()) route(matcher_.flush(), out);
  }
  if (reasoning_) {
    auto r = reasoning_->flush();
    out.reasoning += r.reasoning;
    route_content(r.content, out);
  }
  if (tools_) {
    auto r = tools_->flush();
    out.content += r.content;
    out.reasoning += r.reasoning;
    for (auto& c : r.calls) out.tool_calls.push_back(std::move(c));
  }
  return out;
}

std::vector<ToolCall> OutputPipeline::tool_calls() const {
  return tools_ ? tools_->calls() : std::vector<ToolCall>{};
}

std::vector<std::string> OutputPipeline::tool_call_problems() const {
  std::vector<std::string> out;
  if (tool_defs_.empty()) return out;
  for (const auto& call : tool_calls()) {
    const auto def = std::find_if(tool_defs_.begin(), tool_defs_.end(), [&](const nlohmann::ordered_json& d) {
      return d.is_object() && d.value("name", std::string()) == call.name;
    });
    if (def == tool_defs_.end()) {
      out.push_back(fmt::format("tool call '{}': no such tool in the request", call.name));
      continue;
    }
    if (!def->contains("parameters")) continue;
    const std::string args = call.arguments.is_string() ? call.arguments.get<std::string>() : call.arguments.dump();
    if (auto err = check_tool_arguments((*def)["parameters"], args)) {
      out.push_back(fmt::format("tool call '{}': {}", call.name, *err));
    }
  }
  return out;
}

bool OutputPipeline::empty(const Delta& d) {
  return d.content.empty() && d.reasoning.empty() && d.tool_calls.empty() && d.logprobs.empty();
}

}  // namespace mlxcpp::sched
