//! mlxcpp's one Rust crate: HF `tokenizers`, `minijinja` and `llguidance` behind the C API in
//! `include/mlxcpp_bridge.h`. Thin wrappers only; the jinja2 compatibility fixes live in
//! `template.rs`/`pyfmt.rs`. Nothing panics across the boundary: every entry point runs inside
//! `guard`, which turns errors and panics into a status code plus a message buffer.

mod ffi;
mod grammar;
mod pyfmt;
mod strftime;
mod template;
mod tokbytes;
mod tokenizer;
mod tokjson;

pub use ffi::*;
pub use grammar::*;
pub use template::*;
pub use tokenizer::*;
pub use tokjson::*;
