// `mlxcpp generate`: a text prompt (mlx_lm.generate's main(): the chat template when the
// tokenizer has one) streamed back as text, or token ids in and ids out (--prompt-ids).
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/text_session.h"
#include "core/errors.h"
#include "core/files.h"
#include "tokenizer/grammar.h"

namespace mlxcpp::cli {

namespace {

struct GenerateArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::optional<std::string> prompt_ids;
  std::optional<std::string> prompt;
  std::optional<std::string> system_prompt;
  TextArgs text;
  bool ignore_chat_template = false;
  // Structured output: at most one of the three; --json-whitespace bounds JSON whitespace runs.
  std::optional<std::string> json_schema_file, regex, grammar_file;
  int json_whitespace = kDefaultJsonWhitespace;
};

std::string read_grammar_file(const std::string& file, const char* option) {
  auto text = read_file(file);
  if (!text) throw ConfigError(std::string(option) + ": cannot read '" + file + "'");
  return *text;
}

bool grammar_spec_given(const GenerateArgs& a) { return a.json_schema_file || a.regex || a.grammar_file; }

// The grammar the options ask for (nullopt: unconstrained).
std::optional<GrammarSpec> grammar_spec(const GenerateArgs& a) {
  if (a.json_schema_file) {
    return GrammarSpec{GrammarKind::kJsonSchema, read_grammar_file(*a.json_schema_file, "--json-schema"),
                       a.json_whitespace};
  }
  if (a.regex) return GrammarSpec{GrammarKind::kRegex, *a.regex, -1};
  if (a.grammar_file) return GrammarSpec{GrammarKind::kLark, read_grammar_file(*a.grammar_file, "--grammar"), -1};
  return std::nullopt;
}

// Compiles the grammar against the model's vocabulary (a compile error names llguidance's reason).
std::shared_ptr<const Grammar> compile_grammar(const GrammarSpec& spec, const Tokenizer& tok, const Model& model,
                                               const std::vector<int64_t>& eos) {
  TokenEnv env(tok, std::vector<int32_t>(eos.begin(), eos.end()), static_cast<size_t>(model.vocab_size()));
  try {
    return std::make_shared<const Grammar>(env.compile(spec));
  } catch (const RequestError& e) {
    throw ConfigError(e.what());
  }
}

// Token ids in, comma-separated ids out (no tokenizer needed).
int run_ids(const GenerateArgs& a) {
  if (!a.text.stops.empty()) throw ConfigError("--stop needs a text prompt (--prompt), not --prompt-ids");
  auto loaded = load_model(a.model);
  GenerationRequest req = make_request(a.sampling);
  req.prompt = parse_ids(*a.prompt_ids, "--prompt-ids");
  if (!a.sampling.ignore_eos) req.eos_ids = loaded.checkpoint.eos_token_ids();
  bool first = true;
  auto stats = stream_generate(*loaded.model, req, [&](const GeneratedToken& t) {
    std::cout << (first ? "" : ",") << t.id << std::flush;
    first = false;
    return true;
  });
  end_answer(stats);
  return 0;
}

// mlx_lm.generate's main(): [system?, user] through the chat template (add_generation_prompt,
// no special tokens added at encode), or the raw prompt encoded with special tokens.
std::vector<int> encode_prompt(const GenerateArgs& a, const Tokenizer& tok) {
  std::string prompt = read_prompt_arg(*a.prompt);
  bool use_template = !a.ignore_chat_template && !tok.chat_templates().empty();
  if (!use_template) {
    auto ids = tok.encode(prompt, true);
    return {ids.begin(), ids.end()};
  }
  ChatTemplateInputs in;
  if (a.system_prompt) in.messages.push_back(Message::text("system", *a.system_prompt));
  in.messages.push_back(Message::text("user", prompt));
  in.add_generation_prompt = true;
  in.variables = chat_template_variables(tok, a.text.template_kwargs, "--chat-template-kwargs");
  auto ids = tok.encode(compile_chat_template(tok).render(in), false);
  return {ids.begin(), ids.end()};
}

int run_text(const GenerateArgs& a) {
  auto tok = Tokenizer::load(a.model.model);
  std::vector<int> prompt = encode_prompt(a, tok);  // template errors before the model loads
  auto loaded = load_model(a.model);
  GenerationRequest req = make_request(a.sampling);
  req.prompt = std::move(prompt);
  auto eos = merged_eos_ids(loaded.checkpoint, tok);
  if (auto spec = grammar_spec(a)) req.options.grammar = compile_grammar(*spec, tok, *loaded.model, eos);
  req.sampling.xtc_special_tokens = xtc_special_tokens(tok, eos);
  if (!a.sampling.ignore_eos) req.eos_ids = eos;
  auto r = stream_text(*loaded.model, tok, std::move(req), a.text.stops, std::cout);
  end_answer(r.stats);
  return 0;
}

}  // namespace

Action add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "Generate text from a prompt (or token ids from token ids)");
  add_model_options(sub, a->model);
  auto* prompt = sub->add_option("--prompt,-p", a->prompt, "Text prompt ('-' reads stdin; \\n and \\t are unescaped)");
  auto* ids = sub->add_option("--prompt-ids", a->prompt_ids, "Comma-separated prompt token ids, e.g. 1,2,3 (prints ids)");
  prompt->excludes(ids);
  sub->add_option("--system-prompt", a->system_prompt, "System message for the chat template");
  sub->add_flag("--ignore-chat-template,--raw", a->ignore_chat_template,
                "Encode the prompt as is (with special tokens), without the chat template");
  add_text_options(sub, a->text);
  add_sampling_options(sub, a->sampling);
  auto* schema = sub->add_option("--json-schema", a->json_schema_file, "Constrain the output to the JSON schema in FILE");
  auto* regex = sub->add_option("--regex", a->regex, "Constrain the output to the regular expression RE");
  auto* grammar = sub->add_option("--grammar", a->grammar_file, "Constrain the output to the Lark grammar in FILE");
  schema->excludes(regex)->excludes(grammar);
  regex->excludes(grammar);
  sub->add_option("--json-whitespace", a->json_whitespace,
                  "With --json-schema: at most N whitespace characters in a row (0: compact JSON, -1: free)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 20))
      ->needs(schema);
  return [a] {
    resolve_model(a->model);
    if (grammar_spec_given(*a)) {
      if (!a->prompt) throw ConfigError("--json-schema, --regex and --grammar need a text prompt (--prompt)");
      if (a->sampling.ignore_eos) throw ConfigError("--ignore-eos cannot be combined with a grammar (it ends on EOS)");
    }
    if (a->prompt) return run_text(*a);
    if (!a->prompt_ids) throw ConfigError("generate: give --prompt TEXT or --prompt-ids IDS");
    return run_ids(*a);
  };
}

}  // namespace mlxcpp::cli
