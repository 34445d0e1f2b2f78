//! Insights events: parsing and validation of the API's event JSON.
//!
//! [`Event::from_json`] checks every field rule of `API.md`, one validator
//! per field ([`fields`]), and returns an [`Error::InvalidEvent`] naming
//! the field, with Algolia's messages. The age limit is a parameter
//! ([`Limits`]): the HTTP API allows 30 days, the CLI accepts history back
//! to the application's retention.
//!
//! Only the type, the name, the time and what the event is about (object
//! ids, filters) reach profiles. `eventSubtype`, `queryID`, `positions`,
//! `objectData`, `value` and `currency` are validated as Algolia validates
//! them and kept on the [`Event`], where they enter its identity
//! ([`Event::content`]) and nothing else.

mod fields;

pub(crate) use fields::user_token_ok;

use serde_json::Value;

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

impl Event {
    /// Parse and validate one event object, field by field in a fixed
    /// order (an event breaking several rules is refused for the first).
    pub fn from_json(value: &Value, limits: &Limits) -> Result<Event> {
        let obj = value
            .as_object()
            .ok_or_else(|| Error::event("event", "Event must be a JSON object"))?;
        let event_type = fields::event_type(obj)?;
        let event_subtype = fields::event_subtype(obj, event_type)?;
        let event_name = fields::event_name(obj)?;
        let index = fields::index(obj)?;
        let user_token = fields::user_token(obj)?;
        let authenticated_user_token = fields::authenticated_user_token(obj)?;
        let timestamp_millis = fields::timestamp(obj, limits)?;
        let (object_ids, filters) = fields::objects_or_filters(obj)?;
        let query_id = fields::query_id(obj)?;
        let positions = fields::positions(obj, event_type, query_id.as_deref(), &object_ids)?;
        let object_data = fields::object_data(obj, event_type, &object_ids)?;
        let value = fields::value(obj, event_type)?;
        let currency = fields::currency(obj, event_type, value.as_ref(), object_data.as_ref())?;
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
    fn the_first_broken_rule_in_field_order_is_the_one_reported() {
        // Every field broken; fixed one at a time, each reports the next.
        let mut v = json!({"eventType":"buy","eventSubtype":"x","eventName":"","index":"",
            "userToken":"bad token","authenticatedUserToken":"a,b","timestamp":"soon",
            "objectIDs":[],"queryID":"q","positions":[0],"objectData":1,"value":[],
            "currency":1});
        let fixes = [
            ("eventType", json!("click")),
            ("eventSubtype", Value::Null),
            ("eventName", json!("Product Clicked")),
            ("index", json!("products")),
            ("userToken", json!("user-1")),
            ("authenticatedUserToken", Value::Null),
            ("timestamp", json!(NOW)),
            ("objectIDs", json!(["o1"])),
            ("queryID", json!("0123456789abcdef0123456789abcdef")),
            ("positions", json!([1])),
            ("objectData", Value::Null),
            ("value", Value::Null),
            ("currency", Value::Null),
        ];
        for (field, fix) in fixes {
            let e = Event::from_json(&v, &Limits::api(NOW)).unwrap_err();
            assert_eq!(e.field(), Some(field), "{e}");
            v[field] = fix;
        }
        assert!(Event::from_json(&v, &Limits::api(NOW)).is_ok());
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
    fn filters_are_decoded_as_the_api_defines_them() {
        let filters = |f: Value| {
            let mut v = base();
            v.as_object_mut().unwrap().remove("objectIDs");
            v.as_object_mut().unwrap().insert("filters".into(), f);
            Event::from_json(&v, &Limits::api(NOW))
        };
        let e = filters(json!([
            "brand%3AApple",
            "discount:10%25",
            "brand%3AApple%20Inc%3A%20US",
            "a%25b:c+d"
        ]))
        .unwrap();
        assert_eq!(
            e.filters,
            [
                ("brand".to_string(), "Apple".to_string()),
                ("discount".into(), "10%".into()),
                ("brand".into(), "Apple Inc: US".into()),
                ("a%25b".into(), "c+d".into()),
            ]
        );
        for bad in [
            "discount:10%",
            "brand:%zz",
            "brand:%+1",
            "brand%3",
            "a:%C3%28",
        ] {
            let e = filters(json!([bad])).unwrap_err();
            assert_eq!(e.field(), Some("filters"));
            assert!(e.to_string().contains("malformed percent-encoding"), "{e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        for bad in ["brand", "brand%3A", ":x", "%3Ax"] {
            let e = filters(json!([bad])).unwrap_err();
            assert!(e.to_string().contains("facet:value"), "{bad}: {e}");
        }
    }

    #[test]
    fn conversion_details_are_validated_and_kept() {
        let purchase = json!({"eventType":"conversion","eventSubtype":"purchase",
            "eventName":"Order Completed","index":"products","userToken":"u1",
            "objectIDs":["o1","o2"],
            "objectData":[{"price":19.99,"quantity":2,"discount":"1.5",
                           "queryID":"0123456789abcdef0123456789abcdef"},{"price":"5"}],
            "value":44.98,"currency":"EUR"});
        let e = Event::from_json(&purchase, &Limits::api(NOW)).unwrap();
        assert_eq!(e.event_subtype.as_deref(), Some("purchase"));
        assert_eq!(e.object_data, Some(purchase["objectData"].clone()));
        assert_eq!(e.value, Some(json!(44.98)));
        assert_eq!(e.currency.as_deref(), Some("EUR"));
        let broken = |key: &str, value: Value| {
            let mut v = purchase.clone();
            if value.is_null() {
                v.as_object_mut().unwrap().remove(key);
            } else {
                v[key] = value;
            }
            Event::from_json(&v, &Limits::api(NOW)).unwrap_err()
        };
        let cases = [
            (
                "objectData",
                json!([{"price": 1}]),
                "objectData",
                "same length",
            ),
            ("objectData", json!([{}, 3]), "objectData", "ObjectData[1]"),
            (
                "objectData",
                json!([{"price": true}, {}]),
                "objectData",
                "price",
            ),
            (
                "objectData",
                json!([{"quantity": 1.5}, {}]),
                "objectData",
                "quantity",
            ),
            (
                "objectData",
                json!([{"quantity": 1u64 << 40}, {}]),
                "objectData",
                "quantity",
            ),
            (
                "objectData",
                json!([{}, {"queryID": "q"}]),
                "objectData",
                "queryID",
            ),
            ("currency", json!("eur"), "currency", "ISO 4217"),
            ("currency", json!("EURO"), "currency", "ISO 4217"),
            ("currency", Value::Null, "currency", "required"),
            ("value", json!({"amount": 1}), "value", "number or a string"),
        ];
        for (key, value, field, words) in cases {
            let e = broken(key, value.clone());
            assert_eq!(e.field(), Some(field), "{key}={value}: {e}");
            assert!(e.to_string().contains(words), "{key}={value}: {e}");
        }
        // Without a price or a value, no currency is needed.
        let mut v = purchase.clone();
        for key in ["value", "currency"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v["objectData"] = json!([{"quantity": 1}, {"discount": 2}]);
        assert!(Event::from_json(&v, &Limits::api(NOW)).is_ok());
        // Conversion details on a click are refused.
        for key in ["objectData", "value", "currency"] {
            let e = err_of(with(key, purchase[key].clone()));
            assert_eq!(e.field(), Some(key), "{e}");
        }
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
