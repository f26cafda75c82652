#include "server/openai/openai_common.h"

#include <fmt/format.h>

namespace mlxcpp::server::openai {

namespace {

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

Json usage_json(const sched::Usage& u) {
  return Json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json chat_logprob_entry(const sched::TokenLogprob& lp) {
  Json top = Json::array();
  for (size_t i = 0; i < lp.top.size(); ++i) {
    top.push_back(Json{{"token", lp.top_tokens[i]}, {"logprob", lp.top[i].second}, {"bytes", bytes_of(lp.top_tokens[i])}});
  }
  return Json{{"token", lp.token}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.token)}, {"top_logprobs", top}};
}

std::vector<int> token_ids(const Json& a, const std::string& where) {
  std::vector<int> ids;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer() || a[i].get<int64_t>() < 0 || a[i].get<int64_t>() > kMaxInt32) {
      throw FieldError(where, fmt::format("'{}' must hold token ids (non-negative integers); item {} is {}", where, i,
                                          brief(a[i])));
    }
    ids.push_back(a[i].get<int>());
  }
  return ids;
}

std::string finish_reason(const std::string& engine_reason) {
  return engine_reason == "cancelled" ? "stop" : engine_reason;
}

StreamFlags read_stream_flags(const Fields& f) {
  StreamFlags s;
  s.stream = f.boolean("stream").value_or(false);
  if (const Json* so = f.object("stream_options")) {
    s.include_usage = Fields(*so, "stream_options").boolean("include_usage").value_or(false);
  }
  return s;
}

std::string stream_end(Json chunk, const sched::Usage& u, bool include_usage) {
  std::string out;
  if (include_usage) {
    chunk["choices"] = Json::array();
    chunk["usage"] = usage_json(u);
    out += sse(chunk);
  }
  return out + "data: [DONE]\n\n";
}

std::string stream_failure(const sched::Failure& f) {
  return sse(Json::parse(error_body(Protocol::kOpenAI, f.status, f.message))) + "data: [DONE]\n\n";
}

int read_chat_logprobs(const Fields& f) {
  bool on = f.boolean("logprobs").value_or(false);
  auto top = f.integer("top_logprobs", 0, 20);
  if (top && !on) f.fail("top_logprobs", "needs 'logprobs': true");
  return on ? static_cast<int>(top.value_or(0)) : -1;
}

void accumulate(std::vector<ChoiceText>& choices, const sched::Event& e) {
  if (auto* d = std::get_if<sched::Delta>(&e)) {
    if (choices.size() <= static_cast<size_t>(d->choice)) choices.resize(d->choice + 1);
    auto& c = choices[d->choice];
    c.content += d->content;
    c.reasoning += d->reasoning;
    c.logprobs.insert(c.logprobs.end(), d->logprobs.begin(), d->logprobs.end());
  } else if (auto* f = std::get_if<sched::Finish>(&e)) {
    if (choices.size() <= static_cast<size_t>(f->choice)) choices.resize(f->choice + 1);
    choices[f->choice].finish = *f;
    choices[f->choice].finished = true;
  }
}

BodyBuilder choices_body_builder(ChoicesBody body) {
  auto choices = std::make_shared<std::vector<ChoiceText>>();
  auto usage = std::make_shared<sched::Usage>();
  return BodyBuilder{[choices, usage](const sched::Event& e) {
                       accumulate(*choices, e);
                       if (auto* u = std::get_if<sched::Usage>(&e)) *usage = *u;
                     },
                     [choices, usage, body = std::move(body)] { return body(*choices, *usage); }};
}

}  // namespace mlxcpp::server::openai
