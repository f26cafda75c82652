//! Buffers and error plumbing shared by every entry point.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Bytes owned by Rust (UTF-8 text unless stated); release with `mlxcpp_buf_free`.
#[repr(C)]
pub struct MlxcppBuf {
    pub data: *mut u8,
    pub len: usize,
}

/// Token ids owned by Rust; release with `mlxcpp_ids_free`.
#[repr(C)]
pub struct MlxcppIds {
    pub data: *mut u32,
    pub len: usize,
}

pub const MLXCPP_OK: i32 = 0;
pub const MLXCPP_ERROR: i32 = 1;
/// The template called `raise_exception(msg)`; the message is the template's.
pub const MLXCPP_RAISED: i32 = 2;

/// An error crossing the boundary: a status code and a message.
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn new(message: impl Into<String>) -> Self {
        Failure { code: MLXCPP_ERROR, message: message.into() }
    }
}

impl MlxcppBuf {
    pub fn empty() -> Self {
        MlxcppBuf { data: std::ptr::null_mut(), len: 0 }
    }
    pub fn from_string(s: String) -> Self {
        let boxed = s.into_bytes().into_boxed_slice();
        let len = boxed.len();
        MlxcppBuf { data: Box::into_raw(boxed) as *mut u8, len }
    }
}

#[no_mangle]
pub extern "C" fn mlxcpp_buf_free(buf: MlxcppBuf) {
    if !buf.data.is_null() {
        // SAFETY: data/len came from `MlxcppBuf::from_string` (a boxed slice of exactly len bytes).
        unsafe { drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.data, buf.len))) };
    }
}

pub fn ids_from_vec(v: Vec<u32>) -> MlxcppIds {
    let boxed = v.into_boxed_slice();
    let len = boxed.len();
    MlxcppIds { data: Box::into_raw(boxed) as *mut u32, len }
}

#[no_mangle]
pub extern "C" fn mlxcpp_ids_free(ids: MlxcppIds) {
    if !ids.data.is_null() {
        // SAFETY: data/len came from `ids_from_vec`.
        unsafe { drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ids.data, ids.len))) };
    }
}

/// Borrows `len` bytes at `ptr` as UTF-8 (a null pointer with len 0 is the empty string).
pub fn utf8_arg<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a str, Failure> {
    if len == 0 {
        return Ok("");
    }
    if ptr.is_null() {
        return Err(Failure::new(format!("{what}: null pointer")));
    }
    // SAFETY: the caller passes a readable region of len bytes that outlives the call.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    std::str::from_utf8(bytes).map_err(|e| {
        Failure::new(format!("{what} is not valid UTF-8 (invalid byte at offset {})", e.valid_up_to()))
    })
}

/// Runs `f`, converting an error or a panic into a status code and `*err`.
pub fn guard<F: FnOnce() -> Result<(), Failure>>(err: *mut MlxcppBuf, f: F) -> i32 {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return MLXCPP_OK,
        Ok(Err(failure)) => failure,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Failure::new(format!("internal error (panic in the Rust bridge): {what}"))
        }
    };
    if !err.is_null() {
        // SAFETY: err points to a caller-owned MlxcppBuf.
        unsafe { *err = MlxcppBuf::from_string(failure.message) };
    }
    failure.code
}

/// Writes through an out-pointer after checking it.
pub fn put<T>(out: *mut T, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::new("null output pointer"));
    }
    // SAFETY: checked non-null; the caller owns the storage.
    unsafe { out.write(value) };
    Ok(())
}
