//! A reply as Redis sends it (RESP2), and the number formats Redis uses.

use std::fmt;

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// A simple string (`+OK`).
    Status(String),
    /// An error (`-ERR …`), without the leading `-`.
    Error(String),
    /// An integer.
    Int(i64),
    /// A bulk string; `None` is the nil bulk (`$-1`).
    Bulk(Option<Vec<u8>>),
    /// An array; `None` is the nil array (`*-1`).
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Status("OK".to_owned())
    }

    /// The nil bulk string.
    pub fn nil() -> Reply {
        Reply::Bulk(None)
    }

    /// A bulk string of `bytes`.
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(Some(bytes.into()))
    }

    /// An array of `items`.
    pub fn array(items: Vec<Reply>) -> Reply {
        Reply::Array(Some(items))
    }

    /// An error reply with `message` (which starts with its code: `ERR …`).
    pub fn error(message: impl Into<String>) -> Reply {
        Reply::Error(message.into())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) => write!(f, "+{s}"),
            Reply::Error(e) => write!(f, "-{e}"),
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Bulk(None) | Reply::Array(None) => write!(f, "nil"),
            Reply::Bulk(Some(b)) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Reply::Array(Some(items)) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// `value` as C's `printf("%.17g")` writes it: how Redis formats a sorted
/// set's scores and how its Lua bridge turns a Lua number argument into a
/// string (Lua's own `%.14g` would round tokens above 10^14).
pub fn format_g17(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if value == value.trunc() && value.abs() < 1e17 {
        // Integral and within 17 digits: %.17g prints it without a point.
        return format!("{}", value as i64);
    }
    let sci = format!("{value:.16e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&exp) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let decimals = usize::try_from(16 - exp).unwrap_or(0);
    trim_fraction(&format!("{value:.decimals$}")).to_owned()
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::format_g17;

    #[test]
    fn formats_as_printf_g17() {
        assert_eq!(format_g17(1798765432123.0), "1798765432123");
        assert_eq!(format_g17(1.5), "1.5");
        assert_eq!(format_g17(-3.0), "-3");
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(f64::INFINITY), "inf");
    }
}
