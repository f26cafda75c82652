//! Chat templates through minijinja, configured like transformers' jinja2 environment:
//! trim_blocks + lstrip_blocks, loop controls, Python str/list/dict methods (pycompat),
//! `{{ x }}` printed the way Python's str() prints it, transformers' `tojson`,
//! `raise_exception` and `strftime_now`. Every jinja2 difference is fixed here, never per template.

use crate::ffi::*;
use crate::pyfmt::{json_dumps, py_str, JsonOpts};
use crate::strftime::strftime_now;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind, State};

const NAME: &str = "chat_template";
/// Marks an error raised by the template itself (`raise_exception`), not by the engine.
const RAISED: &str = "\u{1}raise_exception\u{1}";

pub struct MlxcppTemplate {
    env: Environment<'static>,
}

fn int_arg(v: &Value, what: &str) -> Result<Option<String>, Error> {
    if v.is_none() || v.is_undefined() {
        return Ok(None);
    }
    if let Some(s) = v.as_str() {
        return Ok(Some(s.to_string()));
    }
    match v.as_i64() {
        Some(n) if v.is_integer() => Ok(Some(" ".repeat(n.max(0) as usize))),
        _ => Err(Error::new(ErrorKind::InvalidOperation, format!("tojson: {what} must be an int or str"))),
    }
}

/// transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
/// (Positional separators/sort_keys are not supported; templates pass them by keyword.)
fn tojson(
    value: Value, ensure_ascii: Option<Value>, indent: Option<Value>, kwargs: Kwargs,
) -> Result<Value, Error> {
    let pick = |pos: Option<Value>, name: &str| -> Result<Option<Value>, Error> {
        let kw: Option<Value> = kwargs.get(name)?;
        Ok(kw.or(pos))
    };
    let ensure_ascii = pick(ensure_ascii, "ensure_ascii")?.map(|v| v.is_true()).unwrap_or(false);
    let indent = match pick(indent, "indent")? {
        Some(v) => int_arg(&v, "indent")?,
        None => None,
    };
    let (mut item_sep, key_sep) = match pick(None, "separators")? {
        Some(v) if !v.is_none() => {
            let parts: Vec<Value> = v.try_iter()?.collect();
            match (parts.first().and_then(|p| p.as_str()), parts.get(1).and_then(|p| p.as_str())) {
                (Some(a), Some(b)) if parts.len() == 2 => (a.to_string(), b.to_string()),
                _ => return Err(Error::new(ErrorKind::InvalidOperation, "tojson: separators must be a pair of strings")),
            }
        }
        _ => (", ".to_string(), ": ".to_string()),
    };
    let explicit_separators = kwargs.has("separators");
    if indent.is_some() && !explicit_separators && item_sep == ", " {
        item_sep = ",".to_string(); // json.dumps: (',', ': ') when indent is not None
    }
    let sort_keys = pick(None, "sort_keys")?.map(|v| v.is_true()).unwrap_or(false);
    kwargs.assert_all_used()?;
    let opts = JsonOpts { ensure_ascii, indent, item_sep, key_sep, sort_keys };
    let mut out = String::new();
    json_dumps(&value, &opts, 0, &mut out)?;
    Ok(Value::from(out))
}

fn raise_exception(message: Value) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, format!("{RAISED}{}", py_str(&message))))
}

fn environment() -> Result<Environment<'static>, Error> {
    let mut env = Environment::new();
    env.set_syntax(SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build()?);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(|out, _state, value| {
        out.write_str(&py_str(value)).map_err(Error::from)
    });
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", |state: &State, fmt: String| -> Result<Value, Error> {
        let now = state.lookup("__mlxcpp_now__");
        let now = now.as_ref().and_then(|v| v.as_str());
        strftime_now(&fmt, now).map(Value::from).map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("strftime_now: {e}")))
    });
    Ok(env)
}

fn describe(e: &Error) -> Failure {
    let mut msg = e.to_string();
    if let Some(detail) = e.detail() {
        if let Some(raised) = detail.strip_prefix(RAISED) {
            return Failure { code: MLXCPP_RAISED, message: raised.to_string() };
        }
    }
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    Failure::new(msg)
}

fn tmpl<'a>(t: *const MlxcppTemplate) -> Result<&'a MlxcppTemplate, Failure> {
    // SAFETY: a non-null handle came from mlxcpp_template_new and is not yet freed.
    unsafe { t.as_ref() }.ok_or_else(|| Failure::new("null template handle"))
}

#[no_mangle]
pub extern "C" fn mlxcpp_template_new(
    source: *const u8, len: usize, out: *mut *mut MlxcppTemplate, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let source = utf8_arg(source, len, "chat template")?.to_string();
        let mut env = environment().map_err(|e| describe(&e))?;
        env.add_template_owned(NAME, source).map_err(|e| describe(&e))?;
        put(out, Box::into_raw(Box::new(MlxcppTemplate { env })))
    })
}

#[no_mangle]
pub extern "C" fn mlxcpp_template_free(t: *mut MlxcppTemplate) {
    if !t.is_null() {
        // SAFETY: t came from mlxcpp_template_new.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { drop(Box::from_raw(t)) }));
    }
}

/// Renders with the variables of a JSON object (key order kept). `now` (may be null/empty):
/// "YYYY-MM-DD HH:MM:SS" pinned for strftime_now. Returns MLXCPP_RAISED when the template
/// called raise_exception (the message is then the template's own).
#[no_mangle]
pub extern "C" fn mlxcpp_template_render(
    t: *const MlxcppTemplate, context_json: *const u8, len: usize, now: *const u8, now_len: usize,
    out: *mut MlxcppBuf, err: *mut MlxcppBuf,
) -> i32 {
    guard(err, || {
        let t = tmpl(t)?;
        let ctx_text = utf8_arg(context_json, len, "template context")?;
        let now = utf8_arg(now, now_len, "fixed time")?;
        let ctx: serde_json::Map<String, serde_json::Value> = serde_json::from_str(ctx_text)
            .map_err(|e| Failure::new(format!("template context is not a JSON object: {e}")))?;
        let mut ctx = Value::from(minijinja::value::Serde(&ctx));
        if !now.is_empty() {
            ctx = minijinja::context! { __mlxcpp_now__ => now, ..ctx };
        }
        let template = t.env.get_template(NAME).map_err(|e| describe(&e))?;
        let text = template.render(ctx).map_err(|e| describe(&e))?;
        put(out, MlxcppBuf::from_string(text))
    })
}
