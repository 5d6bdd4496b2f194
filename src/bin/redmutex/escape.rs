//! Names and values made safe to print on a terminal, reversibly: a lock's name may hold
//! any bytes, and printed raw, `ESC ]0;title BEL` retitles the terminal, `ESC [2J` clears
//! it and a newline breaks a table. The escaped form is what the tool prints, and what
//! `show` and `unlock` take back, so that the name printed is the key acted on.
//!
//! UTF-8 text is kept as it is, except:
//!
//! | what | written |
//! |---|---|
//! | backslash | `\\` |
//! | newline, carriage return, tab | `\n`, `\r`, `\t` |
//! | any other control character (C0, DEL, C1), a line or paragraph separator, a bidirectional control | its UTF-8 bytes, each `\xNN` |
//! | a byte that is not UTF-8 | `\xNN` |

use std::fmt::Write;

/// `bytes` as text with nothing a terminal acts on: see the module's table.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if acts_on_terminal(c) => hex(&mut out, c.encode_utf8(&mut [0; 4]).as_bytes()),
                c => out.push(c),
            }
        }
        hex(&mut out, chunk.invalid());
    }
    out
}

/// [`escape`] of text.
pub fn escape_str(text: &str) -> String {
    escape(text.as_bytes())
}

/// The bytes that `text`, as [`escape`] writes it, stands for. Bytes outside an escape
/// are taken as they are, so that a name given raw works too; a backslash must begin one
/// of `\\`, `\n`, `\r`, `\t` or `\xNN` (two hex digits). Why not, otherwise.
pub fn unescape(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some((&byte, tail)) = rest.split_first() {
        rest = tail;
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        let Some((&kind, tail)) = rest.split_first() else {
            return Err("it ends in a lone backslash (a backslash is written \\\\)".into());
        };
        rest = tail;
        match kind {
            b'\\' => out.push(b'\\'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'x' => match rest {
                [high, low, tail @ ..] if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                    out.push(hex_value(*high) << 4 | hex_value(*low));
                    rest = tail;
                }
                _ => return Err("\\x takes two hex digits, as in \\x1b".into()),
            },
            other => {
                return Err(format!(
                    "\\{} is no escape (a backslash is written \\\\)",
                    escape(&[other])
                ));
            }
        }
    }
    Ok(out)
}

/// Characters that a terminal may act on instead of showing: controls, the Unicode line
/// and paragraph separators, and the bidirectional controls that reorder what follows.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Whether a JSON text must write `c` as a `\u` escape to be safe on a terminal: what
/// [`escape`] escapes, but for the newlines of its layout (inside its strings, JSON
/// escapes them already).
pub fn json_escapes(c: char) -> bool {
    c != '\n' && acts_on_terminal(c)
}

fn hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let _ = write!(out, "\\x{byte:02x}");
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_controls_are_escaped_and_text_is_kept() {
        let hostile = b"evil\x1b]0;pwned\x07\x1b[2J\nrow\\\t\r\x7f";
        assert_eq!(
            escape(hostile),
            r"evil\x1b]0;pwned\x07\x1b[2J\nrow\\\t\r\x7f"
        );
        assert_eq!(escape(b"caf\xff"), r"caf\xff");
        assert_eq!(escape("orders:42 café ×2".as_bytes()), "orders:42 café ×2");
        // A C1 control (CSI) and a right-to-left override, by their UTF-8 bytes.
        assert_eq!(
            escape("a\u{9b}b\u{202e}c".as_bytes()),
            r"a\xc2\x9bb\xe2\x80\xaec"
        );
    }

    #[test]
    fn the_printed_form_and_raw_bytes_are_taken_back() {
        assert_eq!(unescape(br"evil\x1B\n\\").unwrap(), b"evil\x1b\n\\");
        assert_eq!(unescape(b"raw\x1b\xff").unwrap(), b"raw\x1b\xff");
        assert_eq!(unescape("café".as_bytes()).unwrap(), "café".as_bytes());
    }

    #[test]
    fn a_backslash_that_begins_no_escape_is_refused() {
        for bad in [&br"a\"[..], br"a\q", br"a\x1", br"a\x+f", br"a\xzz"] {
            assert!(unescape(bad).is_err(), "{}", escape(bad));
        }
    }

    proptest! {
        #[test]
        fn unescape_undoes_escape(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(unescape(escape(&bytes).as_bytes()).unwrap(), bytes);
        }

        #[test]
        fn escaped_text_holds_nothing_a_terminal_acts_on(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let escaped = escape(&bytes);
            prop_assert!(!escaped.chars().any(acts_on_terminal), "{:?}", escaped);
        }

        #[test]
        fn unescape_undoes_escape_of_text(text in any::<String>()) {
            prop_assert_eq!(unescape(escape_str(&text).as_bytes()).unwrap(), text.as_bytes());
        }
    }
}
