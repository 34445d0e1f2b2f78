//! Secured API keys, as Algolia's clients generate them
//! (`generateSecuredApiKey(parentKey, restrictions)`):
//!
//! ```text
//! key   = base64( hex(HMAC-SHA256(parentKey, query)) + query )
//! query = restrictions URL-encoded, e.g. restrictIndices=products&userToken=u1&validUntil=1700000000
//! ```
//!
//! The server holds no state for them: a key is verified by recomputing
//! the HMAC under each plain-text key of the application, and its
//! restrictions are read from the query it carries. Clients differ in how
//! they write lists (the Python client 4.x and JavaScript client 5.x join
//! them with commas, the JavaScript client 4.x writes a JSON array) and
//! in the order of parameters (sorted, or as given): the HMAC covers the
//! query as sent, so both are read.

use std::net::IpAddr;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use ipnet::IpNet;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha2::Sha256;

use crate::error::{Error, Result};

type HmacSha256 = Hmac<Sha256>;

/// Length of the hexadecimal HMAC at the start of a decoded key.
const MAC_HEX_LEN: usize = 64;

/// Standard base64, with or without padding (clients pad; a key copied
/// from a URL may have lost it).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// What Python's `urlencode(...).replace("+", "%20")` leaves as is (its
/// `quote_plus` keeps letters, digits and `_.-~`), so generated keys are
/// byte for byte those of Algolia's Python client.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// The restrictions a secured key carries. Each one narrows what the
/// parent key may do; an absent one narrows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restrictions {
    /// `userToken`: the only user whose profile the key reads and for
    /// whom it sends events.
    pub user_token: Option<String>,
    /// `validUntil`: Unix time in seconds after which the key is refused.
    pub valid_until: Option<u64>,
    /// `restrictIndices`: index names or `*` patterns (`dev_*`, `*_dev`,
    /// `*_products_*`) events and catalog objects must match.
    pub restrict_indices: Option<Vec<String>>,
    /// `restrictSources`: networks the client's address must be in.
    pub restrict_sources: Option<Vec<IpNet>>,
}

/// A key that decodes as a secured key: the HMAC it claims and the query
/// it covers. Whether the HMAC is right is [`SecuredKey::signed_by`]'s
/// question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecuredKey {
    mac: [u8; 32],
    query: String,
}

impl SecuredKey {
    /// Decode `key`; `None` when it is not base64 of 64 hexadecimal
    /// characters followed by a UTF-8 query, which is then no secured key
    /// at all (a wrong key, answered as any wrong key).
    pub fn decode(key: &str) -> Option<SecuredKey> {
        // A `+` of a key sent unescaped in a query string arrives as a
        // space, which base64 never holds.
        let bytes = BASE64.decode(key.replace(' ', "+").trim()).ok()?;
        if bytes.len() < MAC_HEX_LEN {
            return None;
        }
        let (hex, query) = bytes.split_at(MAC_HEX_LEN);
        let mut mac = [0u8; 32];
        for (out, pair) in mac.iter_mut().zip(hex.chunks_exact(2)) {
            *out = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
        }
        let query = String::from_utf8(query.to_vec()).ok()?;
        Some(SecuredKey { mac, query })
    }

    /// Whether `parent` made this key: its HMAC of the query, compared in
    /// constant time.
    pub fn signed_by(&self, parent: &str) -> bool {
        let Ok(mut mac) = HmacSha256::new_from_slice(parent.as_bytes()) else {
            return false;
        };
        mac.update(self.query.as_bytes());
        mac.verify_slice(&self.mac).is_ok()
    }

    /// The restrictions of the query (read once the HMAC is verified).
    pub fn restrictions(&self) -> Result<Restrictions> {
        Restrictions::parse(&self.query)
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// A secured key's refusal: 403 with `message`.
fn refused(message: impl Into<String>) -> Error {
    Error::Restricted {
        message: message.into(),
    }
}

/// A list restriction: a JSON array of strings (the JavaScript client
/// 4.x) or comma-separated values (the Python and JavaScript 5.x
/// clients).
fn list(name: &str, value: &str) -> Result<Vec<String>> {
    let items: Vec<String> = if value.trim_start().starts_with('[') {
        serde_json::from_str(value).map_err(|_| {
            refused(format!(
                "Invalid secured API key: {name} must be a JSON array of strings or a comma-separated list"
            ))
        })?
    } else {
        value.split(',').map(|s| s.trim().to_string()).collect()
    };
    let items: Vec<String> = items.into_iter().filter(|s| !s.is_empty()).collect();
    if items.is_empty() {
        return Err(refused(format!(
            "Invalid secured API key: {name} must name at least one value"
        )));
    }
    Ok(items)
}

fn source(text: &str) -> Result<IpNet> {
    crate::clients::parse_net(text).ok_or_else(|| {
            refused(format!(
                "Invalid secured API key: restrictSources {text:?} is not an IP address or CIDR network"
            ))
        })
}

/// Whether `index` matches Algolia's `restrictIndices` pattern: exact, or
/// with a leading and/or trailing `*`.
fn index_matches(pattern: &str, index: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        _ if pattern == "*" => true,
        (Some(rest), Some(_)) => index.contains(&rest[..rest.len() - 1]),
        (Some(suffix), None) => index.ends_with(suffix),
        (None, Some(prefix)) => index.starts_with(prefix),
        (None, None) => index == pattern,
    }
}

impl Restrictions {
    /// Read a key's query. The four restrictions above are enforced;
    /// any other parameter is a search parameter (`filters`,
    /// `hitsPerPage`, ... : Algolia's clients put a key's search
    /// parameters in the same query) that applies to searches, which
    /// Affinity does not serve, and is ignored. A restriction given twice
    /// or unreadable is refused, naming it.
    pub fn parse(query: &str) -> Result<Restrictions> {
        let mut r = Restrictions::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let twice = || refused(format!("Invalid secured API key: {name} is given twice"));
            match name.as_ref() {
                "userToken" => {
                    if r.user_token.is_some() {
                        return Err(twice());
                    }
                    if value.is_empty() {
                        return Err(refused("Invalid secured API key: userToken is empty"));
                    }
                    r.user_token = Some(value.into_owned());
                }
                "validUntil" => {
                    if r.valid_until.is_some() {
                        return Err(twice());
                    }
                    let seconds = value.trim().parse::<u64>().map_err(|_| {
                        refused(format!(
                            "Invalid secured API key: validUntil {value:?} is not a Unix time in seconds"
                        ))
                    })?;
                    r.valid_until = Some(seconds);
                }
                "restrictIndices" => {
                    if r.restrict_indices.is_some() {
                        return Err(twice());
                    }
                    r.restrict_indices = Some(list("restrictIndices", &value)?);
                }
                "restrictSources" => {
                    if r.restrict_sources.is_some() {
                        return Err(twice());
                    }
                    let sources = list("restrictSources", &value)?;
                    r.restrict_sources =
                        Some(sources.iter().map(|s| source(s)).collect::<Result<_>>()?);
                }
                _ => {}
            }
        }
        Ok(r)
    }

    /// The query Algolia's Python client writes for these restrictions:
    /// parameters sorted by name, lists joined with commas, values
    /// percent-encoded (space as `%20`).
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(indices) = &self.restrict_indices {
            pairs.push(("restrictIndices", indices.join(",")));
        }
        if let Some(sources) = &self.restrict_sources {
            let sources: Vec<String> = sources.iter().map(IpNet::to_string).collect();
            pairs.push(("restrictSources", sources.join(",")));
        }
        if let Some(user) = &self.user_token {
            pairs.push(("userToken", user.clone()));
        }
        if let Some(until) = self.valid_until {
            pairs.push(("validUntil", until.to_string()));
        }
        pairs.sort_by(|a, b| a.0.cmp(b.0));
        pairs
            .iter()
            .map(|(name, value)| format!("{name}={}", utf8_percent_encode(value, QUERY_VALUE)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// A secured key of `parent` carrying these restrictions, as
    /// Algolia's `generateSecuredApiKey` makes it.
    pub fn generate(&self, parent: &str) -> String {
        let query = self.to_query();
        let mut mac =
            HmacSha256::new_from_slice(parent.as_bytes()).expect("HMAC takes keys of any length");
        mac.update(query.as_bytes());
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        BASE64.encode(format!("{hex}{query}"))
    }

    /// Refuse an expired key (`now` in Unix seconds).
    pub fn check_time(&self, now: u64) -> Result<()> {
        match self.valid_until {
            Some(until) if now > until => Err(refused(format!(
                "The API key expired: validUntil {until} is before now ({now})"
            ))),
            _ => Ok(()),
        }
    }

    /// Refuse a client outside `restrictSources` (or of unknown address
    /// when the key restricts sources).
    pub fn check_source(&self, client: Option<IpAddr>) -> Result<()> {
        let Some(sources) = &self.restrict_sources else {
            return Ok(());
        };
        let allowed = client.is_some_and(|ip| {
            let ip = ip.to_canonical();
            sources.iter().any(|net| net.contains(&ip))
        });
        if allowed {
            return Ok(());
        }
        let client = client.map_or("unknown".to_string(), |ip| ip.to_string());
        let sources: Vec<String> = sources.iter().map(IpNet::to_string).collect();
        Err(refused(format!(
            "This API key is restricted to restrictSources {}: the client address {client} is not in them",
            sources.join(",")
        )))
    }

    /// Refuse a user other than `userToken`.
    pub fn check_user(&self, user: &str) -> Result<()> {
        match &self.user_token {
            Some(only) if only != user => Err(refused(format!(
                "This API key is restricted to userToken {only:?}: {user:?} is another user"
            ))),
            _ => Ok(()),
        }
    }

    /// Refuse an index outside `restrictIndices`.
    pub fn check_index(&self, index: &str) -> Result<()> {
        match &self.restrict_indices {
            Some(patterns) if !patterns.iter().any(|p| index_matches(p, index)) => {
                Err(refused(format!(
                    "This API key is restricted to restrictIndices {}: index {index:?} is not one of them",
                    patterns.join(",")
                )))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(e: &Error) -> u16 {
        e.status().as_u16()
    }

    /// A key made by Algolia's Python client 4.48 (`SearchClientSync
    /// .generate_secured_api_key("parent-key", {"userToken": "u1",
    /// "validUntil": 1700000000, "restrictIndices": ["products", "dev_*"],
    /// "filters": "brand:Apple"})`), pasted here so the format is pinned
    /// without Python.
    const PYTHON_KEY: &str = "NzljNjEzYTBmMDkwYTA4OWMwNTc5ZmE2N2ViN2NmNWVmNDVmNjRlNWM5NWQ4YzQ2NzNiODEyYTcwNDM2MTFmNmZpbHRlcnM9YnJhbmQlM0FBcHBsZSZyZXN0cmljdEluZGljZXM9cHJvZHVjdHMlMkNkZXZfJTJBJnVzZXJUb2tlbj11MSZ2YWxpZFVudGlsPTE3MDAwMDAwMDA=";

    #[test]
    fn a_key_of_algolias_python_client_verifies_and_reads() {
        let key = SecuredKey::decode(PYTHON_KEY).unwrap();
        assert!(key.signed_by("parent-key"));
        assert!(!key.signed_by("parent-kez"));
        let r = key.restrictions().unwrap();
        assert_eq!(r.user_token.as_deref(), Some("u1"));
        assert_eq!(r.valid_until, Some(1_700_000_000));
        assert_eq!(
            r.restrict_indices,
            Some(vec!["products".to_string(), "dev_*".to_string()])
        );
        // `filters` is a search parameter: read and ignored.
        assert_eq!(r.restrict_sources, None);
    }

    #[test]
    fn generated_keys_round_trip_and_match_the_python_format() {
        let r = Restrictions {
            user_token: Some("u 1".into()),
            valid_until: Some(1_700_000_000),
            restrict_indices: Some(vec!["products".into(), "dev_*".into()]),
            restrict_sources: Some(vec!["192.168.1.0/24".parse().unwrap()]),
        };
        assert_eq!(
            r.to_query(),
            "restrictIndices=products%2Cdev_%2A&restrictSources=192.168.1.0%2F24&userToken=u%201&validUntil=1700000000"
        );
        // Byte for byte what Algolia's Python client 4.48 generates for
        // the same restrictions (`restrictSources` given as one string).
        let generated = r.generate("parent");
        assert_eq!(generated, "YzA1MmQ1YjI1YWY2ZjQwYjRiNTFiY2UzN2IzOWJhNThkNzM1NGMwNmEzYmUzODk0YjAyMGFlOWQ1MGVjNWYyYnJlc3RyaWN0SW5kaWNlcz1wcm9kdWN0cyUyQ2Rldl8lMkEmcmVzdHJpY3RTb3VyY2VzPTE5Mi4xNjguMS4wJTJGMjQmdXNlclRva2VuPXUlMjAxJnZhbGlkVW50aWw9MTcwMDAwMDAwMA==");
        let key = SecuredKey::decode(&generated).unwrap();
        assert!(key.signed_by("parent"));
        // A key whose `+` became a space in a query string still decodes.
        // Base64 of ASCII holds `+` only for a `~` at a byte offset of
        // 2 mod 3: three of them in a row place one there.
        let plus = Restrictions {
            user_token: Some("a~~~".into()),
            ..Restrictions::default()
        }
        .generate("parent");
        assert!(plus.contains('+'), "{plus}");
        assert_eq!(
            SecuredKey::decode(&plus.replace('+', " ")),
            SecuredKey::decode(&plus)
        );
        assert!(SecuredKey::decode(&plus).is_some());
        assert_eq!(key.restrictions().unwrap(), r);
    }

    #[test]
    fn a_tampered_key_is_signed_by_no_parent() {
        let key = Restrictions {
            user_token: Some("u1".into()),
            ..Restrictions::default()
        }
        .generate("parent");
        let decoded = String::from_utf8(BASE64.decode(&key).unwrap()).unwrap();
        let forged = BASE64.encode(decoded.replace("userToken=u1", "userToken=u2"));
        let forged = SecuredKey::decode(&forged).unwrap();
        assert!(!forged.signed_by("parent"));
        assert!(SecuredKey::decode("not base64!").is_none());
        assert!(SecuredKey::decode(&BASE64.encode("short")).is_none());
        let not_hex = BASE64.encode(format!("{}userToken=u1", "z".repeat(64)));
        assert!(SecuredKey::decode(&not_hex).is_none());
    }

    #[test]
    fn javascript_v4_json_arrays_and_unsorted_parameters_are_read() {
        let r = Restrictions::parse(
            "validUntil=5&restrictIndices=%5B%22products%22%2C%22blog%22%5D&restrictSources=10.0.0.1",
        )
        .unwrap();
        assert_eq!(
            r.restrict_indices,
            Some(vec!["products".to_string(), "blog".to_string()])
        );
        assert_eq!(
            r.restrict_sources,
            Some(vec!["10.0.0.1/32".parse().unwrap()])
        );
        assert_eq!(r.valid_until, Some(5));
    }

    #[test]
    fn bad_restrictions_are_refused_naming_them() {
        for (query, names) in [
            ("validUntil=soon", "validUntil"),
            ("userToken=a&userToken=b", "userToken"),
            ("restrictSources=10.0.0.0%2F33", "restrictSources"),
            ("restrictIndices=%5B1%5D", "restrictIndices"),
            ("restrictIndices=", "restrictIndices"),
        ] {
            let err = Restrictions::parse(query).unwrap_err();
            assert_eq!(status(&err), 403, "{query}");
            assert!(err.to_string().contains(names), "{query}: {err}");
        }
    }

    #[test]
    fn expiry_user_index_and_source_are_enforced() {
        let r = Restrictions::parse(
            "userToken=u1&validUntil=100&restrictIndices=products,dev_*,*_tmp,*_prod_*&restrictSources=192.168.1.0/24,::1",
        )
        .unwrap();
        assert!(r.check_time(100).is_ok());
        let expired = r.check_time(101).unwrap_err();
        assert_eq!(status(&expired), 403);
        assert!(expired.to_string().contains("expired"), "{expired}");

        assert!(r.check_user("u1").is_ok());
        let other = r.check_user("u2").unwrap_err();
        assert_eq!(status(&other), 403);
        assert!(other.to_string().contains("userToken \"u1\""), "{other}");

        for ok in ["products", "dev_a", "a_tmp", "x_prod_y"] {
            assert!(r.check_index(ok).is_ok(), "{ok}");
        }
        for refused in ["product", "xdev_a", "a_tmpx", "prod"] {
            let err = r.check_index(refused).unwrap_err();
            assert!(err.to_string().contains("restrictIndices"), "{err}");
        }

        assert!(r
            .check_source(Some("192.168.1.77".parse().unwrap()))
            .is_ok());
        assert!(r.check_source(Some("::1".parse().unwrap())).is_ok());
        // An IPv4 client seen on an IPv6 socket is still itself.
        assert!(r
            .check_source(Some("::ffff:192.168.1.5".parse().unwrap()))
            .is_ok());
        let outside = r.check_source(Some("192.168.2.1".parse().unwrap()));
        assert!(outside.unwrap_err().to_string().contains("192.168.2.1"));
        assert!(r.check_source(None).is_err());

        let open = Restrictions::default();
        assert!(open.check_time(u64::MAX).is_ok());
        assert!(open.check_user("anyone").is_ok());
        assert!(open.check_index("anything").is_ok());
        assert!(open.check_source(None).is_ok());
    }
}
