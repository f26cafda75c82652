//! `strftime_now(fmt)`: Python's `datetime.now().strftime(fmt)` calls the C library's strftime,
//! so we do too. A caller may pin "now" (tests, reproducible prompts).

use std::ffi::CString;

/// `now`: "YYYY-MM-DD HH:MM:SS" (naive local time) or None for the current local time.
pub fn strftime_now(fmt: &str, now: Option<&str>) -> Result<String, String> {
    // SAFETY: a zeroed tm is a valid value for localtime_r to fill.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    match now {
        Some(s) => {
            let p: Vec<i32> = s
                .split(|c: char| !c.is_ascii_digit())
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().unwrap_or(-1))
                .collect();
            if p.len() != 6 {
                return Err(format!("fixed time '{s}' is not 'YYYY-MM-DD HH:MM:SS'"));
            }
            tm.tm_year = p[0] - 1900;
            tm.tm_mon = p[1] - 1;
            tm.tm_mday = p[2];
            tm.tm_hour = p[3];
            tm.tm_min = p[4];
            tm.tm_sec = p[5];
            // timegm normalizes and fills tm_wday / tm_yday for the naive date.
            // SAFETY: tm is a valid, initialized struct.
            if unsafe { libc::timegm(&mut tm) } == -1 {
                return Err(format!("fixed time '{s}' is out of range"));
            }
        }
        None => {
            // SAFETY: time(NULL) and localtime_r with valid pointers.
            let t = unsafe { libc::time(std::ptr::null_mut()) };
            if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
                return Err("localtime_r failed".into());
            }
        }
    }
    let cfmt = CString::new(fmt).map_err(|_| "format contains a NUL byte".to_string())?;
    let mut cap = 256usize;
    loop {
        let mut buf = vec![0u8; cap];
        // SAFETY: buf has cap bytes; cfmt and tm are valid.
        let n = unsafe { libc::strftime(buf.as_mut_ptr() as *mut libc::c_char, cap, cfmt.as_ptr(), &tm) };
        if n > 0 || fmt.is_empty() {
            buf.truncate(n);
            return String::from_utf8(buf).map_err(|_| "strftime produced invalid UTF-8".to_string());
        }
        if cap > 1 << 16 {
            return Ok(String::new());
        }
        cap *= 4;
    }
}
