//! RFC 4180 CSV records, for wide-schema qualifiers and values.
//!
//! A field is quoted when it contains `,`, `"`, `\r` or `\n`, or is empty
//! (so an empty field and a missing one differ); a quote inside a quoted
//! field is doubled.

/// Append one field to `out`, quoted when needed.
fn push_field(out: &mut String, field: &str) {
    let needs = field.is_empty() || field.contains([',', '"', '\r', '\n']);
    if needs {
        out.push('"');
        for c in field.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(field);
    }
}

/// One record: fields joined by `,`, quoted as needed.
pub fn encode<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = String::new();
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_field(&mut out, f.as_ref());
    }
    out
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

/// [`decode`] without allocating when the record has no quotes.
pub fn decode_cow(record: &str) -> Option<Vec<std::borrow::Cow<'_, str>>> {
    if record.contains('"') {
        Some(
            decode(record)?
                .into_iter()
                .map(std::borrow::Cow::Owned)
                .collect(),
        )
    } else {
        Some(record.split(',').map(std::borrow::Cow::Borrowed).collect())
    }
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
        assert_eq!(decode_cow("a,\"b,c\"").unwrap(), vec!["a", "b,c"]);
        assert_eq!(decode_cow("a,,b").unwrap(), vec!["a", "", "b"]);
        assert_eq!(decode("a\"b"), None);
        assert_eq!(decode("\"ab"), None);
        assert_eq!(decode("\"a\"b"), None);
    }
}
