//! RE2 patterns, as Bigtable uses them, on Rust's `regex::bytes`.
//!
//! Bigtable matches a filter regex against the whole byte string, in RE2
//! syntax with Latin-1-style byte semantics: `.` matches any byte except
//! `\n`, `\C` matches any byte. Rust's regex crate speaks almost the same
//! dialect; this module bridges the rest: it anchors the pattern as
//! `\A(?:pat)\z`, turns off Unicode mode (so classes and `.` work on bytes),
//! writes every non-ASCII pattern byte as an `\xNN` escape (so it matches that
//! raw byte, as the emulator's pattern escaping does) and rewrites `\C` to
//! "any byte".

use regex::bytes::{Regex, RegexBuilder};

use crate::error::{Error, Result};

/// Largest compiled program accepted, so a hostile pattern cannot make a
/// request allocate without bound.
const SIZE_LIMIT: usize = 1 << 20;

/// Compile a Bigtable (RE2) regex into a full-match byte regex.
pub fn compile_full_match(pattern: &[u8]) -> Result<Regex> {
    let translated = translate(pattern);
    let anchored = format!("(?-u)\\A(?:{translated})\\z");
    RegexBuilder::new(&anchored)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| Error::InvalidRegex {
            pattern: String::from_utf8_lossy(pattern).into_owned(),
            reason: first_line(&e.to_string()),
        })
}

fn first_line(message: &str) -> String {
    // regex's messages are multi-line diagrams; keep the part that names the
    // problem so the error stays one line.
    message
        .lines()
        .rev()
        .find(|l| l.starts_with("error:"))
        .or_else(|| message.lines().next())
        .unwrap_or("invalid pattern")
        .trim_start_matches("error:")
        .trim()
        .to_string()
}

/// Rewrite RE2 bytes into a pattern string for `regex` in non-Unicode mode.
fn translate(pattern: &[u8]) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    while i < pattern.len() {
        let b = pattern[i];
        if b == b'\\' && i + 1 < pattern.len() {
            let next = pattern[i + 1];
            if next == b'C' {
                out.push_str("(?s:.)");
            } else if next.is_ascii() {
                out.push('\\');
                out.push(char::from(next));
            } else {
                // An escaped non-ASCII byte is that byte, literally.
                push_hex(&mut out, next);
            }
            i += 2;
            continue;
        }
        if b.is_ascii() && !b.is_ascii_control() {
            out.push(char::from(b));
        } else {
            push_hex(&mut out, b);
        }
        i += 1;
    }
    out
}

fn push_hex(out: &mut String, b: u8) {
    out.push_str(&format!("\\x{b:02X}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pat: &[u8], hay: &[u8]) -> bool {
        compile_full_match(pat)
            .map(|r| r.is_match(hay))
            .unwrap_or(false)
    }

    #[test]
    fn matches_the_whole_string_only() {
        assert!(m(b"ab", b"ab"));
        assert!(!m(b"a", b"ab"));
        assert!(!m(b"b", b"ab"));
        assert!(m(b"a|ab", b"ab"));
    }

    #[test]
    fn dot_skips_newline_but_backslash_c_matches_any_byte() {
        assert!(!m(b"r.2", b"r\n2"));
        assert!(m(b"r\\C2", b"r\n2"));
        assert!(m(b"r.2", b"r\xff2"));
        assert!(m(b"\\C*", b"\x00\n\xff"));
    }

    #[test]
    fn non_ascii_pattern_bytes_match_raw_bytes() {
        assert!(m("é".as_bytes(), "é".as_bytes()));
        assert!(m(b"\xff+", b"\xff\xff"));
        assert!(m(b"[\x80-\xff]", b"\x90"));
        assert!(m(b"a\\\xffb", b"a\xffb"));
    }

    #[test]
    fn escaped_backslash_before_c_is_a_literal_backslash() {
        assert!(m(b"\\\\C", b"\\C"));
        assert!(!m(b"\\\\C", b"xC"));
    }

    #[test]
    fn invalid_patterns_name_the_pattern() {
        match compile_full_match(b"(") {
            Err(Error::InvalidRegex { pattern, reason }) => {
                assert_eq!(pattern, "(");
                assert!(!reason.is_empty());
            }
            other => panic!("expected InvalidRegex, got {other:?}"),
        }
    }
}
