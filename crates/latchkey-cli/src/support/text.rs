//! Names and values from Redis, made safe to print as text.
//!
//! ```text
//! a\nb      a name with a newline (it would otherwise forge a table row)
//! x\e[2J    a name with ESC (it would otherwise reach the terminal)
//! \xff      a byte that is not UTF-8
//! ```
//!
//! Lock names are arbitrary bytes, written by whoever can write the keys.
//! Text output (`list`, `status`, `top`) shows them through [`escape`];
//! JSON output is escaped by the JSON encoder instead.

use std::fmt::Write;

/// `bytes` with every byte or character that could change what a terminal
/// or a table shows written as an escape: control characters (`\n`, `\t`,
/// `\r`, `\e`, `\xNN`, `\u{NNNN}`), Unicode direction and zero-width
/// formatting characters (`\u{NNNN}`), bytes that are not UTF-8 (`\xNN`),
/// and the backslash itself (`\\`, so an escape is never ambiguous).
/// Everything else, including non-ASCII letters, stays as it is.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\u{1b}' => out.push_str("\\e"),
                c if (c as u32) < 0x80 && c.is_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if c.is_control() || invisible(c) => {
                    let _ = write!(out, "\\u{{{:04x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// `text` cut to `width` characters, the last one `…` when cut: a table
/// cell stays one width whatever a name's length (names may be 1 KiB).
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Formatting characters that reorder or hide text (bidi overrides and
/// isolates, zero-width characters, the BOM): a name could use them to look
/// like another.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(super::cut("short", 8), "short");
        assert_eq!(super::cut("exactly8", 8), "exactly8");
        assert_eq!(super::cut("ninechars", 8), "ninecha…");
        assert_eq!(super::cut("ééééé", 3), "éé…");
    }

    #[test]
    fn printable_text_stays() {
        assert_eq!(escape(b"nightly-report:eu"), "nightly-report:eu");
        assert_eq!(escape("café €".as_bytes()), "café €");
    }

    #[test]
    fn what_could_forge_output_is_escaped() {
        assert_eq!(escape(b"a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(escape(b"x\x1b[2J"), "x\\e[2J");
        assert_eq!(escape(b"\x00\x7f"), "\\x00\\x7f");
        assert_eq!(escape(b"back\\slash"), "back\\\\slash");
        assert_eq!(
            escape("\u{202e}txt\u{85}".as_bytes()),
            "\\u{202e}txt\\u{0085}"
        );
        assert_eq!(escape(b"\xff\xfeok"), "\\xff\\xfeok");
    }
}
