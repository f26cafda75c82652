//! Structured output through llguidance: a token environment per model, grammars compiled
//! against it (JSON schema, regex, Lark), and one matcher per sequence.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;
use toktrie::TokEnv;

use crate::ffi::*;
use crate::tokbytes::HfTokEnv;
use crate::tokenizer::{free_boxed, ids_arg, lookup, tok, MlxcppTokenizer};

pub struct MlxcppTokenEnv {
    factory: Arc<ParserFactory>,
    vocab_size: usize,
}

/// A compiled grammar: a matcher in its start state that sequences clone.
pub struct MlxcppGrammar {
    start: Matcher,
    eos: Arc<[u32]>,
}

/// `eos` is kept beside the matcher: in its error state llguidance no longer knows it.
pub struct MlxcppMatcher {
    m: Matcher,
    eos: Arc<[u32]>,
}

pub const MLXCPP_GRAMMAR_JSON_SCHEMA: i32 = 0;
pub const MLXCPP_GRAMMAR_REGEX: i32 = 1;
pub const MLXCPP_GRAMMAR_LARK: i32 = 2;

fn deref<'a, T>(p: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: a non-null handle came from this module's constructors and is not yet freed.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::new(format!("null {what} handle")))
}

fn deref_matcher<'a>(p: *mut MlxcppMatcher) -> Result<&'a mut MlxcppMatcher, Failure> {
    // SAFETY: as in `deref`; the caller does not share a matcher between threads.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::new("null matcher handle"))
}

fn deref_mut<'a>(p: *mut MlxcppMatcher) -> Result<&'a mut Matcher, Failure> {
    deref_matcher(p).map(|m| &mut m.m)
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::new(e.to_string())
}

/// Builds the token environment once per model. `vocab_size` is the model's logits width (0:
/// the tokenizer's); `eos` the ids that end a sequence (the first is llguidance's EOS).
#[no_mangle]
pub extern "C" fn mlxcpp_token_env_new(
    t: *const MlxcppTokenizer, eos: *const u32, n_eos: usize, vocab_size: usize,
    out: *mut *mut MlxcppTokenEnv, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let tok = tok(t)?;
        let eos = ids_arg(eos, n_eos)?;
        let env = HfTokEnv::new(tok, eos, vocab_size).map_err(Failure::new)?;
        let vocab_size = toktrie::TokenizerEnv::tok_trie(&env).vocab_size();
        let env: TokEnv = Arc::new(env);
        let mut factory = ParserFactory::new_simple(&env).map_err(fail)?;
        factory.quiet();
        let boxed = Box::new(MlxcppTokenEnv { factory: Arc::new(factory), vocab_size });
        put(out, Box::into_raw(boxed))
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_token_env_free(e: *mut MlxcppTokenEnv) {
    // SAFETY: e came from mlxcpp_token_env_new.
    unsafe { free_boxed(e) }
}

#[no_mangle]
pub extern "C" fn mlxcpp_token_env_vocab_size(e: *const MlxcppTokenEnv) -> usize {
    deref(e, "token env").map_or(0, |e| e.vocab_size)
}

/// JSON options llguidance reads from the schema's "x-guidance": whitespace between lexemes
/// bounded to `max_ws` characters (0: none).
fn bound_whitespace(schema: &mut Value, max_ws: i64) -> Result<(), Failure> {
    let Some(obj) = schema.as_object_mut() else {
        return Ok(()); // true/false schemas have no room for options; they need no whitespace
    };
    let opts = obj.entry("x-guidance").or_insert_with(|| Value::Object(Default::default()));
    let opts = opts.as_object_mut().ok_or_else(|| Failure::new("schema: 'x-guidance' is not an object"))?;
    if max_ws == 0 {
        opts.insert("whitespace_flexible".into(), Value::Bool(false));
    } else {
        let pattern = format!(r"[\x20\x0A\x0D\x09]{{1,{max_ws}}}");
        opts.insert("whitespace_pattern".into(), Value::String(pattern));
    }
    Ok(())
}

fn top_level(kind: i32, text: &str, max_ws: i64) -> Result<TopLevelGrammar, Failure> {
    match kind {
        MLXCPP_GRAMMAR_JSON_SCHEMA => {
            let mut schema: Value =
                serde_json::from_str(text).map_err(|e| Failure::new(format!("JSON schema: {e}")))?;
            if max_ws >= 0 {
                bound_whitespace(&mut schema, max_ws)?;
            }
            Ok(TopLevelGrammar::from_json_schema(schema))
        }
        MLXCPP_GRAMMAR_REGEX => Ok(TopLevelGrammar::from_regex(text)),
        MLXCPP_GRAMMAR_LARK => Ok(TopLevelGrammar::from_lark(text.to_string())),
        _ => Err(Failure::new(format!("grammar kind {kind} is not known (0 schema, 1 regex, 2 lark)"))),
    }
}

/// Compiles a grammar of `kind` (MLXCPP_GRAMMAR_*). `max_ws` < 0 leaves JSON whitespace free.
#[no_mangle]
pub extern "C" fn mlxcpp_grammar_compile(
    e: *const MlxcppTokenEnv, kind: i32, text: *const u8, len: usize, max_ws: i64,
    out: *mut *mut MlxcppGrammar, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let env = deref(e, "token env")?;
        let text = utf8_arg(text, len, "grammar")?;
        let grammar = top_level(kind, text, max_ws)?;
        let start = Matcher::new(env.factory.create_parser(grammar));
        if let Some(msg) = start.get_error() {
            return Err(Failure::new(msg));
        }
        let eos: Arc<[u32]> = start.tok_env().map_err(fail)?.tok_trie().eos_tokens().into();
        put(out, Box::into_raw(Box::new(MlxcppGrammar { start, eos })))
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_grammar_free(g: *mut MlxcppGrammar) {
    // SAFETY: g came from mlxcpp_grammar_compile.
    unsafe { free_boxed(g) }
}

/// A matcher at the grammar's start (NULL only for a NULL grammar).
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_new(g: *const MlxcppGrammar) -> *mut MlxcppMatcher {
    match deref(g, "grammar") {
        Ok(g) => Box::into_raw(Box::new(MlxcppMatcher { m: g.start.clone(), eos: g.eos.clone() })),
        Err(_) => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub extern "C" fn mlxcpp_matcher_clone(m: *const MlxcppMatcher) -> *mut MlxcppMatcher {
    match deref(m, "matcher") {
        Ok(m) => Box::into_raw(Box::new(MlxcppMatcher { m: m.m.clone(), eos: m.eos.clone() })),
        Err(_) => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub extern "C" fn mlxcpp_matcher_free(m: *mut MlxcppMatcher) {
    // SAFETY: m came from mlxcpp_matcher_new/_clone.
    unsafe { free_boxed(m) }
}

/// Advances over `ids`; a token the grammar does not allow is an error (the matcher then stays
/// in its error state). EOS once stopped (the grammar is complete, or in the error state) is
/// accepted and changes nothing.
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_consume(
    m: *mut MlxcppMatcher, ids: *const u32, n: usize, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let m = deref_matcher(m)?;
        let ids = ids_arg(ids, n)?;
        // A stopped matcher (the grammar can go no further, or its mask failed) allows only EOS.
        if m.m.is_stopped() && !ids.is_empty() && ids.iter().all(|t| m.eos.contains(t)) {
            return Ok(());
        }
        m.m.consume_tokens(ids).map_err(fail)
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_matcher_rollback(m: *mut MlxcppMatcher, n: usize, err: *mut MlxcppBuf) -> i32 {
    guard(err, || deref_mut(m)?.rollback(n).map_err(fail))
}

/// The allowed next tokens as a bitmask (bit i of word i/32: token i) into `words[n_words]`; in
/// the error state the mask holds only EOS and the call returns the error;
/// EOS ids are set exactly where the grammar accepts; once stopped (EOS consumed, or nothing can
/// follow), only EOS.
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_compute_mask(
    m: *mut MlxcppMatcher, words: *mut u32, n_words: usize, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let m = deref_matcher(m)?;
        if words.is_null() {
            return Err(Failure::new("mask: null pointer"));
        }
        // SAFETY: the caller passes n_words writable words.
        let dst = unsafe { std::slice::from_raw_parts_mut(words, n_words) };
        match m.m.compute_mask_or_eos() {
            Ok(mask) => {
                let src = mask.as_slice();
                let k = src.len().min(n_words);
                dst[..k].copy_from_slice(&src[..k]);
                dst[k..].fill(0);
                Ok(())
            }
            Err(e) => {
                // The sequence can still end: only EOS, and the error for the caller to report.
                dst.fill(0);
                for &t in m.eos.iter() {
                    if let Some(w) = dst.get_mut(t as usize / 32) {
                        *w |= 1 << (t % 32);
                    }
                }
                Err(fail(e))
            }
        }
    })
}

/// 1 when the tokens so far form a complete match, 0 when not, -1 in the error state.
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_is_accepting(m: *mut MlxcppMatcher) -> i32 {
    lookup_flag(|| deref_mut(m)?.is_accepting().map_err(fail))
}

/// 1 when nothing more can follow (EOS consumed, grammar exhausted, or an error).
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_is_stopped(m: *const MlxcppMatcher) -> i32 {
    lookup_flag(|| Ok(deref(m, "matcher")?.m.is_stopped()))
}

fn lookup_flag(f: impl FnOnce() -> Result<bool, Failure>) -> i32 {
    lookup(|| f().map(i32::from))
}

/// Tokens the grammar forces next (not consumed); empty when there is a choice.
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_ff_tokens(m: *mut MlxcppMatcher, out: *mut MlxcppIds, err: *mut MlxcppBuf) -> i32 {
    guard(err, || {
        let ids = deref_mut(m)?.compute_ff_tokens();
        put(out, ids_from_vec(ids))
    })
}

/// 1 and *out set to the message when the matcher is in its error state, else 0.
#[no_mangle]
pub extern "C" fn mlxcpp_matcher_error(m: *const MlxcppMatcher, out: *mut MlxcppBuf) -> i32 {
    lookup(|| match deref(m, "matcher")?.m.get_error() {
        Some(msg) => put(out, MlxcppBuf::from_string(msg)).map(|_| 1),
        None => Ok(0),
    })
}
