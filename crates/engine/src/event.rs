//! Insights events: parsing and validation of the API's event JSON.
//!
//! [`Event::from_json`] checks every field rule of `API.md` and returns an
//! [`Error::InvalidEvent`] naming the field, with Algolia's messages. The
//! age limit is a parameter ([`Limits`]): the HTTP API allows 30 days, the
//! CLI accepts history back to the application's retention.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The three kinds of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    View,
    Click,
    Conversion,
}

impl EventType {
    pub const ALL: [EventType; 3] = [EventType::View, EventType::Click, EventType::Conversion];

    /// The wire name (`view`, `click`, `conversion`), also the narrow
    /// schema's family.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::View => "view",
            EventType::Click => "click",
            EventType::Conversion => "conversion",
        }
    }

    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// Time bounds an event's timestamp must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The clock, milliseconds since the epoch (also the default timestamp).
    pub now_millis: i64,
    /// Oldest accepted age in milliseconds (30 days for the HTTP API).
    pub max_age_millis: i64,
    /// How far in the future a timestamp may be (clock skew).
    pub max_skew_millis: i64,
}

/// 30 days, the HTTP API's age limit.
pub const API_MAX_AGE_MILLIS: i64 = 30 * 86_400_000;
/// One hour of clock skew is accepted for timestamps in the future.
pub const MAX_SKEW_MILLIS: i64 = 3_600_000;

impl Limits {
    /// The HTTP API's limits at `now_millis`.
    pub fn api(now_millis: i64) -> Limits {
        Limits {
            now_millis,
            max_age_millis: API_MAX_AGE_MILLIS,
            max_skew_millis: MAX_SKEW_MILLIS,
        }
    }
}

/// A validated Insights event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event_type: EventType,
    pub event_subtype: Option<String>,
    pub event_name: String,
    pub index: String,
    pub user_token: String,
    pub authenticated_user_token: Option<String>,
    pub timestamp_millis: i64,
    pub object_ids: Vec<String>,
    /// `(facet, value)` pairs, values URL-decoded.
    pub filters: Vec<(String, String)>,
    pub positions: Vec<u32>,
    pub query_id: Option<String>,
    pub object_data: Option<Value>,
    pub value: Option<Value>,
    pub currency: Option<String>,
}

fn user_token_ok(token: &str) -> bool {
    (1..=129).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_=/+-".contains(&b))
}

fn get_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    field: &'static str,
) -> Result<Option<&'a str>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::event(field, format!("{field} must be a string"))),
    }
}

fn get_string_list(
    obj: &Map<String, Value>,
    key: &str,
    field: &'static str,
) -> Result<Option<Vec<String>>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    _ => {
                        return Err(Error::event(
                            field,
                            format!("{field} must be an array of strings"),
                        ))
                    }
                }
            }
            if !(1..=20).contains(&out.len()) {
                return Err(Error::event(
                    field,
                    format!("{field} must contain between 1 and 20 items"),
                ));
            }
            Ok(Some(out))
        }
        Some(_) => Err(Error::event(
            field,
            format!("{field} must be an array of strings"),
        )),
    }
}

/// Decode `%XX` escapes (and `+` as a space is NOT applied: values are
/// URL-encoded with percent escapes only). `None` when malformed.
pub fn percent_decode(text: &str) -> Option<String> {
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
pub fn parse_filter(filter: &str) -> Result<(String, String)> {
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

impl Event {
    /// Parse and validate one event object.
    pub fn from_json(value: &Value, limits: &Limits) -> Result<Event> {
        let obj = value
            .as_object()
            .ok_or_else(|| Error::event("event", "Event must be a JSON object"))?;
        let event_type = get_str(obj, "eventType", "eventType")?
            .and_then(EventType::parse)
            .ok_or_else(|| {
                Error::event(
                    "eventType",
                    "EventType must be one of view, click, conversion",
                )
            })?;
        let event_subtype = get_str(obj, "eventSubtype", "eventSubtype")?.map(str::to_string);
        if let Some(sub) = &event_subtype {
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
        }
        let event_name = get_str(obj, "eventName", "eventName")?.unwrap_or_default();
        if !(1..=64).contains(&event_name.len())
            || !event_name.bytes().all(|b| (0x20..0x7f).contains(&b))
        {
            return Err(Error::event(
                "eventName",
                "EventName must be between 1 and 64 printable ASCII characters",
            ));
        }
        let index = get_str(obj, "index", "index")?.unwrap_or_default();
        if index.is_empty() {
            return Err(Error::event("index", "Index is required"));
        }
        let user_token = get_str(obj, "userToken", "userToken")?.unwrap_or_default();
        if !user_token_ok(user_token) {
            return Err(Error::event(
                "userToken",
                "UserToken must match [a-zA-Z0-9_=/+-]{1,129}",
            ));
        }
        let authenticated_user_token =
            get_str(obj, "authenticatedUserToken", "authenticatedUserToken")?;
        if let Some(t) = authenticated_user_token {
            if !user_token_ok(t) {
                return Err(Error::event(
                    "authenticatedUserToken",
                    "AuthenticatedUserToken must match [a-zA-Z0-9_=/+-]{1,129}",
                ));
            }
        }
        let timestamp_millis = match obj.get("timestamp") {
            None | Some(Value::Null) => limits.now_millis,
            Some(v) => v.as_i64().ok_or_else(|| {
                Error::event(
                    "timestamp",
                    "Timestamp must be milliseconds since the epoch",
                )
            })?,
        };
        if timestamp_millis < limits.now_millis - limits.max_age_millis {
            return Err(Error::event(
                "timestamp",
                "The timestamp is too far in the past",
            ));
        }
        if timestamp_millis > limits.now_millis + limits.max_skew_millis {
            return Err(Error::event(
                "timestamp",
                "The timestamp is too far in the future",
            ));
        }
        let object_ids = get_string_list(obj, "objectIDs", "objectIDs")?;
        let filters = get_string_list(obj, "filters", "filters")?;
        let (object_ids, filters) = match (object_ids, filters) {
            (Some(ids), None) => {
                if ids.iter().any(String::is_empty) {
                    return Err(Error::event(
                        "objectIDs",
                        "ObjectIDs must not be empty strings",
                    ));
                }
                (ids, Vec::new())
            }
            (None, Some(filters)) => {
                let parsed = filters
                    .iter()
                    .map(|f| parse_filter(f))
                    .collect::<Result<_>>()?;
                (Vec::new(), parsed)
            }
            _ => {
                return Err(Error::event(
                    "objectIDs",
                    "Event should specify ObjectIDs or Filters, but not both",
                ));
            }
        };
        let query_id = get_str(obj, "queryID", "queryID")?.map(str::to_string);
        if let Some(q) = &query_id {
            if q.len() != 32 || !q.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::event(
                    "queryID",
                    "QueryID must be 32 hexadecimal characters",
                ));
            }
        }
        let positions = match obj.get("positions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let p = item
                        .as_u64()
                        .filter(|p| *p >= 1 && *p <= u64::from(u32::MAX));
                    let p = p.ok_or_else(|| {
                        Error::event("positions", "Positions must be positive integers")
                    })?;
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
                out
            }
            Some(_) => {
                return Err(Error::event(
                    "positions",
                    "Positions must be an array of integers",
                ))
            }
        };
        let conversion_only = |key: &str, field: &'static str| -> Result<Option<Value>> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(_) if event_type != EventType::Conversion => Err(Error::event(
                    field,
                    format!("{field} is only allowed for conversion events"),
                )),
                Some(v) => Ok(Some(v.clone())),
            }
        };
        let object_data = conversion_only("objectData", "objectData")?;
        let value = conversion_only("value", "value")?;
        if let Some(v) = &value {
            if !(v.is_number() || v.is_string()) {
                return Err(Error::event("value", "Value must be a number or a string"));
            }
        }
        let currency = match conversion_only("currency", "currency")? {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(Error::event("currency", "Currency must be a string")),
        };
        Ok(Event {
            event_type,
            event_subtype,
            event_name: event_name.to_string(),
            index: index.to_string(),
            user_token: user_token.to_string(),
            authenticated_user_token: authenticated_user_token.map(str::to_string),
            timestamp_millis,
            object_ids,
            filters,
            positions,
            query_id,
            object_data,
            value,
            currency,
        })
    }

    /// The profile's identity: the authenticated token when present.
    pub fn identity(&self) -> &str {
        self.authenticated_user_token
            .as_deref()
            .unwrap_or(&self.user_token)
    }

    /// Canonical bytes of everything that makes the event distinct, hashed
    /// into its row-key suffix: a retry gives the same bytes, two different
    /// events give different ones.
    pub fn content(&self) -> Vec<u8> {
        /// The filters as `facet:value` strings, written without building them.
        struct Filters<'a>(&'a [(String, String)]);
        struct Filter<'a>(&'a str, &'a str);
        impl serde::Serialize for Filters<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|(f, v)| Filter(f, v)))
            }
        }
        impl serde::Serialize for Filter<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut text = String::with_capacity(self.0.len() + 1 + self.1.len());
                text.push_str(self.0);
                text.push(':');
                text.push_str(self.1);
                s.serialize_str(&text)
            }
        }
        let fields = (
            self.event_type.as_str(),
            &self.event_subtype,
            &self.event_name,
            &self.index,
            &self.user_token,
            &self.authenticated_user_token,
            self.timestamp_millis,
            &self.object_ids,
            Filters(&self.filters),
            &self.positions,
            &self.query_id,
            &self.object_data,
            &self.value,
            &self.currency,
        );
        // Serializing plain data to memory cannot fail.
        serde_json::to_vec(&fields).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The identity bytes as first defined (a JSON array built as a
    /// `Value`): event keys of stored events depend on them not changing.
    fn content_as_defined(e: &Event) -> Vec<u8> {
        let filters: Vec<String> = e.filters.iter().map(|(f, v)| format!("{f}:{v}")).collect();
        serde_json::json!([
            e.event_type.as_str(),
            e.event_subtype,
            e.event_name,
            e.index,
            e.user_token,
            e.authenticated_user_token,
            e.timestamp_millis,
            e.object_ids,
            filters,
            e.positions,
            e.query_id,
            e.object_data,
            e.value,
            e.currency,
        ])
        .to_string()
        .into_bytes()
    }

    #[test]
    fn content_bytes_are_stable() {
        let mut e = Event::from_json(&base(), &Limits::api(NOW)).expect("valid");
        assert_eq!(e.content(), content_as_defined(&e));
        e.event_subtype = Some("add\"ToCart\u{1}".into());
        e.filters = vec![("brand".into(), "A\"pple, é".into())];
        e.object_data = Some(json!([{"price": 1.5, "b": [1, "x"]}]));
        e.value = Some(json!(12.25));
        e.currency = Some("EUR".into());
        e.query_id = Some("q".into());
        e.positions = vec![1, 7];
        e.authenticated_user_token = Some("auth-1".into());
        assert_eq!(e.content(), content_as_defined(&e));
    }

    const NOW: i64 = 1_700_000_000_000;

    fn base() -> Value {
        json!({"eventType":"click","eventName":"Product Clicked","index":"products",
               "userToken":"user-1","timestamp":NOW - 1000,"objectIDs":["o1","o2"]})
    }

    fn err_of(v: Value) -> Error {
        Event::from_json(&v, &Limits::api(NOW)).unwrap_err()
    }

    fn with(key: &str, value: Value) -> Value {
        let mut v = base();
        v.as_object_mut().unwrap().insert(key.to_string(), value);
        v
    }

    #[test]
    fn accepts_a_valid_event() {
        let e = Event::from_json(&base(), &Limits::api(NOW)).unwrap();
        assert_eq!(e.event_type, EventType::Click);
        assert_eq!(e.object_ids, ["o1", "o2"]);
        assert_eq!(e.identity(), "user-1");
        let e = Event::from_json(
            &with("authenticatedUserToken", json!("auth-9")),
            &Limits::api(NOW),
        )
        .unwrap();
        assert_eq!(e.identity(), "auth-9");
        let mut v = base();
        v.as_object_mut().unwrap().remove("objectIDs");
        v.as_object_mut()
            .unwrap()
            .insert("filters".into(), json!(["brand:Apple%20Inc", "color:a:b"]));
        let e = Event::from_json(&v, &Limits::api(NOW)).unwrap();
        assert_eq!(
            e.filters,
            [
                ("brand".to_string(), "Apple Inc".to_string()),
                ("color".into(), "a:b".into())
            ]
        );
    }

    #[test]
    fn errors_name_the_field_with_algolia_messages() {
        let e = err_of(with("eventType", json!("purchase")));
        assert_eq!(
            e.to_string(),
            "EventType must be one of view, click, conversion"
        );
        assert_eq!(e.field(), Some("eventType"));
        let e = err_of(with("filters", json!(["brand:Apple"])));
        assert_eq!(
            e.to_string(),
            "Event should specify ObjectIDs or Filters, but not both"
        );
        let e = err_of(with("timestamp", json!(NOW - API_MAX_AGE_MILLIS - 1)));
        assert_eq!(e.to_string(), "The timestamp is too far in the past");
        let cases = [
            ("eventName", json!(""), "eventName"),
            ("eventName", json!("x".repeat(65)), "eventName"),
            ("userToken", json!("bad token"), "userToken"),
            ("userToken", json!("u".repeat(130)), "userToken"),
            (
                "authenticatedUserToken",
                json!("a,b"),
                "authenticatedUserToken",
            ),
            ("index", json!(""), "index"),
            ("objectIDs", json!([]), "objectIDs"),
            ("objectIDs", json!(vec!["o"; 21]), "objectIDs"),
            ("queryID", json!("abc"), "queryID"),
            ("positions", json!([1, 2]), "positions"),
            ("eventSubtype", json!("purchase"), "eventSubtype"),
            ("value", json!(3), "value"),
            ("timestamp", json!(NOW + MAX_SKEW_MILLIS + 1), "timestamp"),
            ("timestamp", json!("soon"), "timestamp"),
        ];
        for (key, value, field) in cases {
            let e = err_of(with(key, value.clone()));
            assert_eq!(e.field(), Some(field), "{key}={value}: {e}");
        }
    }

    #[test]
    fn age_limit_is_a_parameter() {
        let old = with("timestamp", json!(NOW - 80 * 86_400_000));
        assert!(Event::from_json(&old, &Limits::api(NOW)).is_err());
        let cli = Limits {
            max_age_millis: 90 * 86_400_000,
            ..Limits::api(NOW)
        };
        assert!(Event::from_json(&old, &cli).is_ok());
    }

    #[test]
    fn positions_need_a_query_id_and_matching_length() {
        let mut v = with("queryID", json!("0123456789abcdef0123456789ABCDEF"));
        v.as_object_mut()
            .unwrap()
            .insert("positions".into(), json!([1, 2]));
        assert!(Event::from_json(&v, &Limits::api(NOW)).is_ok());
        v.as_object_mut()
            .unwrap()
            .insert("positions".into(), json!([1]));
        assert_eq!(
            Event::from_json(&v, &Limits::api(NOW)).unwrap_err().field(),
            Some("positions")
        );
    }

    #[test]
    fn content_is_stable_and_distinguishes_events() {
        let a = Event::from_json(&base(), &Limits::api(NOW)).unwrap();
        let b = Event::from_json(&base(), &Limits::api(NOW)).unwrap();
        assert_eq!(a.content(), b.content());
        let c =
            Event::from_json(&with("objectIDs", json!(["o2", "o1"])), &Limits::api(NOW)).unwrap();
        assert_ne!(a.content(), c.content());
    }
}
