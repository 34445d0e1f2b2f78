//! [`SortedScores`]: a profile's scores as sorted vectors, and the API's
//! profile JSON written from them by hand.

use std::collections::BTreeMap;

use super::Profile;
use crate::error::Result;

/// A profile's scores as `(facet, [(value, score)])`, facets and each
/// facet's values sorted (the order of a `BTreeMap`), written as the API's
/// nested `scores` object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SortedScores(pub(crate) Vec<(String, Vec<(String, u32)>)>);

impl SortedScores {
    /// The API's profile JSON (`lastEventAt`, `scores`, `userToken`) of
    /// these scores, appended to `out`: the bytes serde_json writes for
    /// [`Profile`] (tests), written by hand, without building maps or
    /// serde's per-entry machinery (profile reads answer with it, and a
    /// many-light batch writes one profile per five events). With
    /// `stored_version`, as a batch stores it: plus `lastEventMillis` and
    /// `strategyVersion`, keys still in sorted order (as a
    /// `serde_json::Value` writes them).
    pub(crate) fn write_profile_json(
        &self,
        out: &mut Vec<u8>,
        user_token: &str,
        last_event_millis: i64,
        stored_version: Option<i64>,
    ) -> Result<()> {
        let mut number = itoa::Buffer::new();
        out.extend_from_slice(b"{\"lastEventAt\":");
        let last = affinity_rowkey::time::format_seconds(last_event_millis).unwrap_or_default();
        json_string(out, &last)?;
        if stored_version.is_some() {
            out.extend_from_slice(b",\"lastEventMillis\":");
            out.extend_from_slice(number.format(last_event_millis).as_bytes());
        }
        out.extend_from_slice(b",\"scores\":{");
        for (i, (facet, values)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_string(out, facet)?;
            out.extend_from_slice(b":{");
            for (j, (value, score)) in values.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                json_string(out, value)?;
                out.push(b':');
                out.extend_from_slice(number.format(*score).as_bytes());
            }
            out.push(b'}');
        }
        out.push(b'}');
        if let Some(version) = stored_version {
            out.extend_from_slice(b",\"strategyVersion\":");
            out.extend_from_slice(number.format(version).as_bytes());
        }
        out.extend_from_slice(b",\"userToken\":");
        json_string(out, user_token)?;
        out.push(b'}');
        Ok(())
    }

    /// The profile of `user_token` with these scores.
    pub(crate) fn into_profile(self, user_token: &str, last_event_millis: i64) -> Profile {
        Profile {
            user_token: user_token.to_string(),
            last_event_millis,
            scores: self.into_map(),
        }
    }

    pub(crate) fn into_map(self) -> BTreeMap<String, BTreeMap<String, u32>> {
        self.0
            .into_iter()
            .map(|(facet, values)| (facet, values.into_iter().collect()))
            .collect()
    }
}

/// `text` as a JSON string, as serde_json writes it: as is when nothing in
/// it needs escaping (a quote, a backslash, a control character), else
/// through serde_json.
fn json_string(out: &mut Vec<u8>, text: &str) -> Result<()> {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text)?;
    }
    Ok(())
}
