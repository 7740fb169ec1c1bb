//! A command's parameter values, as the gate, the executors and the
//! receipts see them (typed by the router from what was said).

use std::fmt;

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ParamValue {
    Text(String),
    Integer(i64),
    Number(f64),
    /// A duration, in seconds.
    Seconds(u64),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Text(s) => f.write_str(s),
            ParamValue::Integer(n) => write!(f, "{n}"),
            ParamValue::Number(x) if x.fract() == 0.0 && x.abs() < 1e15 => {
                write!(f, "{}", *x as i64)
            }
            ParamValue::Number(x) => write!(f, "{x}"),
            ParamValue::Seconds(s) => f.write_str(&human_duration(*s)),
        }
    }
}

/// "1 hour 30 minutes", "45 seconds".
pub fn human_duration(seconds: u64) -> String {
    let parts = [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    let mut rest = seconds;
    let mut out = Vec::new();
    for (unit, name) in parts {
        let n = rest / unit;
        rest %= unit;
        if n > 0 {
            out.push(format!("{n} {name}{}", if n == 1 { "" } else { "s" }));
        }
    }
    if out.is_empty() {
        "0 seconds".into()
    } else {
        out.join(" ")
    }
}
