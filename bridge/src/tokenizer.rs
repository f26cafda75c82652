//! HF `tokenizers` behind opaque handles. The C++ side builds the effective tokenizer.json
//! (transformers' per-class rules) and hands it over as a string, or as an edited skeleton of a
//! parsed file (tokjson.rs).

use crate::ffi::*;
use tokenizers::Tokenizer;

pub struct MlxcppTokenizer {
    inner: Tokenizer,
}

impl MlxcppTokenizer {
    pub fn boxed(inner: Tokenizer) -> *mut MlxcppTokenizer {
        Box::into_raw(Box::new(MlxcppTokenizer { inner }))
    }
}

/// State of one streaming decode (tokenizers' `DecodeStream`, minus the borrow of the
/// tokenizer, which the caller passes to every step and keeps alive).
pub struct MlxcppDecodeStream {
    skip_special_tokens: bool,
    ids: Vec<u32>,
    prefix: String,
    prefix_index: usize,
}

pub(crate) fn tok<'a>(t: *const MlxcppTokenizer) -> Result<&'a Tokenizer, Failure> {
    // SAFETY: a non-null handle came from mlxcpp_tokenizer_new/_from_tokjson and is not yet freed.
    unsafe { t.as_ref() }.map(|t| &t.inner).ok_or_else(|| Failure::new("null tokenizer handle"))
}

#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_new(
    json: *const u8, len: usize, out: *mut *mut MlxcppTokenizer, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let text = utf8_arg(json, len, "tokenizer.json")?;
        let inner: Tokenizer = text.parse().map_err(|e| Failure::new(format!("{e}")))?;
        put(out, MlxcppTokenizer::boxed(inner))
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_free(t: *mut MlxcppTokenizer) {
    // SAFETY: t came from mlxcpp_tokenizer_new or mlxcpp_tokenizer_from_tokjson.
    unsafe { free_boxed(t) }
}

/// Drops what a handle points to (null: nothing); a panic in a destructor stays on this side.
///
/// # Safety
/// `p` is null or came from `Box::into_raw` and is not used afterwards.
pub unsafe fn free_boxed<T>(p: *mut T) {
    if !p.is_null() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(Box::from_raw(p))));
    }
}

#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_encode(
    t: *const MlxcppTokenizer, text: *const u8, len: usize, add_special_tokens: i32,
    out: *mut MlxcppIds, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let text = utf8_arg(text, len, "text")?;
        let enc = tok(t)?
            .encode(text, add_special_tokens != 0)
            .map_err(|e| Failure::new(format!("encode failed: {e}")))?;
        put(out, ids_from_vec(enc.get_ids().to_vec()))
    })
}

pub(crate) fn ids_arg<'a>(ids: *const u32, n: usize) -> Result<&'a [u32], Failure> {
    if n == 0 {
        return Ok(&[]);
    }
    if ids.is_null() {
        return Err(Failure::new("null ids pointer"));
    }
    // SAFETY: the caller passes n readable ids.
    Ok(unsafe { std::slice::from_raw_parts(ids, n) })
}

#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_decode(
    t: *const MlxcppTokenizer, ids: *const u32, n: usize, skip_special_tokens: i32,
    out: *mut MlxcppBuf, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let ids = ids_arg(ids, n)?;
        let text = tok(t)?
            .decode(ids, skip_special_tokens != 0)
            .map_err(|e| Failure::new(format!("decode failed: {e}")))?;
        put(out, MlxcppBuf::from_string(text))
    })
}

/// Runs a lookup that answers 1 (found, out-pointer written) or 0 (not found); an error or a
/// panic becomes -1 (a bad argument): lookups have no message buffer.
pub fn lookup(f: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        _ => -1,
    }
}

/// 1 and *out set when the token exists (vocab or added), 0 when not, -1 on a bad argument.
#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_token_to_id(
    t: *const MlxcppTokenizer, token: *const u8, len: usize, out: *mut u32,
) -> i32 {
    lookup(|| {
        let token = utf8_arg(token, len, "token")?;
        match tok(t)?.token_to_id(token) {
            Some(id) => put(out, id).map(|_| 1),
            None => Ok(0),
        }
    })
}

/// 1 and *out set when the id exists, 0 when not, -1 on a bad argument.
#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_id_to_token(
    t: *const MlxcppTokenizer, id: u32, out: *mut MlxcppBuf,
) -> i32 {
    lookup(|| match tok(t)?.id_to_token(id) {
        Some(s) => put(out, MlxcppBuf::from_string(s)).map(|_| 1),
        None => Ok(0),
    })
}

/// Vocabulary size, with or without the added tokens; 0 for a null handle.
#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_vocab_size(t: *const MlxcppTokenizer, with_added: i32) -> usize {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tok(t).map(|t| t.get_vocab_size(with_added != 0)).unwrap_or(0)))
        .unwrap_or(0)
}

/// The loaded pipeline serialized back to tokenizer.json (for checks against the oracle).
#[no_mangle]
pub extern "C" fn mlxcpp_tokenizer_to_json(
    t: *const MlxcppTokenizer, out: *mut MlxcppBuf, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let s = tok(t)?.to_string(false).map_err(|e| Failure::new(format!("{e}")))?;
        put(out, MlxcppBuf::from_string(s))
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_decode_stream_new(skip_special_tokens: i32) -> *mut MlxcppDecodeStream {
    Box::into_raw(Box::new(MlxcppDecodeStream {
        skip_special_tokens: skip_special_tokens != 0,
        ids: Vec::new(),
        prefix: String::new(),
        prefix_index: 0,
    }))
}

#[no_mangle]
pub extern "C" fn mlxcpp_decode_stream_free(s: *mut MlxcppDecodeStream) {
    // SAFETY: s came from mlxcpp_decode_stream_new.
    unsafe { free_boxed(s) }
}

/// Feeds one id. *piece receives the newly completed text (data null when nothing is complete
/// yet, e.g. inside a multi-byte character).
#[no_mangle]
pub extern "C" fn mlxcpp_decode_stream_step(
    s: *mut MlxcppDecodeStream, t: *const MlxcppTokenizer, id: u32, piece: *mut MlxcppBuf,
    err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let tokenizer = tok(t)?;
        // SAFETY: a non-null handle came from mlxcpp_decode_stream_new; the caller serializes use.
        let s = unsafe { s.as_mut() }.ok_or_else(|| Failure::new("null decode stream handle"))?;
        let r = tokenizers::step_decode_stream(
            tokenizer, vec![id], s.skip_special_tokens, &mut s.ids, &mut s.prefix,
            &mut s.prefix_index,
        )
        .map_err(|e| Failure::new(format!("streaming decode failed at id {id}: {e}")))?;
        put(piece, r.map(MlxcppBuf::from_string).unwrap_or_else(MlxcppBuf::empty))
    })
}
