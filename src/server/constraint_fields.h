// The fields that constrain a generation's output, as OpenAI, llama-server and vLLM name them:
// response_format (json_object / json_schema), llama-server's json_schema and grammar (Lark; a
// GBNF grammar is a 400 naming the problem until a converter exists), vLLM's structured_outputs
// {json, regex, choice, grammar, json_object} and its legacy guided_json / guided_regex /
// guided_choice / guided_grammar. At most one may be given.
#pragma once

#include <optional>
#include <string>

#include "server/json_fields.h"
#include "tokenizer/grammar.h"

namespace mlxcpp::server {

struct Constraint {
  GrammarSpec grammar;
  std::string param;  // the field that gave it (what a compile error names)
};

// A JSON schema's grammar, and the one any JSON object matches (json_object formats).
GrammarSpec json_schema_grammar(const Json& schema);
GrammarSpec any_json_object_grammar();

// nullopt where the body asks for no constraint (or response_format "text"); FieldError naming
// the field for a malformed one, a GBNF grammar, or two constraints at once.
std::optional<Constraint> read_constraint(const Fields& f);

}  // namespace mlxcpp::server
