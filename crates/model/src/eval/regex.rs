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
use regex_syntax::hir::{Class, Hir, HirKind};

use crate::error::{Error, Result};

/// Largest compiled program accepted, so a hostile pattern cannot make a
/// request allocate without bound.
const SIZE_LIMIT: usize = 1 << 20;

/// Compile a Bigtable (RE2) regex into a full-match byte regex.
pub fn compile_full_match(pattern: &[u8]) -> Result<Regex> {
    build(pattern, &anchor(&translate(pattern)))
}

/// The regex of `pattern`, given as [`anchor`] wrote its translation.
fn build(pattern: &[u8], anchored: &str) -> Result<Regex> {
    RegexBuilder::new(anchored)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| Error::InvalidRegex {
            pattern: String::from_utf8_lossy(pattern).into_owned(),
            reason: first_line(&e.to_string()),
        })
}

/// Largest finite language kept as a set of strings.
const MAX_LITERALS: usize = 256;

/// A compiled full-match pattern. A pattern whose language is a small
/// finite set of strings (a literal, an alternation of literals: what
/// exact-column filters are) is matched by comparing against that set,
/// which costs a few `memcmp`s instead of a regex search per cell, and
/// builds no regex; any other pattern by the regex.
#[derive(Debug, Clone)]
pub struct FullMatch {
    /// The pattern as the regex is built from it (anchored).
    anchored: Box<str>,
    matcher: Matcher,
}

#[derive(Debug, Clone)]
enum Matcher {
    /// The language, sorted and deduplicated, when small and finite.
    Literals(Vec<Box<[u8]>>),
    Regex(Regex),
}

impl FullMatch {
    /// Compile (and validate) a Bigtable (RE2) regex. A literal (such as
    /// an escaped family name) is recognised without parsing: filters are
    /// compiled per request, and building a regex took a fifth of the CPU
    /// of a profile read that names three families.
    pub fn compile(pattern: &[u8]) -> Result<FullMatch> {
        let translated = translate(pattern);
        let anchored = anchor(&translated).into_boxed_str();
        if pattern.len() <= PLAIN_MAX && plain_literal(pattern) {
            let matcher = Matcher::Literals(vec![pattern.into()]);
            return Ok(FullMatch { anchored, matcher });
        }
        // Built even when the language is finite: the builder is what
        // validates a pattern (and bounds its size).
        let regex = build(pattern, &anchored)?;
        let matcher = match finite_language(&translated) {
            Some(set) => Matcher::Literals(set),
            None => Matcher::Regex(regex),
        };
        Ok(FullMatch { anchored, matcher })
    }

    /// The language, sorted and deduplicated, when small and finite.
    pub fn literals(&self) -> Option<&[Box<[u8]>]> {
        match &self.matcher {
            Matcher::Literals(set) => Some(set),
            Matcher::Regex(_) => None,
        }
    }

    /// The pattern, anchored, to compare two matchers.
    pub fn pattern(&self) -> &str {
        &self.anchored
    }

    /// Whether the whole of `haystack` matches.
    pub fn is_match(&self, haystack: &[u8]) -> bool {
        match &self.matcher {
            Matcher::Literals(set) => in_literal_set(set, haystack),
            Matcher::Regex(regex) => regex.is_match(haystack),
        }
    }
}

/// Longest pattern [`plain_literal`] is trusted for (far below what the
/// regex builder's size limit refuses).
const PLAIN_MAX: usize = 1024;

/// True when `pattern` has no byte RE2 treats specially: it matches
/// exactly itself.
fn plain_literal(pattern: &[u8]) -> bool {
    pattern
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || b"_-,:;/=@#%&'\"<>!~` ".contains(b))
}

fn anchor(translated: &str) -> String {
    format!("(?-u)\\A(?:{translated})\\z")
}

/// Whether `haystack` is one of `set` (sorted, deduplicated).
pub(crate) fn in_literal_set(set: &[Box<[u8]>], haystack: &[u8]) -> bool {
    if set.len() <= 8 {
        set.iter().any(|l| **l == *haystack)
    } else {
        set.binary_search_by(|l| (**l).cmp(haystack)).is_ok()
    }
}

/// Every string the (translated, byte-mode) pattern matches in full, when
/// that is a finite set of at most [`MAX_LITERALS`].
fn finite_language(translated: &str) -> Option<Vec<Box<[u8]>>> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(translated)
        .ok()?;
    let mut set = language(&hir)?;
    set.sort_unstable();
    set.dedup();
    Some(set.into_iter().map(Vec::into_boxed_slice).collect())
}

/// Every head followed by every tail; `None` past [`MAX_LITERALS`].
fn product(heads: &[Vec<u8>], tails: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    if heads.len().saturating_mul(tails.len()) > MAX_LITERALS {
        return None;
    }
    Some(
        heads
            .iter()
            .flat_map(|head| {
                tails
                    .iter()
                    .map(move |tail| [head.as_slice(), tail].concat())
            })
            .collect(),
    )
}

fn language(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    match hir.kind() {
        HirKind::Empty => Some(vec![Vec::new()]),
        HirKind::Literal(lit) => Some(vec![lit.0.to_vec()]),
        HirKind::Class(Class::Bytes(class)) => {
            let mut out = Vec::new();
            for range in class.iter() {
                for b in range.start()..=range.end() {
                    if out.len() == MAX_LITERALS {
                        return None;
                    }
                    out.push(vec![b]);
                }
            }
            Some(out)
        }
        HirKind::Capture(capture) => language(&capture.sub),
        HirKind::Concat(parts) => {
            let mut out = vec![Vec::new()];
            for part in parts {
                out = product(&out, &language(part)?)?;
            }
            Some(out)
        }
        HirKind::Alternation(alternatives) => {
            let mut out = Vec::new();
            for alternative in alternatives {
                out.extend(language(alternative)?);
                if out.len() > MAX_LITERALS {
                    return None;
                }
            }
            Some(out)
        }
        // `x?`, `x{2,3}`: the parser turns some alternations into these.
        HirKind::Repetition(rep) if rep.max.is_some_and(|max| max <= 4) => {
            let once = language(&rep.sub)?;
            let mut power = vec![Vec::new()];
            let mut out = Vec::new();
            for k in 0..=rep.max.unwrap_or(0) {
                if k >= rep.min {
                    out.extend(power.iter().cloned());
                }
                if Some(k) == rep.max {
                    break;
                }
                power = product(&power, &once)?;
                if out.len() > MAX_LITERALS {
                    return None;
                }
            }
            Some(out)
        }
        // Unicode classes (not produced in byte mode), anchors and
        // unbounded repetitions: left to the regex.
        _ => None,
    }
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
    fn finite_patterns_match_by_set_and_agree_with_the_regex() {
        let cases: [(&[u8], bool); 9] = [
            (b"abc", true),
            (b"(?:a|b|abc)", true),
            (b"x[0-3]y|z", true),
            (b"(?i)ab", true),
            (b"a.c", true),
            (b"..", false),
            (b"ab?c{1,2}", true),
            (b"a+", false),
            (b"\\Cq", true),
        ];
        let hays: [&[u8]; 12] = [
            b"", b"a", b"b", b"abc", b"ab", b"AB", b"aB", b"x2y", b"x4y", b"z", b"\\Cq", b"a\nc",
        ];
        for (pattern, finite) in cases {
            let m = FullMatch::compile(pattern).expect("compiles");
            assert_eq!(
                m.literals().is_some(),
                finite,
                "{:?}",
                String::from_utf8_lossy(pattern)
            );
            let re = compile_full_match(pattern).expect("compiles");
            for hay in hays {
                assert_eq!(m.is_match(hay), re.is_match(hay), "{pattern:?} on {hay:?}");
            }
        }
        let many: Vec<String> = (0..40).map(|i| format!("q{i}")).collect();
        let m = FullMatch::compile(many.join("|").as_bytes()).expect("compiles");
        assert!(m.literals().is_some_and(|l| l.len() == 40));
        assert!(
            m.is_match(b"q17") && m.is_match(b"q1") && !m.is_match(b"q40") && !m.is_match(b"q")
        );
    }

    #[test]
    fn plain_literals_build_no_regex_and_match_as_the_regex_does() {
        // Every printable ASCII byte, in a pattern of its own: the ones
        // taken as plain literals must match exactly what the regex does.
        let mut plain = 0;
        for b in 0x20u8..0x7f {
            let pattern = [b'a', b, b'b'];
            let Ok(re) = compile_full_match(&pattern) else {
                continue;
            };
            let m = FullMatch::compile(&pattern).expect("compiles");
            assert_eq!(m.pattern(), re.as_str());
            if plain_literal(&pattern) {
                plain += 1;
                assert!(matches!(m.matcher, Matcher::Literals(_)), "{pattern:?}");
            }
            for hay in [&pattern[..], b"ab", b"a\nb", b"axb", b"aab", b"a b"] {
                assert_eq!(m.is_match(hay), re.is_match(hay), "{pattern:?} on {hay:?}");
            }
        }
        assert!(plain > 70, "{plain}");
        // Family names as the engine escapes them.
        for name in ["n", "t", "i", "cf_1", "a-b"] {
            let escaped = regex::escape(name);
            let m = FullMatch::compile(escaped.as_bytes()).expect("compiles");
            assert!(matches!(m.matcher, Matcher::Literals(_)), "{escaped}");
            assert!(m.is_match(name.as_bytes()) && !m.is_match(b"nn"));
        }
        // A long literal goes through the regex builder and its size limit.
        let long = vec![b'x'; PLAIN_MAX + 1];
        let m = FullMatch::compile(&long).expect("compiles");
        assert!(m.is_match(&long) && !m.is_match(b"x"));
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
