//! Row-key toolkit: the key techniques Affinity uses on the Bigtable data
//! model, each small, exact and fast.
//!
//! - [`composite`]: the events key `app_id,user_token,timestamp[,suffix]`
//!   (ISO-8601 UTC milliseconds, content-derived suffix) and its prefixes;
//!   [`time`]: those timestamps, and the looser forms people write
//!   ([`time::parse_time`]).
//! - [`tuple`](mod@tuple): a binary order-preserving tuple codec for internal tables.
//! - [`salt`], [`fanout`], [`migration`]: salted keys for hot key ranges,
//!   fan-out scans merged in key order, forward-looking migration.
//! - [`curve`], [`geo`], [`cover`], [`plan`]: Hilbert and Z-order keys for
//!   location + time and the budgeted range-cover query planner;
//!   [`latlong`] is the `lat#long` string key, for comparison.
//!
//! It is not a storage engine: scans go through the `affinity_model`
//! [`Table`](affinity_model::Table) trait, and nothing here knows a backend.
//!
//! ```
//! use affinity_rowkey::{composite::EventKey, salt::Salter, curve::{point_index, Curve}};
//!
//! let key = EventKey::for_event("app1", "user42", 1_559_001_874_000, b"click obj7")?;
//! assert!(key.encode()?.starts_with("app1,user42,2019-05-28T00:04:34.000Z,"));
//! let salted = Salter::new(16)?.salt(b"app1,user42,2019-05-28T00:04:34.000Z");
//! assert_eq!(salted, b"13app1,user42,2019-05-28T00:04:34.000Z");
//! let portland = point_index(Curve::Hilbert, -122.676483, 45.523064)?;
//! assert_eq!(Curve::Hilbert.decode(portland).0, affinity_rowkey::curve::lng_cell(-122.676483)?);
//! # Ok::<(), affinity_rowkey::Error>(())
//! ```
//!
//! # Salted key format (spec)
//!
//! For `N` buckets (1 to 256) and a logical key `K` (bytes):
//!
//! 1. `P` = the hashed part of `K`: all of `K` by default; or its first `n`
//!    bytes; or its first `c` components split by a separator byte `s`,
//!    i.e. the bytes before the `c`-th occurrence of `s` (all of `K` when it
//!    has fewer).
//! 2. `h` = XXH64(`P`, seed 0), the 64-bit xxHash as published
//!    (<https://xxhash.com>, `XXH64()` in the reference C library).
//! 3. `salt` = `h mod N`.
//! 4. `W` = number of decimal digits of `N - 1` (at least 1).
//! 5. The salted key is `salt` in decimal, zero-padded to `W` ASCII digits,
//!    followed by `K` unchanged.
//!
//! Test vectors (whole-key hashing):
//!
//! | N | logical key | XXH64 | salted key |
//! |---|---|---|---|
//! | 16 | `app1,user42,2019-05-28T00:04:34.000Z` | `4017694db2aa186d` | `13app1,user42,2019-05-28T00:04:34.000Z` |
//! | 16 | `user42` | `934164743b6a6a0c` | `12user42` |
//! | 100 | `user42` | `934164743b6a6a0c` | `76user42` |
//! | 256 | `user42` | `934164743b6a6a0c` | `012user42` |
//! | 10 | `hello` | `26c7827d889f6da3` | `9hello` |
//! | 7 | (empty) | `ef46db3751d8e999` | `6` |
//!
//! With `Components { separator: b'-', count: 2 }`, `user42-siteA-2019` and
//! `user42-siteA-2020` both hash `user42-siteA`.
//!
//! A scan of logical prefix `Q` reads `salt || Q` in every bucket, unless
//! every key starting with `Q` has the same hashed part (hashing a prefix
//! that `Q` spans), when it reads one bucket.

#![deny(clippy::host_endian_bytes, clippy::little_endian_bytes)]

pub mod composite;
pub mod cover;
pub mod curve;
pub mod error;
pub mod fanout;
pub mod geo;
pub mod latlong;
mod merge;
pub mod migration;
pub mod plan;
pub mod salt;
pub mod time;
pub mod tuple;
pub mod xxh64;

pub use error::{Error, Result};
pub use fanout::{SaltedTable, ScanOrder};
pub use merge::MergedRows;
pub use migration::MigratingTable;
