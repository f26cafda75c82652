/* mlxcpp_bridge: HF `tokenizers`, `minijinja` and `llguidance` behind a plain C API (sources: bridge/src/).
 *
 * Conventions: a fallible call returns MLXCPP_OK (0) or an error code and fills *err with a
 * message (UTF-8, not NUL-terminated) that the caller frees with mlxcpp_buf_free. Buffers and id
 * arrays returned by the bridge are owned by the caller afterwards. Text arguments are (ptr, len)
 * UTF-8; invalid UTF-8 is an error, never a crash. No call panics across the boundary. */
#ifndef MLXCPP_BRIDGE_H
#define MLXCPP_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLXCPP_OK 0
#define MLXCPP_ERROR 1
#define MLXCPP_RAISED 2 /* the template called raise_exception(msg); *err holds msg */

typedef struct MlxcppBuf {
  uint8_t* data; /* NULL when empty */
  size_t len;
} MlxcppBuf;

typedef struct MlxcppIds {
  uint32_t* data;
  size_t len;
} MlxcppIds;

void mlxcpp_buf_free(MlxcppBuf buf);
void mlxcpp_ids_free(MlxcppIds ids);

/* --- tokenizers ----------------------------------------------------------------------------- */
typedef struct MlxcppTokenizer MlxcppTokenizer;

/* Builds a tokenizer from the text of a tokenizer.json. */
int mlxcpp_tokenizer_new(const uint8_t* json, size_t len, MlxcppTokenizer** out, MlxcppBuf* err);
void mlxcpp_tokenizer_free(MlxcppTokenizer* t);
int mlxcpp_tokenizer_encode(const MlxcppTokenizer* t, const uint8_t* text, size_t len,
                            int add_special_tokens, MlxcppIds* out, MlxcppBuf* err);
int mlxcpp_tokenizer_decode(const MlxcppTokenizer* t, const uint32_t* ids, size_t n,
                            int skip_special_tokens, MlxcppBuf* out, MlxcppBuf* err);
/* 1 (found, *out set), 0 (unknown), -1 (bad argument). */
int mlxcpp_tokenizer_token_to_id(const MlxcppTokenizer* t, const uint8_t* token, size_t len,
                                 uint32_t* out);
int mlxcpp_tokenizer_id_to_token(const MlxcppTokenizer* t, uint32_t id, MlxcppBuf* out);
size_t mlxcpp_tokenizer_vocab_size(const MlxcppTokenizer* t, int with_added);
/* The loaded pipeline serialized back to tokenizer.json text. */
int mlxcpp_tokenizer_to_json(const MlxcppTokenizer* t, MlxcppBuf* out, MlxcppBuf* err);

/* A tokenizer.json parsed once (its model.vocab and model.merges are the bulk): the caller edits
 * a skeleton without those two and builds the tokenizer from it; the bridge puts them back. */
typedef struct MlxcppTokJson MlxcppTokJson;

/* Parses the file's bytes; a syntax error's message gives line and column, not the file. */
int mlxcpp_tokjson_parse(const uint8_t* text, size_t len, MlxcppTokJson** out, MlxcppBuf* err);
void mlxcpp_tokjson_free(MlxcppTokJson* h);
/* The document without model.vocab and model.merges, as JSON text. */
int mlxcpp_tokjson_skeleton(const MlxcppTokJson* h, MlxcppBuf* out, MlxcppBuf* err);
/* model.vocab's entries (object or array; null 0, another scalar 1); -1 when there is none
 * (or once the tokenizer was built from h). */
int64_t mlxcpp_tokjson_vocab_size(const MlxcppTokJson* h);
/* The id model.vocab gives a token ({token: integer id}, or a Unigram [[piece, score], ...]'s
 * first matching index): 1 (found, *out set), 0 (not there), -1 (bad argument). */
int mlxcpp_tokjson_vocab_id(const MlxcppTokJson* h, const uint8_t* token, size_t len, int64_t* out);
/* Builds a tokenizer from `json`, the edited skeleton, with the file's model.vocab and
 * model.merges put back into its "model" (the file's merges win over ones the skeleton gained).
 * Moves them out of h: call once, then free h. */
int mlxcpp_tokenizer_from_tokjson(MlxcppTokJson* h, const uint8_t* json, size_t len,
                                  MlxcppTokenizer** out, MlxcppBuf* err);

/* Streaming detokenizer (tokenizers' DecodeStream). The stream does not own the tokenizer: pass
 * the same live tokenizer to every step. *piece gets the newly completed text, or data == NULL
 * when the ids so far end inside a character. */
typedef struct MlxcppDecodeStream MlxcppDecodeStream;
MlxcppDecodeStream* mlxcpp_decode_stream_new(int skip_special_tokens);
void mlxcpp_decode_stream_free(MlxcppDecodeStream* s);
int mlxcpp_decode_stream_step(MlxcppDecodeStream* s, const MlxcppTokenizer* t, uint32_t id,
                              MlxcppBuf* piece, MlxcppBuf* err);

/* --- chat templates (minijinja, configured like transformers' jinja2 environment) ------------ */
typedef struct MlxcppTemplate MlxcppTemplate;

/* Compiles a template; a syntax error is MLXCPP_ERROR with the line in the message. */
int mlxcpp_template_new(const uint8_t* source, size_t len, MlxcppTemplate** out, MlxcppBuf* err);
void mlxcpp_template_free(MlxcppTemplate* t);
/* Renders with the members of a JSON object as variables (key order kept). now/now_len: an
 * optional "YYYY-MM-DD HH:MM:SS" that strftime_now uses instead of the clock. */
int mlxcpp_template_render(const MlxcppTemplate* t, const uint8_t* context_json, size_t len,
                           const uint8_t* now, size_t now_len, MlxcppBuf* out, MlxcppBuf* err);

/* --- structured output (llguidance) --------------------------------------------------------- */
typedef struct MlxcppTokenEnv MlxcppTokenEnv;
typedef struct MlxcppGrammar MlxcppGrammar;
typedef struct MlxcppMatcher MlxcppMatcher;

#define MLXCPP_GRAMMAR_JSON_SCHEMA 0
#define MLXCPP_GRAMMAR_REGEX 1
#define MLXCPP_GRAMMAR_LARK 2

/* The bytes of every token of a live tokenizer (byte-level BPE or SentencePiece; another decoder
 * is an error naming it), once per model. vocab_size: the model's logits width (0: the
 * tokenizer's); eos[0..n_eos): the ids that end a sequence. The env keeps its own copy. */
int mlxcpp_token_env_new(const MlxcppTokenizer* t, const uint32_t* eos, size_t n_eos,
                         size_t vocab_size, MlxcppTokenEnv** out, MlxcppBuf* err);
void mlxcpp_token_env_free(MlxcppTokenEnv* e);
size_t mlxcpp_token_env_vocab_size(const MlxcppTokenEnv* e);
/* Compiles a JSON schema, a regex or a Lark grammar (MLXCPP_GRAMMAR_*); a grammar that does not
 * compile is MLXCPP_ERROR with llguidance's message. max_ws >= 0 bounds each run of JSON
 * whitespace (0: none); < 0 leaves it free. Thread-safe; the grammar is immutable. */
int mlxcpp_grammar_compile(const MlxcppTokenEnv* e, int kind, const uint8_t* text, size_t len,
                           int64_t max_ws, MlxcppGrammar** out, MlxcppBuf* err);
void mlxcpp_grammar_free(MlxcppGrammar* g);
/* A matcher (one per sequence, one thread at a time) at the grammar's start, or a copy of one
 * in its current state. NULL only for a NULL argument. */
MlxcppMatcher* mlxcpp_matcher_new(const MlxcppGrammar* g);
MlxcppMatcher* mlxcpp_matcher_clone(const MlxcppMatcher* m);
void mlxcpp_matcher_free(MlxcppMatcher* m);
/* Advances over ids; a token the grammar forbids is MLXCPP_ERROR and leaves the matcher in its
 * error state (see mlxcpp_matcher_error). */
int mlxcpp_matcher_consume(MlxcppMatcher* m, const uint32_t* ids, size_t n, MlxcppBuf* err);
int mlxcpp_matcher_rollback(MlxcppMatcher* m, size_t n, MlxcppBuf* err);
/* Allowed next tokens: bit (i % 32) of words[i / 32] is token i; EOS bits are set exactly where
 * the grammar accepts. Words past the vocabulary are zeroed. */
int mlxcpp_matcher_compute_mask(MlxcppMatcher* m, uint32_t* words, size_t n_words, MlxcppBuf* err);
/* 1 / 0, or -1 in the error state. */
int mlxcpp_matcher_is_accepting(MlxcppMatcher* m);
int mlxcpp_matcher_is_stopped(const MlxcppMatcher* m);
/* Tokens the grammar forces next (not consumed); empty when there is a choice. */
int mlxcpp_matcher_ff_tokens(MlxcppMatcher* m, MlxcppIds* out, MlxcppBuf* err);
/* 1 and *out = the message in the error state, else 0. */
int mlxcpp_matcher_error(const MlxcppMatcher* m, MlxcppBuf* out);

#ifdef __cplusplus
}
#endif

#endif /* MLXCPP_BRIDGE_H */
