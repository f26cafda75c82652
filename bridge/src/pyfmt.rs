//! Python's spelling of values, where minijinja's differs from jinja2's: `str()` for `{{ x }}`
//! output (None, True, [1, 'a'], {'k': 2.0}) and `json.dumps` for transformers' `tojson` filter.

use minijinja::value::{Value, ValueKind};
use minijinja::Error;
use std::fmt::Write;

/// Python's `repr(float)`: shortest round-trip digits, scientific when exp < -4 or >= 16.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let sci = format!("{:e}", f); // e.g. "-1.2345e-7", shortest round-trip digits
    let (mant, exp) = sci.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exp - 1) as usize));
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.push_str(&"0".repeat(int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    out
}

fn number_str(v: &Value) -> String {
    if v.is_integer() {
        v.to_string()
    } else {
        float_repr(f64::try_from(v.clone()).unwrap_or(f64::NAN))
    }
}

/// Python's `repr(str)`.
fn str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (c as u32) == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

fn items(v: &Value) -> Vec<Value> {
    v.try_iter().map(|it| it.collect()).unwrap_or_default()
}

fn repr_into(v: &Value, out: &mut String) {
    match v.kind() {
        ValueKind::String => str_repr(v.as_str().unwrap_or(""), out),
        ValueKind::Seq | ValueKind::Iterable => {
            let (open, close) = if v.is_tuple() { ("(", ")") } else { ("[", "]") };
            out.push_str(open);
            let all = items(v);
            for (i, item) in all.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr_into(item, out);
            }
            if v.is_tuple() && all.len() == 1 {
                out.push(',');
            }
            out.push_str(close);
        }
        ValueKind::Map => {
            out.push('{');
            for (i, k) in items(v).iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr_into(k, out);
                out.push_str(": ");
                repr_into(&v.get_item(k).unwrap_or_default(), out);
            }
            out.push('}');
        }
        _ => out.push_str(&py_str(v)),
    }
}

/// Python's `str(value)` as jinja2 prints `{{ value }}`.
pub fn py_str(v: &Value) -> String {
    match v.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::None => "None".into(),
        ValueKind::Bool => if v.is_true() { "True".into() } else { "False".into() },
        ValueKind::Number => number_str(v),
        ValueKind::String => v.as_str().unwrap_or("").to_string(),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
            let mut s = String::new();
            repr_into(v, &mut s);
            s
        }
        _ => v.to_string(),
    }
}

/// Options of Python's `json.dumps` as transformers' `tojson` exposes them.
pub struct JsonOpts {
    pub ensure_ascii: bool,
    pub indent: Option<String>,
    pub item_sep: String,
    pub key_sep: String,
    pub sort_keys: bool,
}

fn json_str(s: &str, ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ascii && (c as u32) > 0x7e) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_key(k: &Value) -> Result<String, Error> {
    Ok(match k.kind() {
        ValueKind::String => k.as_str().unwrap_or("").to_string(),
        ValueKind::None => "null".into(),
        ValueKind::Bool => if k.is_true() { "true".into() } else { "false".into() },
        ValueKind::Number => number_str(k),
        _ => return Err(invalid(format!("keys must be str, int, float, bool or None, not {}", k.kind()))),
    })
}

fn invalid(msg: String) -> Error {
    Error::new(minijinja::ErrorKind::InvalidOperation, msg)
}

fn newline(o: &JsonOpts, level: usize, out: &mut String) {
    if let Some(ind) = &o.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(ind);
        }
    }
}

pub fn json_dumps(v: &Value, o: &JsonOpts, level: usize, out: &mut String) -> Result<(), Error> {
    match v.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Undefined => return Err(invalid("Object of type Undefined is not JSON serializable".into())),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number if !v.is_integer() => {
            let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
            out.push_str(&if f.is_nan() {
                "NaN".into()
            } else if f.is_infinite() {
                if f > 0.0 { "Infinity".into() } else { "-Infinity".into() }
            } else {
                float_repr(f)
            });
        }
        ValueKind::Number => out.push_str(&v.to_string()),
        ValueKind::String => json_str(v.as_str().unwrap_or(""), o.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let all = items(v);
            if all.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in all.iter().enumerate() {
                if i > 0 {
                    out.push_str(&o.item_sep);
                }
                newline(o, level + 1, out);
                json_dumps(item, o, level + 1, out)?;
            }
            newline(o, level, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut entries = Vec::new();
            for k in items(v) {
                let val = v.get_item(&k)?;
                entries.push((json_key(&k)?, val));
            }
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if o.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, val)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(&o.item_sep);
                }
                newline(o, level + 1, out);
                json_str(k, o.ensure_ascii, out);
                out.push_str(&o.key_sep);
                json_dumps(val, o, level + 1, out)?;
            }
            newline(o, level, out);
            out.push('}');
        }
        kind => return Err(invalid(format!("Object of type {kind} is not JSON serializable"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::float_repr;
    #[test]
    fn floats_like_python() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1.5e-5), "1.5e-05");
        assert_eq!(float_repr(0.0001), "0.0001");
        assert_eq!(float_repr(123456789012345.6), "123456789012345.6");
        assert_eq!(float_repr(-2.5), "-2.5");
    }
}
