//! A JSON object read one level deep: each member's name and the text of
//! its value, borrowed from the request body. A re-ranking body carries
//! a search engine's hits, most of whose attributes (names, highlights,
//! images) Affinity only hands back: they are copied as text instead of
//! being parsed into `Value`s and written again.
//!
//! A re-ranking body is read by [`with_objects`]: first by a scanner of
//! its own ([`Scan`]), which checks the text as JSON while it splits it
//! and gives up on anything it does not take (a name with escapes,
//! nesting past [`MAX_DEPTH`], text that is not JSON); then, if it gave
//! up, by serde_json, which takes what JSON allows and names what is
//! wrong. What the scanner takes, serde_json takes alike (a property test
//! and the `rerank_body` fuzz target compare them).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use affinity_engine::scoring::eq_bytes;
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// Past this many members, a repeated name is found through a map.
const LINEAR_LOOKUP: usize = 16;

/// A member: its name as read and its value's JSON text.
type Member<'a> = (Cow<'a, str>, &'a str);

/// An object's members in the order sent, each value as its JSON text.
/// A name sent twice keeps its last value, at its first place (as a JSON
/// object reader keeps the last).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Members<'a>(Vec<Member<'a>>);

impl<'a> Members<'a> {
    /// The members of the JSON text `value`, `None` when it is not an
    /// object.
    pub(crate) fn of(value: &'a str) -> Option<Members<'a>> {
        if !value.starts_with('{') {
            return None;
        }
        // The text was checked as JSON when the body was read.
        serde_json::from_str(value).ok()
    }

    pub(crate) fn object(&self) -> Object<'_, 'a> {
        Object(&self.0)
    }

    /// The value of member `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a str> {
        self.object().get(name)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &'a str)> {
        self.0.iter().map(|(n, v)| (n.as_ref(), *v))
    }
}

/// One object's members, in the order sent (see [`Members`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Object<'s, 'a>(&'s [Member<'a>]);

impl<'s, 'a> Object<'s, 'a> {
    /// The value of member `name`.
    pub(crate) fn get(self, name: &str) -> Option<&'a str> {
        self.0
            .iter()
            .find(|(n, _)| eq_bytes(n.as_bytes(), name.as_bytes()))
            .map(|(_, v)| *v)
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0.is_empty()
    }

    /// Each member's name as read and its value's text: a borrowed name
    /// is the text between its quotes, which had no escapes (the scanner
    /// and serde_json borrow only those), so it is written back as is.
    pub(crate) fn iter_read(self) -> impl Iterator<Item = (&'s Cow<'a, str>, &'a str)> {
        self.0.iter().map(|(n, v)| (n, *v))
    }
}

/// The objects of an array, their members in one list: one allocation
/// for all of a re-ranking's hits instead of one per hit.
#[derive(Debug, Default)]
pub(crate) struct Objects<'a> {
    members: Vec<Member<'a>>,
    spans: Vec<Span<'a>>,
}

/// One object of [`Objects`]: where its members end, and what reading
/// it learned.
#[derive(Debug, Clone, Copy)]
struct Span<'a> {
    /// Where its members end in the list.
    end: usize,
    /// How many of its first members are named as the object before's,
    /// place by place.
    alike: usize,
    /// Its text when its members are its text's members, one for one (no
    /// name sent twice; read by the scanner, so no name with escapes),
    /// else "".
    text: &'a str,
}

/// Alike when their objects' members are (whichever reader kept their
/// texts).
impl PartialEq for Objects<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
            && self
                .spans
                .iter()
                .map(|s| s.end)
                .eq(other.spans.iter().map(|s| s.end))
    }
}

impl<'a> Objects<'a> {
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Object `i`.
    pub(crate) fn get(&self, i: usize) -> Object<'_, 'a> {
        let start = if i == 0 { 0 } else { self.spans[i - 1].end };
        Object(&self.members[start..self.spans[i].end])
    }

    /// How many of object `i`'s first members are named as the object
    /// before's, place by place (none of the first object's).
    pub(crate) fn alike(&self, i: usize) -> usize {
        self.spans[i].alike
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Object<'_, 'a>> {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Object `i`'s text as sent, when its members are its text's
    /// members one for one: it can be copied as it is.
    pub(crate) fn text(&self, i: usize) -> Option<&'a str> {
        Some(self.spans[i].text).filter(|t| !t.is_empty())
    }

    /// Start the next object: its members are inserted through the
    /// [`Open`] returned, and it ends at [`Objects::close`].
    fn open(&self) -> Open<'a> {
        let start = self.members.len();
        let previous = self.spans.len().checked_sub(1).map(|i| match i {
            0 => 0,
            i => self.spans[i - 1].end,
        });
        Open::new(start, previous)
    }

    /// End the object `open` read, whose text was `text` (when known).
    fn close(&mut self, open: Open<'a>, text: Option<&'a str>) {
        self.spans.push(Span {
            end: self.members.len(),
            alike: open.alike_places,
            text: text.filter(|_| !open.repeated).unwrap_or_default(),
        });
    }

    /// Room for `more` objects like the first.
    fn reserve(&mut self, more: usize) {
        let per_object = self.members.len();
        self.members.reserve(more.saturating_mul(per_object));
        self.spans.reserve(more);
    }

    /// Add `members` as the next object.
    pub(crate) fn push(&mut self, members: Members<'a>) {
        let open = self.open();
        self.members.extend(members.0);
        self.close(open, None);
    }
}

/// An object being read: its members are `members[start..]` of the list
/// they go in.
struct Open<'a> {
    start: usize,
    /// Where the object before it starts (it ends at `start`), while
    /// this one has named its members as that one, place by place. A
    /// search engine's hits name their attributes alike and in one
    /// order, and a name the object before had at this place, whose
    /// names differ from each other, is none of the names before it:
    /// it is added without looking for them.
    alike: Option<usize>,
    /// How many members were added so.
    alike_places: usize,
    /// The members' places by name, once there are many.
    index: Option<HashMap<Cow<'a, str>, usize>>,
    /// Whether a name came twice.
    repeated: bool,
}

impl<'a> Open<'a> {
    fn new(start: usize, previous: Option<usize>) -> Open<'a> {
        Open {
            start,
            alike: previous,
            alike_places: 0,
            index: None,
            repeated: false,
        }
    }

    /// Add member `name`: a name already there takes the new value at its
    /// place.
    fn insert(&mut self, members: &mut Vec<Member<'a>>, name: Cow<'a, str>, value: &'a str) {
        let place = members.len() - self.start;
        if let Some(before) = self.alike {
            if before + place < self.start
                && eq_bytes(members[before + place].0.as_bytes(), name.as_bytes())
            {
                members.push((name, value));
                self.alike_places += 1;
                return;
            }
            self.alike = None;
        }
        let seen = match &self.index {
            Some(index) => index.get(&name).copied(),
            None => members[self.start..]
                .iter()
                .position(|(n, _)| eq_bytes(n.as_bytes(), name.as_bytes()))
                .map(|i| self.start + i),
        };
        match seen {
            Some(i) => {
                members[i].1 = value;
                self.repeated = true;
            }
            None => {
                if let Some(index) = &mut self.index {
                    index.insert(name.clone(), members.len());
                }
                members.push((name, value));
                if self.index.is_none() && members.len() - self.start > LINEAR_LOOKUP {
                    self.index = Some(
                        members[self.start..]
                            .iter()
                            .enumerate()
                            .map(|(i, (n, _))| (n.clone(), self.start + i))
                            .collect(),
                    );
                }
            }
        }
    }
}

/// An object's members read in one pass with its member `field` (named
/// once) read as an array of objects: the other members as [`Members`]
/// (without `field`), and `field`'s objects. `None` when the text is not
/// such an object (not JSON, not an object, `field` missing or not an
/// array of objects, a name sent twice, not UTF-8): the caller reads it
/// the general way, which names what is wrong. A re-ranking body's hits
/// are read so, instead of being scanned once as text and again as
/// objects.
pub(crate) fn with_objects<'a>(
    text: &'a [u8],
    field: &'static str,
) -> Option<(Members<'a>, Objects<'a>)> {
    // Checked as UTF-8 once, here: from a `str`, serde_json takes each
    // name, string and raw value as it is instead of checking its bytes
    // again.
    let text = std::str::from_utf8(text).ok()?;
    Scan::new(text)
        .with_objects(field)
        .or_else(|| serde_with_objects(text, field))
}

/// [`with_objects`] by serde_json alone.
fn serde_with_objects<'a>(
    text: &'a str,
    field: &'static str,
) -> Option<(Members<'a>, Objects<'a>)> {
    struct Split<'a>(Members<'a>, Objects<'a>);
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
            let mut members: Vec<(Cow<'de, str>, &'de str)> = Vec::new();
            let mut objects = None;
            let twice = || de::Error::custom("a name sent twice");
            while let Some(Name(name)) = map.next_key()? {
                if name == self.0 {
                    if objects.is_some() {
                        return Err(twice());
                    }
                    objects = Some(map.next_value::<Objects<'de>>()?);
                } else {
                    if members.iter().any(|(n, _)| *n == name) {
                        return Err(twice());
                    }
                    members.push((name, map.next_value::<&'de RawValue>()?.get()));
                }
            }
            match objects {
                Some(objects) => Ok(Split(Members(members), objects)),
                None => Err(de::Error::missing_field(self.0)),
            }
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
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

/// Reads one object's members into a list, as its [`Open`] places them.
struct ObjectSeed<'o, 'de> {
    members: &'o mut Vec<Member<'de>>,
    open: &'o mut Open<'de>,
}

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectSeed<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Name(name)) = map.next_key()? {
            let value: &'de RawValue = map.next_value()?;
            self.open.insert(self.members, name, value.get());
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut members = Vec::new();
        ObjectSeed {
            members: &mut members,
            open: &mut Open::new(0, None),
        }
        .deserialize(d)?;
        Ok(Members(members))
    }
}

impl<'de> Deserialize<'de> for Objects<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectsVisitor;
        impl<'de> Visitor<'de> for ObjectsVisitor {
            type Value = Objects<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of JSON objects")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Objects<'de>, A::Error> {
                let mut objects = Objects::default();
                loop {
                    let mut open = objects.open();
                    let seed = ObjectSeed {
                        members: &mut objects.members,
                        open: &mut open,
                    };
                    match seq.next_element_seed(seed)? {
                        Some(()) => objects.close(open, None),
                        None => return Ok(objects),
                    }
                }
            }
        }
        d.deserialize_seq(ObjectsVisitor)
    }
}

/// Whether serde_json reads `text` as the scanner does, when the scanner
/// takes it (for the `rerank_body` fuzz target).
#[cfg(feature = "fuzzing")]
pub(crate) fn scan_agrees(text: &str) -> bool {
    let scanned = Scan::new(text).with_objects("hits");
    scanned.is_none() || scanned == serde_with_objects(text, "hits")
}

/// The most objects of an array room is made for ahead (a re-ranking
/// takes 1000 hits).
const RESERVED_OBJECTS: usize = 1000;

/// Nesting the scanner takes (serde_json's limit is 128).
const MAX_DEPTH: usize = 64;

/// Where the run of plain string bytes of `bytes` from `at` ends: at the
/// first quote, backslash or control character (or the end). Eight bytes
/// at a time: most names and values are no longer.
#[inline]
fn plain_run(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        // A byte's high bit is set in `below(x, n)` where the byte is below
        // `n`, and may be set above such a byte (a borrow carried): the
        // lowest byte set is a true one.
        let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v;
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let stop = (below(quote, 1) | below(backslash, 1) | below(x, 0x20)) & HIGH;
        if stop != 0 {
            return at + (stop.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&c) = bytes.get(at) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        at += 1;
    }
    at
}

/// A scanner of JSON text: each method takes one piece of the grammar
/// (RFC 8259) at the scanner's place and moves past it, or gives up
/// (`None`). It gives up on all text serde_json refuses, and also on a
/// name with escapes and on nesting past [`MAX_DEPTH`], which serde_json
/// takes.
struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn new(text: &'a str) -> Scan<'a> {
        Scan { text, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Byte `c`, after any whitespace.
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek() == Some(c)).then(|| self.at += 1)
    }

    /// The items of an object or array after its opening byte, up to and
    /// with `close`, each taken by `item` (after any whitespace).
    fn items(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            self.ws();
            item(self)?;
            if self.eat(b',').is_none() {
                return self.eat(close);
            }
        }
    }

    /// A member name without escapes, and its colon.
    fn name(&mut self) -> Option<&'a str> {
        (self.peek() == Some(b'"')).then_some(())?;
        let start = self.at + 1;
        self.at = plain_run(self.text.as_bytes(), start);
        (self.peek()? == b'"').then_some(())?;
        let name = &self.text[start..self.at];
        self.at += 1;
        self.eat(b':')?;
        self.ws();
        Some(name)
    }

    /// A string, at its opening quote.
    fn string(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        self.at += 1;
        loop {
            self.at = plain_run(bytes, self.at);
            match *bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => match *bytes.get(self.at + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
                    b'u' => {
                        let hex = bytes.get(self.at + 2..self.at + 6)?;
                        hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                        self.at += 6;
                    }
                    _ => return None,
                },
                c if c < 0x20 => return None,
                _ => self.at += 1,
            }
        }
    }

    /// Digits; how many.
    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            (self.digits() > 0).then_some(())?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        Some(())
    }

    fn word(&mut self, word: &str) -> Option<()> {
        self.text[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// One value, inside `depth` objects and arrays; its text.
    fn value(&mut self, depth: usize) -> Option<&'a str> {
        let start = self.at;
        match self.peek()? {
            b'"' => self.string()?,
            b'{' | b'[' if depth >= MAX_DEPTH => return None,
            b'{' => {
                self.at += 1;
                self.items(b'}', |s| {
                    (s.peek() == Some(b'"')).then_some(())?;
                    s.string()?;
                    s.eat(b':')?;
                    s.ws();
                    s.value(depth + 1).map(drop)
                })?
            }
            b'[' => {
                self.at += 1;
                self.items(b']', |s| s.value(depth + 1).map(drop))?
            }
            b't' => self.word("true")?,
            b'f' => self.word("false")?,
            b'n' => self.word("null")?,
            _ => self.number()?,
        }
        Some(&self.text[start..self.at])
    }

    /// An object's members, after its opening brace, inside `depth`
    /// objects and arrays (itself included), into `members` as `open`
    /// places them.
    fn object_into(
        &mut self,
        members: &mut Vec<Member<'a>>,
        open: &mut Open<'a>,
        depth: usize,
    ) -> Option<()> {
        self.items(b'}', |s| {
            let name = s.name()?;
            let value = s.value(depth)?;
            open.insert(members, Cow::Borrowed(name), value);
            Some(())
        })
    }

    /// The whole text as [`with_objects`] reads it.
    fn with_objects(mut self, field: &str) -> Option<(Members<'a>, Objects<'a>)> {
        self.eat(b'{')?;
        let mut members = Members::default();
        let mut objects = None;
        self.items(b'}', |s| {
            let name = s.name()?;
            if name == field {
                if objects.is_some() {
                    return None;
                }
                s.eat(b'[')?;
                let mut list = Objects::default();
                s.items(b']', |s| {
                    s.eat(b'{')?;
                    let start = s.at - 1;
                    let mut open = list.open();
                    s.object_into(&mut list.members, &mut open, 3)?;
                    list.close(open, Some(&s.text[start..s.at]));
                    if list.len() == 1 {
                        // Room for as many more like the first as the
                        // rest of the text could hold, up to the most
                        // hits a re-ranking takes.
                        let more = (s.text.len() - s.at) / (s.at - start);
                        list.reserve(more.min(RESERVED_OBJECTS));
                    }
                    Some(())
                })?;
                objects = Some(list);
            } else {
                if members.0.iter().any(|(n, _)| *n == name) {
                    return None;
                }
                let value = s.value(1)?;
                members.0.push((Cow::Borrowed(name), value));
            }
            Some(())
        })?;
        self.ws();
        (self.at == self.text.len()).then_some(())?;
        Some((members, objects?))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    fn members(text: &str) -> Vec<(String, Value)> {
        Members::of(text)
            .unwrap()
            .iter()
            .map(|(n, v)| (n.to_string(), serde_json::from_str(v).unwrap()))
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
        assert!(Members::of("[1]").is_none());
        assert!(Members::of("\"{\"").is_none());
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
        assert_eq!(hits.get(0).get("x").unwrap(), "[1]");
        assert_eq!(
            hits.get(1).get("b").unwrap(),
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

    type Texts = (Vec<(String, String)>, Vec<Vec<(String, String)>>);

    fn texts(split: Option<(Members, Objects)>) -> Option<Texts> {
        let pairs = |m: Object| -> Vec<(String, String)> {
            m.iter_read()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        split.map(|(rest, objects)| (pairs(rest.object()), objects.iter().map(pairs).collect()))
    }

    /// What the scanner takes, serde_json takes alike; `Some` when the
    /// scanner took it.
    fn compare(text: &str) -> Option<Texts> {
        let scanned = texts(Scan::new(text).with_objects("hits"));
        if scanned.is_some() {
            assert_eq!(scanned, texts(serde_with_objects(text, "hits")), "{text:?}");
        }
        scanned
    }

    #[test]
    fn the_scanner_takes_what_serde_json_takes_alike() {
        let taken = [
            r#" { "userToken" : "u" , "hits" : [ { "objectID" : "a" , "n" : -0.5e+3 } , {} ] } "#,
            r#"{"hits":[{"a":"\u00e9\n\"","b":[true,false,null,{"x\ty":[[]]}]}],"p":10}"#,
            r#"{"hits":[],"x":1E9,"y":0,"z":-0.0}"#,
            r#"{"hits":[{"b":1,"b":2}]}"#,
        ];
        for text in taken {
            assert!(compare(text).is_some(), "{text}");
        }
        // Not JSON: both refuse. A name with escapes, or deep nesting:
        // the scanner leaves it to serde_json.
        let deep = format!(
            r#"{{"hits":[{{"a":{}1{}}}]}}"#,
            "[".repeat(70),
            "]".repeat(70)
        );
        for text in [
            r#"{"hits":[{"a":01}]}"#,
            r#"{"hits":[{"a":1.}]}"#,
            r#"{"hits":[{"a":-}]}"#,
            r#"{"hits":[{"a":"\x"}]}"#,
            r#"{"hits":[{"a":"\u12"}]}"#,
            "{\"hits\":[{\"a\":\"\u{1}\"}]}",
            r#"{"hits":[{"a":tru}]}"#,
            r#"{"hits":[{"a":1,}]}"#,
            r#"{"hits":[{"a":1}],}"#,
            r#"{"hits":[{"a":1}]} x"#,
            r#"{"hits":[{"a":1}]"#,
            r#"{"hits":[{"a\"":1}]}"#,
            r#"{"hits":[1]}"#,
            &deep,
        ] {
            assert!(compare(text).is_none(), "{text}");
        }
        assert!(serde_with_objects(r#"{"hits":[{"a\"":1}]}"#, "hits").is_some());
        assert!(serde_with_objects(&deep, "hits").is_some());
    }

    /// A JSON value of up to 4 levels.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,6}|[\"\\\\/\u{0}-\u{1f}é\u{10000}]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(("[a-c]{0,2}|\\PC{0,3}", inner), 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// An object's text from its members (names may repeat), with the
    /// whitespace `ws` picks.
    fn object_text(
        members: &[(String, String)],
        ws: &mut impl Iterator<Item = &'static str>,
    ) -> String {
        let mut text = String::from("{");
        for (i, (name, value)) in members.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(ws.next().unwrap_or(""));
            text.push_str(&serde_json::to_string(name).unwrap());
            text.push_str(ws.next().unwrap_or(""));
            text.push(':');
            text.push_str(ws.next().unwrap_or(""));
            text.push_str(value);
        }
        text.push_str(ws.next().unwrap_or(""));
        text.push('}');
        text
    }

    /// The member names of a flat object's text, in order, repeats kept.
    fn text_names(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut scan = Scan::new(text);
        scan.eat(b'{');
        scan.items(b'}', |s| {
            names.push(s.name()?.to_string());
            s.value(1).map(drop)
        });
        names
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Eight bytes at a time, a plain run ends where one byte at a time
        /// finds its end: runs of every length, ending at each kind of stop
        /// (and bytes of UTF-8 beside them).
        #[test]
        fn a_plain_run_ends_at_the_first_stop(
            bytes in prop::collection::vec(
                prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..=0xff, 0x80u8..=0xff],
                0..40,
            ),
            from in 0usize..40,
        ) {
            let from = from.min(bytes.len());
            let naive = bytes[from..]
                .iter()
                .position(|c| *c == b'"' || *c == b'\\' || *c < 0x20)
                .map_or(bytes.len(), |i| from + i);
            prop_assert_eq!(plain_run(&bytes, from), naive);
        }

        /// Bodies of hits with any values, whitespace and names, whole or
        /// with one character changed: what the scanner takes, serde_json
        /// takes alike, and it takes every whole body whose names have no
        /// escapes.
        #[test]
        fn the_scanner_agrees_with_serde_json(
            hits in prop::collection::vec(
                prop::collection::vec(("[a-c]{1,2}|\\PC{0,4}", json_value()), 0..6),
                0..4,
            ),
            rest in prop::collection::vec(("[a-z]{1,3}|\\PC{0,4}", json_value()), 0..3),
            spaces in prop::collection::vec(prop::sample::select(vec!["", " ", "\n\t ", "\r"]), 0..64),
            edit in prop::option::of((any::<prop::sample::Index>(), prop::sample::select(
                vec![None, Some('{'), Some('}'), Some('['), Some(']'), Some(','), Some(':'),
                     Some('"'), Some('\\'), Some('0'), Some('-'), Some('.'), Some('e'), Some(' '),
                     Some('\u{1}'), Some('é')],
            ))),
        ) {
            let mut ws = spaces.into_iter().cycle();
            let as_text = |members: &[(String, Value)]| -> Vec<(String, String)> {
                members
                    .iter()
                    .map(|(n, v)| (n.clone(), serde_json::to_string(v).unwrap()))
                    .collect()
            };
            let mut body: Vec<(String, String)> = as_text(&rest);
            let hit_texts: Vec<String> = hits
                .iter()
                .map(|hit| object_text(&as_text(hit), &mut ws))
                .collect();
            body.push(("hits".to_string(), format!("[{}]", hit_texts.join(","))));
            let mut text = object_text(&body, &mut ws);
            let plain = |name: &String| !serde_json::to_string(name).unwrap().contains('\\');
            let names_plain = rest.iter().map(|(n, _)| n).all(plain)
                && hits.iter().flatten().map(|(n, _)| n).all(plain);
            let once = rest.iter().all(|(n, _)| n != "hits")
                && rest.iter().enumerate().all(|(i, (n, _))| rest[..i].iter().all(|(m, _)| m != n));
            match edit {
                None => {
                    let taken = compare(&text);
                    if names_plain && once {
                        prop_assert!(taken.is_some(), "{}", text);
                    }
                }
                Some((at, with)) => {
                    let mut chars: Vec<char> = text.chars().collect();
                    let i = at.index(chars.len());
                    match with {
                        Some(c) => chars[i] = c,
                        None => {
                            chars.remove(i);
                        }
                    }
                    text = chars.into_iter().collect();
                    compare(&text);
                }
            }
        }

        /// Objects in a row, each named like the one before or not (the
        /// same names, some of them, others, repeated), read by the
        /// scanner and by serde_json: each is what a `Value` reader
        /// keeps, in the order of first appearance.
        #[test]
        fn objects_in_a_row_are_what_a_value_reader_keeps(
            first in prop::collection::vec("[a-c]{0,2}", 0..20),
            edits in prop::collection::vec(
                prop::collection::vec((any::<prop::sample::Index>(), "[a-d]{0,2}", 0..3u8), 0..4),
                0..6,
            ),
        ) {
            // Each object edits the names of the one before: renames one,
            // repeats one at the end, or drops the last.
            let mut lists = vec![first];
            for edit in &edits {
                let mut names = lists.last().unwrap().clone();
                for (at, name, how) in edit {
                    match (how, names.is_empty()) {
                        (0, false) => {
                            let i = at.index(names.len());
                            names[i] = name.clone();
                        }
                        (1, false) => names.push(names[at.index(names.len())].clone()),
                        (2, false) => {
                            names.pop();
                        }
                        _ => names.push(name.clone()),
                    }
                }
                lists.push(names);
            }
            let mut n = 0;
            let texts: Vec<String> = lists
                .iter()
                .map(|names| {
                    let members: Vec<String> = names
                        .iter()
                        .map(|name| {
                            n += 1;
                            format!("{}:{n}", serde_json::to_string(name).unwrap())
                        })
                        .collect();
                    format!("{{{}}}", members.join(","))
                })
                .collect();
            let array = format!("[{}]", texts.join(","));
            let body = format!(r#"{{"hits":{array}}}"#);
            let (_, scanned) = Scan::new(&body).with_objects("hits").unwrap();
            let read: Objects = serde_json::from_str(&array).unwrap();
            prop_assert_eq!(&scanned, &read);
            prop_assert_eq!(read.len(), texts.len());
            // Members taken as named like the object before's: never one
            // that is not, and all of an object sent with the names the
            // one before kept.
            prop_assert_eq!(read.alike(0), 0);
            for (i, sent) in lists.iter().enumerate() {
                prop_assert_eq!(scanned.alike(i), read.alike(i));
                if i == 0 {
                    continue;
                }
                let names = |o: Object| -> Vec<String> {
                    o.iter_read().map(|(n, _)| n.to_string()).collect()
                };
                let (kept, before) = (names(read.get(i)), names(read.get(i - 1)));
                let common = kept.iter().zip(&before).take_while(|(a, b)| a == b).count();
                prop_assert!(read.alike(i) <= common, "{:?} after {:?}", kept, before);
                if *sent == before {
                    prop_assert_eq!(read.alike(i), before.len());
                }
            }
            for (object, text) in read.iter().zip(&texts) {
                let mut expected: Vec<(String, Value)> = Vec::new();
                let map: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
                let value: Value = serde_json::from_str(text).unwrap();
                prop_assert!(value.is_object());
                for name in text_names(text) {
                    if !expected.iter().any(|(n, _)| *n == name) {
                        expected.push((name.clone(), map[&name].clone()));
                    }
                }
                let got: Vec<(String, Value)> = object
                    .iter_read()
                    .map(|(n, v)| (n.to_string(), serde_json::from_str(v).unwrap()))
                    .collect();
                prop_assert_eq!(got, expected, "{}", text);
            }
        }

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
