//! A JSON object read one level deep: each member's name and the text of
//! its value, borrowed from the request body. A re-ranking body carries
//! a search engine's hits, most of whose attributes (names, highlights,
//! images) Affinity only hands back: they are copied as text instead of
//! being parsed into `Value`s and written again.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Past this many members, a repeated name is found through a map.
const LINEAR_LOOKUP: usize = 16;

/// An object's members in the order sent. A name sent twice keeps its
/// last value, at its first place (as a JSON object reader keeps the
/// last).
#[derive(Debug)]
pub(crate) struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// The members of `value`, `None` when it is not an object.
    pub(crate) fn of(value: &'a RawValue) -> Option<Members<'a>> {
        if !value.get().starts_with('{') {
            return None;
        }
        // The text was checked as JSON when the body was read.
        serde_json::from_str(value.get()).ok()
    }

    /// The value of member `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &'a RawValue)> {
        self.0.iter().map(|(n, v)| (n.as_ref(), *v))
    }
}

/// An object's members read in one pass with its member `field` (named
/// once) read as an array of objects: the other members as [`Members`]
/// (without `field`), and `field`'s objects. `None` when the text is not
/// such an object (not JSON, not an object, `field` missing or not an
/// array of objects, a name sent twice, not UTF-8): the caller reads it
/// the general way, which names what is wrong. A re-ranking body's hits are read so,
/// instead of being scanned once as text and again as objects.
pub(crate) fn with_objects<'a>(
    text: &'a [u8],
    field: &'static str,
) -> Option<(Members<'a>, Vec<Members<'a>>)> {
    struct Split<'a>(Members<'a>, Vec<Members<'a>>);
    struct SplitSeed(&'static str);
    impl<'de> DeserializeSeed<'de> for SplitSeed {
        type Value = Split<'de>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Split<'de>, D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for SplitSeed {
        type Value = Split<'de>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Split<'de>, A::Error> {
            let mut members: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::new();
            let mut objects = None;
            let twice = || de::Error::custom("a name sent twice");
            while let Some(Name(name)) = map.next_key()? {
                if name == self.0 {
                    if objects.is_some() {
                        return Err(twice());
                    }
                    objects = Some(map.next_value::<Vec<Members<'de>>>()?);
                } else {
                    if members.iter().any(|(n, _)| *n == name) {
                        return Err(twice());
                    }
                    members.push((name, map.next_value()?));
                }
            }
            match objects {
                Some(objects) => Ok(Split(Members(members), objects)),
                None => Err(de::Error::missing_field(self.0)),
            }
        }
    }
    // Checked as UTF-8 once, here: read from a `str`, serde_json takes
    // each name, string and raw value as it is instead of checking its
    // bytes again.
    let mut de = serde_json::Deserializer::from_str(std::str::from_utf8(text).ok()?);
    let split = SplitSeed(field).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some((split.0, split.1))
}

/// A member name: borrowed when it has no escapes.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        d.deserialize_str(NameVisitor)
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::new();
                let mut index: Option<HashMap<Cow<'de, str>, usize>> = None;
                while let Some(Name(name)) = map.next_key()? {
                    let value: &'de RawValue = map.next_value()?;
                    let seen = match &index {
                        Some(index) => index.get(&name).copied(),
                        None => members.iter().position(|(n, _)| *n == name),
                    };
                    match seen {
                        Some(i) => members[i].1 = value,
                        None => {
                            if let Some(index) = &mut index {
                                index.insert(name.clone(), members.len());
                            }
                            members.push((name, value));
                            if index.is_none() && members.len() > LINEAR_LOOKUP {
                                index = Some(
                                    members
                                        .iter()
                                        .enumerate()
                                        .map(|(i, (n, _))| (n.clone(), i))
                                        .collect(),
                                );
                            }
                        }
                    }
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(MembersVisitor)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    fn members(text: &str) -> Vec<(String, Value)> {
        let raw: &RawValue = serde_json::from_str(text).unwrap();
        Members::of(raw)
            .unwrap()
            .iter()
            .map(|(n, v)| (n.to_string(), serde_json::from_str(v.get()).unwrap()))
            .collect()
    }

    #[test]
    fn members_keep_their_order_text_and_the_last_of_a_repeated_name() {
        let got = members(r#"{"b": [1, {"x": "y"}], "a\"q": "é\n", "b": 2, "c": null}"#);
        assert_eq!(
            got,
            [
                ("b".to_string(), Value::from(2)),
                ("a\"q".to_string(), Value::from("é\n")),
                ("c".to_string(), Value::Null),
            ]
        );
        let raw: &RawValue = serde_json::from_str("[1]").unwrap();
        assert!(Members::of(raw).is_none());
        let raw: &RawValue = serde_json::from_str("\"{\"").unwrap();
        assert!(Members::of(raw).is_none());
    }

    #[test]
    fn an_array_of_objects_is_read_in_the_same_pass_or_not_at_all() {
        let (rest, hits) = with_objects(
            br#"{"userToken":"u","hits":[{"objectID":"a","x":[1]},{"b":2,"b":3}],"n":1} "#,
            "hits",
        )
        .unwrap();
        let names: Vec<&str> = rest.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["userToken", "n"]);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].get("x").unwrap().get(), "[1]");
        assert_eq!(
            hits[1].get("b").unwrap().get(),
            "3",
            "the last of a name in a hit"
        );
        for other in [
            &br#"{"hits":[{"a":1},[1]]}"#[..],
            br#"{"hits":{"a":1}}"#,
            br#"{"userToken":"u"}"#,
            br#"{"hits":[],"hits":[]}"#,
            br#"{"u":1,"hits":[],"u":2}"#,
            br#"{"hits":[]} x"#,
            br#"[{"hits":[]}]"#,
            b"{",
            b"{\"hits\":[{\"a\":\"\xff\"}]}",
        ] {
            assert!(
                with_objects(other, "hits").is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    proptest! {
        /// Any object, names repeated or not, past the linear lookup or
        /// not: the members are what a `Value` reader keeps.
        #[test]
        fn members_are_what_a_value_reader_keeps(
            pairs in prop::collection::vec(("[a-c]{0,2}|\\PC{0,3}", any::<i32>()), 0..40),
        ) {
            let mut text = String::from("{");
            for (i, (name, n)) in pairs.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&serde_json::to_string(name).unwrap());
                text.push_str(&format!(":{n}"));
            }
            text.push('}');
            let expected: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
            let got = members(&text);
            prop_assert_eq!(got.len(), expected.len());
            for (name, value) in &got {
                prop_assert_eq!(Some(value), expected.get(name));
            }
        }
    }
}
