//! tokenizer.json parsed once. The C++ side (transformers' per-class rules, hf_compat.cpp) edits
//! only a small skeleton: the document without `model.vocab` and `model.merges`, which are the
//! bulk of the file (Gemma 3's is 25 MB) and which it only reads. The bridge keeps those two,
//! answers the few vocab lookups, and puts them back into the edited skeleton to build the
//! tokenizer, so the big arrays are parsed once instead of C++ parse + dump + Rust parse.

use crate::ffi::*;
use crate::tokenizer::{free_boxed, lookup, MlxcppTokenizer};
use serde_json::{Map, Value};
use tokenizers::{AddedToken, ModelWrapper, Tokenizer};

pub struct MlxcppTokJson {
    skeleton: Value,
    // None: the file's model has no such key. Taken (None) once the tokenizer is built.
    vocab: Option<Value>,
    merges: Option<Value>,
    built: bool,
}

fn handle<'a>(h: *const MlxcppTokJson) -> Result<&'a MlxcppTokJson, Failure> {
    // SAFETY: a non-null handle came from mlxcpp_tokjson_parse and is not yet freed.
    unsafe { h.as_ref() }.ok_or_else(|| Failure::new("null tokenizer.json handle"))
}

fn json_err(e: impl std::fmt::Display) -> Failure {
    Failure::new(e.to_string())
}

fn model_mut(doc: &mut Value) -> Option<&mut Map<String, Value>> {
    doc.as_object_mut()?.get_mut("model")?.as_object_mut()
}

/// Parses the bytes of a tokenizer.json. A syntax error's message is serde_json's alone
/// ("EOF while parsing an object at line 1 column 27"); the caller names the file.
#[no_mangle]
pub extern "C" fn mlxcpp_tokjson_parse(
    text: *const u8, len: usize, out: *mut *mut MlxcppTokJson, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let bytes: &[u8] = if len == 0 {
            &[]
        } else if text.is_null() {
            return Err(Failure::new("tokenizer.json: null pointer"));
        } else {
            // SAFETY: the caller passes a readable region of len bytes that outlives the call.
            unsafe { std::slice::from_raw_parts(text, len) }
        };
        // nlohmann::json, which parsed the file before, skips a UTF-8 byte order mark.
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        let mut skeleton: Value = serde_json::from_slice(bytes).map_err(json_err)?;
        let (vocab, merges) = match model_mut(&mut skeleton) {
            // shift_remove keeps the other keys in file order.
            Some(model) => (model.shift_remove("vocab"), model.shift_remove("merges")),
            None => (None, None),
        };
        put(out, Box::into_raw(Box::new(MlxcppTokJson { skeleton, vocab, merges, built: false })))
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_tokjson_free(h: *mut MlxcppTokJson) {
    // SAFETY: h came from mlxcpp_tokjson_parse.
    unsafe { free_boxed(h) }
}

/// The document without model.vocab and model.merges, as JSON text.
#[no_mangle]
pub extern "C" fn mlxcpp_tokjson_skeleton(
    h: *const MlxcppTokJson, out: *mut MlxcppBuf, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let s = serde_json::to_string(&handle(h)?.skeleton).map_err(json_err)?;
        put(out, MlxcppBuf::from_string(s))
    })
}

/// The size nlohmann::json gave model.vocab (what AddedVocabulary numbers new tokens from):
/// entries of an object or array, 0 for null, 1 for another scalar; -1 when there is no vocab
/// (or it moved into the tokenizer).
#[no_mangle]
pub extern "C" fn mlxcpp_tokjson_vocab_size(h: *const MlxcppTokJson) -> i64 {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match handle(h).map(|h| h.vocab.as_ref()) {
        Ok(Some(Value::Object(m))) => m.len() as i64,
        Ok(Some(Value::Array(a))) => a.len() as i64,
        Ok(Some(Value::Null)) => 0,
        Ok(Some(_)) => 1,
        Ok(None) | Err(_) => -1,
    }));
    r.unwrap_or(-1)
}

fn vocab_id(vocab: &Value, token: &str) -> Option<i64> {
    match vocab {
        // BPE, WordPiece, WordLevel: {token: id}; an id that is not an integer does not count.
        Value::Object(m) => m.get(token).and_then(|v| v.as_i64().or_else(|| v.as_u64().map(|u| u as i64))),
        // Unigram: [[piece, score], ...]; the index of the first matching piece.
        Value::Array(a) => a
            .iter()
            .position(|e| e.as_array().and_then(|p| p.first()).and_then(Value::as_str) == Some(token))
            .map(|i| i as i64),
        _ => None,
    }
}

/// 1 and *out set when model.vocab has the token, 0 when not, -1 on a bad argument.
#[no_mangle]
pub extern "C" fn mlxcpp_tokjson_vocab_id(
    h: *const MlxcppTokJson, token: *const u8, len: usize, out: *mut i64,
) -> i32 {
    lookup(|| {
        let token = utf8_arg(token, len, "token")?;
        match handle(h)?.vocab.as_ref().and_then(|v| vocab_id(v, token)) {
            Some(id) => put(out, id).map(|_| 1),
            None => Ok(0),
        }
    })
}

/// Builds the tokenizer from `json` (the edited skeleton) with the file's model.vocab and
/// model.merges put back into its "model" object; the file's merges replace a "merges" the
/// skeleton gained (the `[]` hf_compat adds when the file has none). Moves the vocab and merges
/// out of `h`: a second call is an error.
#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_from_tokjson(
    h: *mut MlxcppTokJson, json: *const u8, len: usize, out: *mut *mut MlxcppTokenizer,
    err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        // SAFETY: a non-null handle came from mlxcpp_tokjson_parse; the caller serializes use.
        let h = unsafe { h.as_mut() }.ok_or_else(|| Failure::new("null tokenizer.json handle"))?;
        if std::mem::replace(&mut h.built, true) {
            return Err(Failure::new("internal error: tokenizer.json handle already used"));
        }
        let text = utf8_arg(json, len, "tokenizer.json")?;
        let mut doc: Value = serde_json::from_str(text).map_err(json_err)?;
        if let Some(model) = model_mut(&mut doc) {
            for (key, value) in [("vocab", h.vocab.take()), ("merges", h.merges.take())] {
                if let Some(v) = value {
                    model.insert(key.to_string(), v);
                }
            }
        }
        put(out, MlxcppTokenizer::boxed(tokenizer_from_value(doc)?))
    })
}

/// `serde_json::from_value::<Tokenizer>`, minus a detour that dominates load time: tokenizers'
/// ModelWrapper::deserialize buffers the whole model as serde `Content` and then as a flattened
/// Value (every vocab string copied twice) before the model's own deserializer runs on that
/// Value without "type". Here a model whose "type" names it goes to that deserializer directly
/// (anything else through ModelWrapper), the rest of the document deserializes around a
/// placeholder model, and the added tokens are added last, as tokenizers' visitor does, once the
/// real model is in (their ids depend on its vocab).
fn tokenizer_from_value(mut doc: Value) -> Result<Tokenizer, Failure> {
    let Some(top) = doc.as_object_mut().filter(|d| d.get("model").is_some_and(Value::is_object)) else {
        return serde_json::from_value(doc).map_err(json_err); // the crate's own error
    };
    let placeholder = serde_json::json!({"type": "BPE", "vocab": {}, "merges": []});
    let Some(Value::Object(model)) = top.insert("model".into(), placeholder) else {
        unreachable!("checked to be an object above")
    };
    let added = top.insert("added_tokens".into(), Value::Array(Vec::new()));
    let mut tokenizer: Tokenizer = serde_json::from_value(doc).map_err(json_err)?;
    tokenizer.with_model(model_from_value(model)?);
    if let Some(added) = added {
        tokenizer.add_tokens(added_tokens(added)?).map_err(json_err)?;
    }
    Ok(tokenizer)
}

fn model_from_value(mut model: Map<String, Value>) -> Result<ModelWrapper, Failure> {
    let kind = model.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    if !matches!(kind.as_str(), "BPE" | "WordPiece" | "WordLevel" | "Unigram") {
        return serde_json::from_value(Value::Object(model)).map_err(json_err);
    }
    model.shift_remove("type");
    let rest = Value::Object(model);
    Ok(match kind.as_str() {
        "BPE" => ModelWrapper::BPE(serde_json::from_value(rest).map_err(json_err)?),
        "WordPiece" => ModelWrapper::WordPiece(serde_json::from_value(rest).map_err(json_err)?),
        "WordLevel" => ModelWrapper::WordLevel(serde_json::from_value(rest).map_err(json_err)?),
        _ => ModelWrapper::Unigram(serde_json::from_value(rest).map_err(json_err)?),
    })
}

/// tokenizers' AddedTokenWithId list: {"id": u32, ...AddedToken}; the id is only checked.
fn added_tokens(list: Value) -> Result<Vec<AddedToken>, Failure> {
    let Value::Array(list) = list else {
        return Err(Failure::new("field 'added_tokens': expected an array"));
    };
    list.into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let Value::Object(mut e) = entry else {
                return Err(Failure::new(format!("added_tokens[{i}]: expected an object")));
            };
            let id = e.shift_remove("id").and_then(|id| id.as_u64());
            if !id.is_some_and(|id| u32::try_from(id).is_ok()) {
                return Err(Failure::new(format!("added_tokens[{i}]: 'id' missing or not a u32")));
            }
            serde_json::from_value(Value::Object(e)).map_err(|e| Failure::new(format!("added_tokens[{i}]: {e}")))
        })
        .collect()
}
