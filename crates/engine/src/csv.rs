//! RFC 4180 CSV records, for wide-schema qualifiers and values.
//!
//! A field is quoted when it contains `,`, `"`, `\r` or `\n`, or is empty
//! (so an empty field and a missing one differ); a quote inside a quoted
//! field is doubled.

/// Where records are written: a `String`, or the bytes of an
/// [`crate::arena::Arena`].
pub trait Sink {
    fn put(&mut self, text: &str);
}

impl Sink for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

impl Sink for bytes::BytesMut {
    fn put(&mut self, text: &str) {
        self.extend_from_slice(text.as_bytes());
    }
}

/// Append one field to `out`, quoted when needed.
fn push_field(out: &mut impl Sink, field: &str) {
    let needs = field.is_empty()
        || field
            .bytes()
            // Every byte that needs quotes is at most `,` (0x2c).
            .any(|b| b <= b',' && matches!(b, b',' | b'"' | b'\r' | b'\n'));
    if needs {
        out.put("\"");
        for (i, part) in field.split('"').enumerate() {
            if i > 0 {
                out.put("\"\"");
            }
            out.put(part);
        }
        out.put("\"");
    } else {
        out.put(field);
    }
}

/// One record: fields joined by `,`, quoted as needed.
pub fn encode<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = String::with_capacity(fields.iter().map(|f| f.as_ref().len() + 1).sum());
    push_record(&mut out, fields);
    out
}

/// Append one record to `out`.
pub fn push_record<S: AsRef<str>>(out: &mut impl Sink, fields: &[S]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.put(",");
        }
        push_field(out, f.as_ref());
    }
}

/// Parse one record written by [`encode`]; `None` when malformed.
pub fn decode(record: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut chars = record.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => break,
                    c => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Some(fields);
                }
                Some(',') => fields.push(field),
                Some(_) => return None,
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Some(fields);
                    }
                    Some(',') => break,
                    Some('"') => return None,
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

/// [`decode`] into a fixed array, borrowing the fields of a record without
/// quotes, for records of at most `N` fields (the hot path reads
/// millions): the fields and how many there are. `None` for a malformed
/// record or one with more than `N` fields.
pub fn decode_n<const N: usize>(record: &str) -> Option<([std::borrow::Cow<'_, str>; N], usize)> {
    let mut out: [std::borrow::Cow<'_, str>; N] =
        std::array::from_fn(|_| std::borrow::Cow::Borrowed(""));
    let mut n = 0;
    // Bytewise: records are short, where a `char` search costs more than
    // the loop (a comma or quote byte is never inside another character).
    let bytes = record.as_bytes();
    if bytes.contains(&b'"') {
        for field in decode(record)? {
            *out.get_mut(n)? = std::borrow::Cow::Owned(field);
            n += 1;
        }
    } else {
        let mut start = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b',' {
                *out.get_mut(n)? = std::borrow::Cow::Borrowed(&record[start..i]);
                n += 1;
                start = i + 1;
            }
        }
        *out.get_mut(n)? = std::borrow::Cow::Borrowed(&record[start..]);
        n += 1;
    }
    Some((out, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_when_needed_and_round_trips() {
        assert_eq!(
            encode(&["click", "Product Viewed", "brand"]),
            "click,Product Viewed,brand"
        );
        assert_eq!(
            encode(&["a,b", "say \"hi\"", ""]),
            "\"a,b\",\"say \"\"hi\"\"\",\"\""
        );
        for fields in [
            vec!["click", "a,b", "c\"d", "", "line\nbreak"],
            vec![""],
            vec!["x"],
            vec!["é,ü", "\"\""],
        ] {
            let text = encode(&fields);
            assert_eq!(decode(&text).unwrap(), fields, "{text}");
        }
        let (fields, n) = decode_n::<3>("a,\"b,c\"").unwrap();
        assert_eq!((&fields[..n], n), (&["a".into(), "b,c".into()][..], 2));
        let (fields, n) = decode_n::<3>("x,,z").unwrap();
        assert_eq!(&fields[..n], ["x", "", "z"]);
        assert!(decode_n::<3>("a,b,c,d").is_none());
        assert!(decode_n::<3>("\"ab").is_none());
        assert_eq!(decode("a\"b"), None);
        assert_eq!(decode("\"ab"), None);
        assert_eq!(decode("\"a\"b"), None);
    }

    proptest::proptest! {
        /// The fast path agrees with the general decoder on any record,
        /// with or without quotes, up to its field count.
        #[test]
        fn decode_n_agrees_with_decode(record in "[a,\"é ]{0,12}") {
            let general = decode(&record).filter(|f| f.len() <= 3);
            let fast = decode_n::<3>(&record)
                .map(|(fields, n)| fields[..n].iter().map(|f| f.to_string()).collect::<Vec<_>>());
            proptest::prop_assert_eq!(fast, general, "{:?}", record);
        }
    }
}
