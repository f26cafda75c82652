// POST /v1/completions: raw prompts (text or token ids, one or a list), no chat template; echo, stream and the
// legacy logprobs shape ({tokens, token_logprobs, top_logprobs, text_offset}).
#include <fmt/format.h>

#include "server/constraint_fields.h"
#include "server/event_relay.h"
#include "server/openai/openai_common.h"
#include "server/server_context.h"

namespace mlxcpp::server::openai {

namespace {

struct Prompt {
  std::vector<int> ids;  // token ids, or
  std::string text;      // text (encoded with special tokens)
};

// OpenAI accepts up to this many prompts per request (its batch limit).
constexpr size_t kMaxPrompts = 16;

struct CompletionRequest {
  std::vector<Prompt> prompts;
  bool echo = false;
  StreamFlags stream;
  GenParams gen;
};

CompletionRequest parse_completion_request(const Json& body) {
  Fields f(body);
  CompletionRequest r;
  const Json* p = f.get("prompt");
  if (!p) f.fail("prompt", "is required");
  auto one = [&](const Json& v) {
    Prompt out;
    if (v.is_string()) {
      out.text = v.get<std::string>();
    } else if (v.is_array()) {
      out.ids = token_ids(v, "prompt");
    } else {
      f.fail("prompt", fmt::format("must be a string, a list of token ids, or a list of those; got {}", brief(v)));
    }
    if (out.text.empty() && out.ids.empty()) f.fail("prompt", "is empty");
    r.prompts.push_back(std::move(out));
  };
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() > kMaxPrompts) f.fail("prompt", fmt::format("holds {} prompts; at most {}", p->size(), kMaxPrompts));
    for (const auto& item : *p) one(item);
  } else {
    one(*p);
  }
  if (f.has("suffix")) f.fail("suffix", "is not supported");
  r.echo = f.boolean("echo").value_or(false);
  r.stream = read_stream_flags(f);
  r.gen = read_gen_params(f, {"max_tokens"});
  if (auto best = f.integer("best_of", 1, 16); best && *best != r.gen.n) {
    f.fail("best_of", "is not supported (other than equal to n)");
  }
  if (auto lp = f.integer("logprobs", 0, 20)) r.gen.top_logprobs = static_cast<int>(*lp);
  if (auto c = read_constraint(f)) {
    r.gen.grammar = std::move(c->grammar);
    r.gen.grammar_param = std::move(c->param);
  }
  return r;
}

Json legacy_logprobs(const std::vector<sched::TokenLogprob>& lps, size_t text_offset) {
  Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const auto& l : lps) {
    tokens.push_back(l.token);
    token_lps.push_back(l.logprob);
    Json top = Json::object();
    for (size_t i = 0; i < l.top.size(); ++i) top[l.top_tokens[i]] = l.top[i].second;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += l.token.size();
  }
  return Json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

class CompletionStreamEncoder {
 public:
  // echo[k]: the text echoed before each choice of prompt k (n choices each); empty: no echo.
  CompletionStreamEncoder(std::string id, std::string model, bool include_usage, std::vector<std::string> echo, int n)
      : id_(std::move(id)), model_(std::move(model)), include_usage_(include_usage), echo_(std::move(echo)), n_(n) {}

  std::string encode(const sched::Event& e) {
    std::string out;
    if (auto* d = std::get_if<sched::Delta>(&e)) {
      std::string text = take_echo(d->choice) + d->content;
      Json lp = d->logprobs.empty() ? Json(nullptr) : legacy_logprobs(d->logprobs, 0);
      if (text.empty() && lp.is_null()) return out;
      out += sse(chunk(Json{{"index", d->choice}, {"text", text}, {"logprobs", lp}, {"finish_reason", nullptr}}));
    } else if (auto* f = std::get_if<sched::Finish>(&e)) {
      out += sse(chunk(Json{{"index", f->choice}, {"text", take_echo(f->choice)}, {"logprobs", nullptr},
                            {"finish_reason", finish_reason(f->reason)}}));
    } else if (auto* u = std::get_if<sched::Usage>(&e)) {
      out += stream_end(chunk(nullptr), *u, include_usage_);
    }
    return out;
  }

  std::string failure(const sched::Failure& f) const { return stream_failure(f); }

 private:
  std::string take_echo(int choice) {
    if (echo_.empty()) return "";
    if (echoed_.size() <= static_cast<size_t>(choice)) echoed_.resize(choice + 1, false);
    if (echoed_[choice]) return "";
    echoed_[choice] = true;
    return echo_[choice / n_];
  }
  Json chunk(Json choice) const {
    Json c{{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_},
           {"choices", choice.is_null() ? Json::array() : Json::array({choice})}};
    if (include_usage_) c["usage"] = nullptr;
    return c;
  }
  std::string id_, model_;
  int64_t created_ = unix_now();
  bool include_usage_;
  std::vector<std::string> echo_;
  int n_;
  std::vector<bool> echoed_;
};

Json completion_body(const std::string& id, const std::string& model, const std::vector<ChoiceText>& choices,
                     const sched::Usage& usage, bool with_logprobs, const std::vector<std::string>& echoes, int n) {
  Json out = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    const std::string echo = echoes.empty() ? "" : echoes[i / n];
    out.push_back(Json{{"index", static_cast<int>(i)},
                       {"text", echo + c.content},
                       {"logprobs", with_logprobs ? legacy_logprobs(c.logprobs, echo.size()) : Json(nullptr)},
                       {"finish_reason", finish_reason(c.finish.reason)}});
  }
  return Json{{"id", id},       {"object", "text_completion"}, {"created", unix_now()},
              {"model", model}, {"choices", out},              {"usage", usage_json(usage)}};
}

}  // namespace

void add_completion_routes_impl(HttpServer& http, ServerContext& ctx) {
  add_route(http, ctx, "POST", "/v1/completions", "completions",
            [](ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
              Json body = parse_body(req.body);
              check_model_field(Fields(body), ctx.engine.model());
              CompletionRequest r = parse_completion_request(body);
              std::vector<sched::Request> reqs;
              std::vector<std::string> echo;
              const auto& tok = ctx.engine.model().tokenizer;
              for (const auto& pr : r.prompts) {
                PreparedCall p = prepare_completion(ctx.engine, pr.ids, pr.text, r.gen, ctx.defaults);
                p.request.endpoint = "completions";
                reqs.push_back(std::move(p.request));
                if (r.echo) echo.push_back(pr.ids.empty() ? pr.text : tok.decode({pr.ids.begin(), pr.ids.end()}));
              }
              const int n = r.gen.n;
              const std::string id = make_id("cmpl-");
              const std::string model = ctx.engine.model().id;
              if (r.stream.stream) {
                auto enc = std::make_shared<CompletionStreamEncoder>(id, model, r.stream.include_usage, echo, n);
                relay_stream(ctx.engine, w, std::move(reqs), stream_encoder(enc), Protocol::kOpenAI);
                return;
              }
              const bool with_lp = r.gen.top_logprobs >= 0;
              relay_whole(ctx.engine, w, std::move(reqs),
                          choices_body_builder([=](const auto& choices, const sched::Usage& usage) {
                            return completion_body(id, model, choices, usage, with_lp, echo, n);
                          }),
                          Protocol::kOpenAI);
            });
}

}  // namespace mlxcpp::server::openai

namespace mlxcpp::server {
void add_openai_completion_routes(HttpServer& http, ServerContext& ctx) {
  openai::add_completion_routes_impl(http, ctx);
}
}  // namespace mlxcpp::server
