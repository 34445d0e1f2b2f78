//! Per-client limits of API keys (Algolia's `maxQueriesPerIPPerHour`):
//! who the client of a request is, and how many requests each client has
//! left.
//!
//! A client is the user token a secured API key is restricted to (as in
//! Algolia, so visitors behind one address are counted apart), else the
//! request's IP address: the connection's peer, or, when the peer is a
//! trusted proxy (`trusted_proxies` in the configuration file), the
//! address the proxies recorded in `X-Forwarded-For`, read from the right
//! and past every trusted hop (the entries left of it are the client's
//! own claims, which anyone can forge).
//!
//! Each (application, key, client) has a token bucket of `N` requests
//! refilled at `N` an hour, so a client may spend its hour at once and
//! then gets one request every `3600 / N` seconds. Buckets are this
//! server's: behind a load balancer over `S` servers a client may get up
//! to `S x N`. At most [`MAX_CLIENTS`] buckets are kept; past that, the
//! buckets that are full again are dropped (a client that came back would
//! start from a full bucket anyway), then the half counted longest ago
//! (those clients start again from a full bucket: under a flood of
//! addresses the limit loosens rather than refusing anyone wrongly).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use crate::error::{Error, Result};
use crate::limits::take_token;

/// The most buckets one server keeps.
pub const MAX_CLIENTS: usize = 100_000;

/// Who a per-client limit counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Client {
    /// The user token of a secured API key restricted to one.
    User(String),
    /// The client's address (`None`: the server does not know it, as for
    /// requests that did not come through a socket).
    Ip(Option<IpAddr>),
}

impl Client {
    /// What a refusal names.
    fn what(&self) -> &'static str {
        match self {
            Client::User(_) => "user token",
            Client::Ip(_) => "IP address",
        }
    }
}

/// An address or a network (`10.0.0.0/8`, `fd00::/8`, `::1`), as
/// `trusted_proxies` and secured keys' `restrictSources` name them: an
/// address alone is the network of just it.
pub(crate) fn parse_net(text: &str) -> Option<IpNet> {
    let text = text.trim();
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<IpAddr>().ok().map(IpNet::from))
}

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct Proxies(Vec<IpNet>);

impl Proxies {
    /// Parse `trusted_proxies`, naming the entry at fault.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Proxies> {
        entries
            .iter()
            .map(|e| {
                parse_net(e.as_ref()).ok_or_else(|| Error::Config {
                    reason: format!(
                        "trusted_proxies: {:?} is not an IP address or an address block (a.b.c.d/n, or IPv6 with /n)",
                        e.as_ref()
                    ),
                })
            })
            .collect::<Result<_>>()
            .map(Proxies)
    }

    /// Whether `ip` (canonical: IPv4 as IPv4) is a trusted proxy.
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: `peer`, or when `peer` is a trusted proxy,
    /// the rightmost address of `forwarded` (the `X-Forwarded-For`
    /// values, in order) that is not a trusted proxy (the leftmost when
    /// all are). An entry that is not an address ends the walk at the
    /// hop before it.
    pub fn client_ip<'a>(
        &self,
        peer: Option<IpAddr>,
        forwarded: impl DoubleEndedIterator<Item = &'a str>,
    ) -> Option<IpAddr> {
        let mut client = peer?.to_canonical();
        if !self.trusts(client) {
            return Some(client);
        }
        for entry in forwarded.rev().flat_map(|v| v.rsplit(',')) {
            match entry.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = ip.to_canonical();
                    if !self.trusts(client) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        Some(client)
    }
}

/// Tokens left, when they were counted, and the bucket's requests an
/// hour.
type Tokens = (f64, Instant, u32);

/// An application, the SHA-256 of one of its keys, a client of it.
type BucketId = (String, [u8; 32], Client);

/// The buckets of the clients of limited keys.
#[derive(Debug, Default)]
pub struct ClientBuckets {
    map: Mutex<HashMap<BucketId, Tokens>>,
}

impl ClientBuckets {
    /// Take a request from `client`'s bucket of `per_hour` for the key
    /// `digest` of `app`, at `now`; [`Error::RateLimited`] (with the
    /// seconds to wait) when it is empty.
    pub fn take(
        &self,
        app: &str,
        digest: &[u8; 32],
        client: &Client,
        per_hour: u32,
        now: Instant,
    ) -> std::result::Result<(), Duration> {
        let burst = f64::from(per_hour.max(1));
        let per_second = burst / 3600.0;
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let id = (app.to_string(), *digest, client.clone());
        if !map.contains_key(&id) && map.len() >= MAX_CLIENTS {
            forget_some(&mut map, now);
        }
        let (tokens, counted, rate) = map.entry(id).or_insert((burst, now, per_hour));
        if *rate != per_hour {
            // The key's limit changed: the client keeps what it spent.
            *tokens = tokens.min(burst);
            *rate = per_hour;
        }
        take_token(tokens, counted, now, per_second, burst)
    }

    /// How many buckets are kept.
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Make room: drop the buckets full again at `now`, then, if still
/// full, the half counted longest ago.
fn forget_some(map: &mut HashMap<BucketId, Tokens>, now: Instant) {
    map.retain(|_, (tokens, counted, per_hour)| {
        let burst = f64::from((*per_hour).max(1));
        let refill = now.saturating_duration_since(*counted).as_secs_f64() * burst / 3600.0;
        *tokens + refill < burst
    });
    if map.len() >= MAX_CLIENTS {
        let mut times: Vec<Instant> = map.values().map(|(_, t, _)| *t).collect();
        let (_, median, _) = times.select_nth_unstable(map.len() / 2);
        let median = *median;
        map.retain(|_, (_, counted, _)| *counted > median);
    }
}

/// The refusal of a request over a key's per-client limit.
pub fn refusal(client: &Client, per_hour: u32, wait: Duration) -> Error {
    let retry_after = wait.as_secs_f64().ceil().max(1.0) as u64;
    Error::RateLimited {
        message: format!(
            "Too many requests: this API key allows {per_hour} requests an hour from one {}; retry after {retry_after} s",
            client.what()
        ),
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn address_blocks_match_their_addresses() {
        let trusts = |net: &str, addr: &str| {
            Proxies::parse(&[net])
                .unwrap()
                .trusts(ip(addr).to_canonical())
        };
        assert!(trusts("10.1.0.0/16", "10.1.200.3"));
        assert!(!trusts("10.1.0.0/16", "10.2.0.1"));
        assert!(trusts("10.1.0.0/16", "::ffff:10.1.0.9"), "IPv4 as IPv6");
        assert!(trusts("0.0.0.0/0", "8.8.8.8"));
        assert!(!trusts("0.0.0.0/0", "::1"));
        assert!(trusts("127.0.0.1", "127.0.0.1") && !trusts("127.0.0.1", "127.0.0.2"));
        assert!(trusts("fd00::/8", "fd12::1") && !trusts("fd00::/8", "fe80::1"));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0", "x", "10.0.0.0/", ""] {
            assert!(parse_net(bad).is_none(), "{bad}");
        }
        let err = Proxies::parse(&["10.0.0.0/8", "nonsense"]).unwrap_err();
        assert!(err.to_string().contains("\"nonsense\""), "{err}");
    }

    #[test]
    fn the_client_is_past_the_trusted_proxies() {
        let proxies = Proxies::parse(&["10.0.0.0/8", "127.0.0.1"]).unwrap();
        let client = |peer: &str, xff: &[&str]| {
            proxies
                .client_ip(Some(ip(peer)), xff.iter().copied())
                .unwrap()
        };
        // An untrusted peer's header is ignored.
        assert_eq!(client("203.0.113.9", &["1.2.3.4"]), ip("203.0.113.9"));
        // Through a trusted proxy: the rightmost untrusted entry.
        assert_eq!(client("10.0.0.5", &["1.2.3.4"]), ip("1.2.3.4"));
        assert_eq!(
            client("10.0.0.5", &["6.6.6.6, 1.2.3.4, 10.9.9.9"]),
            ip("1.2.3.4"),
            "a forged left entry is not believed"
        );
        assert_eq!(client("127.0.0.1", &["6.6.6.6", "1.2.3.4"]), ip("1.2.3.4"));
        // Nothing forwarded, or all trusted, or garbage next to the proxy.
        assert_eq!(client("10.0.0.5", &[]), ip("10.0.0.5"));
        assert_eq!(client("10.0.0.5", &["10.0.0.7"]), ip("10.0.0.7"));
        assert_eq!(client("10.0.0.5", &["1.2.3.4, junk"]), ip("10.0.0.5"));
        assert_eq!(proxies.client_ip(None, [].into_iter()), None);
        // No proxies configured: always the peer.
        let none = Proxies::default();
        assert_eq!(
            none.client_ip(Some(ip("10.0.0.5")), ["1.2.3.4"].into_iter()),
            Some(ip("10.0.0.5"))
        );
    }

    #[test]
    fn each_client_has_its_hour() {
        let buckets = ClientBuckets::default();
        let (a, b) = (Client::Ip(Some(ip("1.1.1.1"))), Client::User("u2".into()));
        let t0 = Instant::now();
        for _ in 0..3 {
            buckets.take("shop", &[1; 32], &a, 3, t0).unwrap();
        }
        let wait = buckets.take("shop", &[1; 32], &a, 3, t0).unwrap_err();
        // One request every 20 minutes once the hour is spent.
        assert!((1199.0..=1200.0).contains(&wait.as_secs_f64()), "{wait:?}");
        // Another client, another key, another application: their own.
        buckets.take("shop", &[1; 32], &b, 3, t0).unwrap();
        buckets.take("shop", &[2; 32], &a, 3, t0).unwrap();
        buckets.take("other", &[1; 32], &a, 3, t0).unwrap();
        // 20 minutes later, one more.
        let later = t0 + Duration::from_secs(1200);
        buckets.take("shop", &[1; 32], &a, 3, later).unwrap();
        assert!(buckets.take("shop", &[1; 32], &a, 3, later).is_err());
        let e = refusal(&a, 3, wait);
        assert!(
            e.to_string()
                .contains("3 requests an hour from one IP address"),
            "{e}"
        );
        assert!(e.to_string().contains("retry after 1200 s"), "{e}");
    }

    #[test]
    fn the_buckets_kept_are_bounded() {
        let buckets = ClientBuckets::default();
        let t0 = Instant::now();
        let key = [7; 32];
        // Clients that used their whole hour, then a flood of new ones.
        for i in 0..MAX_CLIENTS as u32 {
            let client = Client::Ip(Some(IpAddr::from(i.to_be_bytes())));
            let at = t0 + Duration::from_millis(u64::from(i) / 100);
            buckets.take("shop", &key, &client, 1, at).unwrap();
        }
        assert_eq!(buckets.len(), MAX_CLIENTS);
        let late = t0 + Duration::from_secs(10);
        buckets
            .take("shop", &key, &Client::User("new".into()), 1, late)
            .unwrap();
        assert!(buckets.len() <= MAX_CLIENTS / 2 + 1, "{}", buckets.len());
        // The clients counted last are still limited.
        let last = Client::Ip(Some(IpAddr::from((MAX_CLIENTS as u32 - 1).to_be_bytes())));
        assert!(buckets.take("shop", &key, &last, 1, late).is_err());
    }
}
