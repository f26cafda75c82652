// `mlxcpp chat`: a conversation through the snapshot's chat template. One-shot with --prompt,
// otherwise a REPL on stdin (/reset, /exit) that keeps the messages and reuses the KV cache
// when the newly rendered prompt extends the tokens already in it.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/text_session.h"
#include "core/errors.h"

namespace mlxcpp::cli {

namespace {

struct ChatArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::optional<std::string> system;
  std::optional<std::string> prompt;
  TextArgs text;
};

class ChatSession {
 public:
  ChatSession(const ChatArgs& args, Tokenizer tok)
      : args_(args),
        tok_(std::move(tok)),
        template_(compile_chat_template(tok_)),
        variables_(chat_template_variables(tok_, args.text.template_kwargs, "--chat-template-kwargs")),
        loaded_(load_model(args.model)),
        eos_(merged_eos_ids(loaded_.checkpoint, tok_)),
        seed_(args.sampling.seed) {
    reset();
  }

  void reset() {
    messages_.clear();
    if (args_.system) messages_.push_back(Message::text("system", *args_.system));
    caches_.clear();
    cached_.clear();
  }

  // One user turn: streams the answer to stdout and appends it to the conversation. On an error
  // the conversation is as before the turn.
  GenerationStats turn(const std::string& user) {
    messages_.push_back(Message::text("user", user));
    std::vector<int> ids;
    try {
      ids = render();
    } catch (...) {
      messages_.pop_back();
      throw;
    }
    GenerationRequest req = make_request(args_.sampling);
    req.seed = seed_;  // mx.random.seed once, before the first turn (as mlx_lm.chat)
    req.sampling.xtc_special_tokens = xtc_special_tokens(tok_, eos_);
    if (!args_.sampling.ignore_eos) req.eos_ids = eos_;
    bool extends = !cached_.empty() && ids.size() > cached_.size() && std::equal(cached_.begin(), cached_.end(), ids.begin());
    if (!extends) caches_.clear();
    req.prompt.assign(ids.begin() + (extends ? cached_.size() : 0), ids.end());
    req.caches = &caches_;
    cached_.clear();  // until the generation has finished with the caches
    TextResult r;
    try {
      r = stream_text(*loaded_.model, tok_, std::move(req), args_.text.stops, std::cout);
    } catch (...) {
      caches_.clear();
      messages_.pop_back();
      throw;
    }
    seed_.reset();
    cached_ = std::move(ids);
    cached_.insert(cached_.end(), r.tokens.begin(), r.tokens.end());
    messages_.push_back(Message::text("assistant", r.text));
    return r.stats;
  }

 private:
  std::vector<int> render() const {
    ChatTemplateInputs in;
    in.messages = messages_;
    in.add_generation_prompt = true;
    in.variables = variables_;
    auto ids = tok_.encode(template_.render(in), false);
    return {ids.begin(), ids.end()};
  }

  const ChatArgs& args_;
  Tokenizer tok_;
  ChatTemplate template_;
  OrderedJson variables_;
  LoadedModel loaded_;
  std::vector<int64_t> eos_;
  std::optional<uint64_t> seed_;
  std::vector<Message> messages_;
  LayerCaches caches_;
  std::vector<int> cached_;  // the tokens caches_ holds
};

int repl(ChatSession& session) {
  const bool tty = ::isatty(STDIN_FILENO);
  for (std::string line;;) {
    if (tty) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) {
      if (tty) std::cout << "\n";
      break;
    }
    if (line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      std::cerr << "(conversation reset)\n";
      continue;
    }
    if (line.empty()) continue;
    try {
      end_answer(session.turn(line));
    } catch (const Error& e) {
      std::cout << std::flush;
      std::cerr << "mlxcpp: error: " << e.what() << "\n";
    }
  }
  return 0;
}

int run(const ChatArgs& a) {
  ChatSession session(a, Tokenizer::load(a.model.model));
  if (!a.prompt) return repl(session);
  end_answer(session.turn(*a.prompt));
  return 0;
}

}  // namespace

Action add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* sub = app.add_subcommand("chat", "Chat through the model's chat template (one-shot with --prompt, else a REPL)");
  add_model_options(sub, a->model);
  sub->add_option("--system,--system-prompt", a->system, "System message");
  sub->add_option("--prompt,-p", a->prompt, "One user message: answer it and exit");
  add_text_options(sub, a->text);
  add_sampling_options(sub, a->sampling);
  return [a] {
    resolve_model(a->model);
    return run(*a);
  };
}

}  // namespace mlxcpp::cli
