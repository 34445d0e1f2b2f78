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

pub(crate) fn user_token_ok(token: &str) -> bool {
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
        Some(v) => as_integer(v).ok_or_else(|| {
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
    if query_id.is_some_and(|q| !query_id_ok(q)) {
        return Err(Error::event(
            "queryID",
            "QueryID must be 32 hexadecimal characters",
        ));
    }
    Ok(query_id.map(str::to_string))
}

fn query_id_ok(q: &str) -> bool {
    q.len() == 32 && q.bytes().all(|b| b.is_ascii_hexdigit())
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
        let p = as_integer(item).filter(|p| *p >= 1 && *p <= i64::from(u32::MAX));
        let p =
            p.ok_or_else(|| Error::event("positions", "Positions must be positive integers"))?;
        out.push(p as u32);
    }
    if event_type != EventType::Click || query_id.is_none() || object_ids.is_empty() {
        return Err(Error::event(
            "positions",
            "Positions are only allowed for clicks on objectIDs after a search, with a queryID",
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

/// `objectData`: only on conversions with `objectIDs`, one object per
/// object id, each with optional `price` and `discount` (number or string),
/// `quantity` (integer) and `queryID` (as the event's); other keys are
/// ignored, as on the event.
pub(super) fn object_data(
    obj: &Fields,
    event_type: EventType,
    object_ids: &[String],
) -> Result<Option<Value>> {
    let Some(data) = conversion_only(obj, "objectData", event_type)? else {
        return Ok(None);
    };
    let items = data
        .as_array()
        .ok_or_else(|| Error::event("objectData", "ObjectData must be an array of objects"))?;
    if object_ids.is_empty() {
        return Err(Error::event(
            "objectData",
            "ObjectData is only allowed with ObjectIDs",
        ));
    }
    if items.len() != object_ids.len() {
        return Err(Error::event(
            "objectData",
            "ObjectData must have the same length as ObjectIDs",
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let item = item.as_object().ok_or_else(|| {
            Error::event("objectData", format!("ObjectData[{i}] must be an object"))
        })?;
        for key in ["price", "discount"] {
            if item
                .get(key)
                .is_some_and(|v| !(v.is_number() || v.is_string()))
            {
                return Err(Error::event(
                    "objectData",
                    format!("ObjectData[{i}].{key} must be a number or a string"),
                ));
            }
        }
        if item
            .get("quantity")
            .is_some_and(|q| as_integer(q).and_then(|q| i32::try_from(q).ok()).is_none())
        {
            return Err(Error::event(
                "objectData",
                format!("ObjectData[{i}].quantity must be a 32-bit integer"),
            ));
        }
        if item
            .get("queryID")
            .is_some_and(|q| !q.as_str().is_some_and(query_id_ok))
        {
            return Err(Error::event(
                "objectData",
                format!("ObjectData[{i}].queryID must be 32 hexadecimal characters"),
            ));
        }
    }
    Ok(Some(data))
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

/// `currency`: only on conversions, a three-letter ISO 4217 code
/// (`EUR`); required when the event has a `value` or a `price`.
pub(super) fn currency(
    obj: &Fields,
    event_type: EventType,
    value: Option<&Value>,
    object_data: Option<&Value>,
) -> Result<Option<String>> {
    let currency = match conversion_only(obj, "currency", event_type)? {
        None => None,
        Some(Value::String(s)) if s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase()) => {
            Some(s)
        }
        Some(_) => {
            return Err(Error::event(
                "currency",
                "Currency must be a three-letter ISO 4217 code",
            ))
        }
    };
    let priced = object_data
        .and_then(Value::as_array)
        .is_some_and(|items| items.iter().any(|i| i.get("price").is_some()));
    if currency.is_none() && (value.is_some() || priced) {
        return Err(Error::event(
            "currency",
            "Currency is required with a value or a price",
        ));
    }
    Ok(currency)
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

/// An integer as JSON Schema counts them: `2` and `2.0` alike.
fn as_integer(v: &Value) -> Option<i64> {
    match v.as_i64() {
        Some(n) => Some(n),
        None => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (-9.2e18..9.2e18).contains(f))
            .map(|f| f as i64),
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

/// Decode `%XX` escapes (`+` stays a plus: values are URL-encoded with
/// percent escapes only). `None` when an escape is malformed or the bytes
/// are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A filter as the API defines it: `facet:value` with the value
/// URL-encoded (`discount:10%25`), or the whole filter URL-encoded
/// (`brand%3AApple`, as `encodeURIComponent` writes it). With a literal
/// `:` the facet is kept as written and only the value decoded, as
/// before whole-filter decoding existed, so stored events keep their
/// identity.
fn parse_filter(filter: &str) -> Result<(String, String)> {
    let bad = || {
        Error::event(
            "filters",
            format!("Filters must be facet:value strings, got {filter:?}"),
        )
    };
    let malformed = || {
        Error::event(
            "filters",
            format!("Filters must be URL-encoded: {filter:?} has a malformed percent-encoding"),
        )
    };
    let (facet, value) = match filter.split_once(':') {
        Some((facet, value)) => (
            facet.to_string(),
            percent_decode(value).ok_or_else(malformed)?,
        ),
        None => {
            let decoded = percent_decode(filter).ok_or_else(malformed)?;
            let (facet, value) = decoded.split_once(':').ok_or_else(bad)?;
            (facet.to_string(), value.to_string())
        }
    };
    if facet.is_empty() || value.is_empty() {
        return Err(bad());
    }
    Ok((facet, value))
}
