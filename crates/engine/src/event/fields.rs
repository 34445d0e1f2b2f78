//! One validator per field of an Insights event, each with the API's
//! rule and Algolia's message, naming its field. [`Event::from_json`]
//! calls them in a fixed order, so an event breaking several rules is
//! refused for the first.
//!
//! [`Event::from_json`]: super::Event::from_json

use serde_json::{Map, Value};

use super::{EventType, Limits};
use crate::error::{Error, Result};

/// An event's JSON object.
pub(super) type Fields = Map<String, Value>;

/// `eventType`: one of `view`, `click`, `conversion`.
pub(super) fn event_type(obj: &Fields) -> Result<EventType> {
    get_str(obj, "eventType")?
        .and_then(EventType::parse)
        .ok_or_else(|| {
            Error::event(
                "eventType",
                "EventType must be one of view, click, conversion",
            )
        })
}

/// `eventSubtype`: only on conversions, `addToCart` or `purchase`.
pub(super) fn event_subtype(obj: &Fields, event_type: EventType) -> Result<Option<String>> {
    let Some(sub) = get_str(obj, "eventSubtype")? else {
        return Ok(None);
    };
    if event_type != EventType::Conversion {
        return Err(Error::event(
            "eventSubtype",
            "EventSubtype is only allowed for conversion events",
        ));
    }
    if sub != "addToCart" && sub != "purchase" {
        return Err(Error::event(
            "eventSubtype",
            "EventSubtype must be one of addToCart, purchase",
        ));
    }
    Ok(Some(sub.to_string()))
}

/// `eventName`: 1 to 64 printable ASCII characters.
pub(super) fn event_name(obj: &Fields) -> Result<&str> {
    let name = get_str(obj, "eventName")?.unwrap_or_default();
    if !(1..=64).contains(&name.len()) || !name.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(Error::event(
            "eventName",
            "EventName must be between 1 and 64 printable ASCII characters",
        ));
    }
    Ok(name)
}

/// `index`: required, not empty.
pub(super) fn index(obj: &Fields) -> Result<&str> {
    let index = get_str(obj, "index")?.unwrap_or_default();
    if index.is_empty() {
        return Err(Error::event("index", "Index is required"));
    }
    Ok(index)
}

/// `userToken`: required, `[a-zA-Z0-9_=/+-]{1,129}`.
pub(super) fn user_token(obj: &Fields) -> Result<&str> {
    let token = get_str(obj, "userToken")?.unwrap_or_default();
    if !user_token_ok(token) {
        return Err(Error::event(
            "userToken",
            "UserToken must match [a-zA-Z0-9_=/+-]{1,129}",
        ));
    }
    Ok(token)
}

/// `authenticatedUserToken`: optional, the same form as `userToken`.
pub(super) fn authenticated_user_token(obj: &Fields) -> Result<Option<&str>> {
    let token = get_str(obj, "authenticatedUserToken")?;
    if token.is_some_and(|t| !user_token_ok(t)) {
        return Err(Error::event(
            "authenticatedUserToken",
            "AuthenticatedUserToken must match [a-zA-Z0-9_=/+-]{1,129}",
        ));
    }
    Ok(token)
}

fn user_token_ok(token: &str) -> bool {
    (1..=129).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_=/+-".contains(&b))
}

/// `timestamp`: milliseconds since the epoch within `limits` (default:
/// now).
pub(super) fn timestamp(obj: &Fields, limits: &Limits) -> Result<i64> {
    let millis = match obj.get("timestamp") {
        None | Some(Value::Null) => limits.now_millis,
        Some(v) => v.as_i64().ok_or_else(|| {
            Error::event(
                "timestamp",
                "Timestamp must be milliseconds since the epoch",
            )
        })?,
    };
    if millis < limits.now_millis - limits.max_age_millis {
        return Err(Error::event(
            "timestamp",
            "The timestamp is too far in the past",
        ));
    }
    if millis > limits.now_millis + limits.max_skew_millis {
        return Err(Error::event(
            "timestamp",
            "The timestamp is too far in the future",
        ));
    }
    Ok(millis)
}

/// What an event is about: its object ids, or its filters as `(facet,
/// value)` pairs; the other list is empty.
pub(super) type Subject = (Vec<String>, Vec<(String, String)>);

/// `objectIDs` or `filters`, exactly one of them, 1 to 20 strings each:
/// object ids not empty, filters `facet:value` with the value URL-decoded.
pub(super) fn objects_or_filters(obj: &Fields) -> Result<Subject> {
    let object_ids = get_string_list(obj, "objectIDs")?;
    let filters = get_string_list(obj, "filters")?;
    match (object_ids, filters) {
        (Some(ids), None) => {
            if ids.iter().any(String::is_empty) {
                return Err(Error::event(
                    "objectIDs",
                    "ObjectIDs must not be empty strings",
                ));
            }
            Ok((ids, Vec::new()))
        }
        (None, Some(filters)) => {
            let parsed = filters
                .iter()
                .map(|f| parse_filter(f))
                .collect::<Result<_>>()?;
            Ok((Vec::new(), parsed))
        }
        _ => Err(Error::event(
            "objectIDs",
            "Event should specify ObjectIDs or Filters, but not both",
        )),
    }
}

/// `queryID`: optional, 32 hexadecimal characters.
pub(super) fn query_id(obj: &Fields) -> Result<Option<String>> {
    let query_id = get_str(obj, "queryID")?;
    if query_id.is_some_and(|q| q.len() != 32 || !q.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(Error::event(
            "queryID",
            "QueryID must be 32 hexadecimal characters",
        ));
    }
    Ok(query_id.map(str::to_string))
}

/// `positions`: optional positive integers, only on a click after a
/// search (with a `queryID`), one per object id.
pub(super) fn positions(
    obj: &Fields,
    event_type: EventType,
    query_id: Option<&str>,
    object_ids: &[String],
) -> Result<Vec<u32>> {
    let items = match obj.get("positions") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(Error::event(
                "positions",
                "Positions must be an array of integers",
            ))
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let p = item
            .as_u64()
            .filter(|p| *p >= 1 && *p <= u64::from(u32::MAX));
        let p =
            p.ok_or_else(|| Error::event("positions", "Positions must be positive integers"))?;
        out.push(p as u32);
    }
    if event_type != EventType::Click || query_id.is_none() {
        return Err(Error::event(
            "positions",
            "Positions are only allowed for clicks after a search, with a queryID",
        ));
    }
    if out.len() != object_ids.len() {
        return Err(Error::event(
            "positions",
            "Positions must have the same length as ObjectIDs",
        ));
    }
    Ok(out)
}

/// `objectData`: only on conversions.
pub(super) fn object_data(obj: &Fields, event_type: EventType) -> Result<Option<Value>> {
    conversion_only(obj, "objectData", event_type)
}

/// `value`: only on conversions, a number or a string.
pub(super) fn value(obj: &Fields, event_type: EventType) -> Result<Option<Value>> {
    let value = conversion_only(obj, "value", event_type)?;
    if value
        .as_ref()
        .is_some_and(|v| !(v.is_number() || v.is_string()))
    {
        return Err(Error::event("value", "Value must be a number or a string"));
    }
    Ok(value)
}

/// `currency`: only on conversions, a string.
pub(super) fn currency(obj: &Fields, event_type: EventType) -> Result<Option<String>> {
    match conversion_only(obj, "currency", event_type)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::event("currency", "Currency must be a string")),
    }
}

/// A field allowed only on conversion events, as given.
fn conversion_only(
    obj: &Fields,
    field: &'static str,
    event_type: EventType,
) -> Result<Option<Value>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(_) if event_type != EventType::Conversion => Err(Error::event(
            field,
            format!("{field} is only allowed for conversion events"),
        )),
        Some(v) => Ok(Some(v.clone())),
    }
}

/// An optional string field.
fn get_str<'a>(obj: &'a Fields, field: &'static str) -> Result<Option<&'a str>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::event(field, format!("{field} must be a string"))),
    }
}

/// An optional list of 1 to 20 strings.
fn get_string_list(obj: &Fields, field: &'static str) -> Result<Option<Vec<String>>> {
    let not_strings = || Error::event(field, format!("{field} must be an array of strings"));
    let items = match obj.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(not_strings()),
    };
    let out = items
        .iter()
        .map(|item| item.as_str().map(str::to_string).ok_or_else(not_strings))
        .collect::<Result<Vec<String>>>()?;
    if !(1..=20).contains(&out.len()) {
        return Err(Error::event(
            field,
            format!("{field} must contain between 1 and 20 items"),
        ));
    }
    Ok(Some(out))
}

/// Decode `%XX` escapes (and `+` as a space is NOT applied: values are
/// URL-encoded with percent escapes only). `None` when malformed.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Split `facet:value` at the first `:` and URL-decode the value.
fn parse_filter(filter: &str) -> Result<(String, String)> {
    let bad = || {
        Error::event(
            "filters",
            format!("Filters must be facet:value strings, got {filter:?}"),
        )
    };
    let (facet, value) = filter.split_once(':').ok_or_else(bad)?;
    if facet.is_empty() || value.is_empty() {
        return Err(bad());
    }
    Ok((facet.to_string(), percent_decode(value).ok_or_else(bad)?))
}
