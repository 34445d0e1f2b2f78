//! Location + time keys: `[salt][time bin][curve index][time within bin][id]`.
//!
//! | field | bytes | value |
//! |---|---|---|
//! | salt | 1 | `XXH64(id) mod salts` (0 when `salts` is 1) |
//! | time bin | 4 | `floor(t_ms / bin_ms)`, big-endian |
//! | curve index | 8 | Hilbert (or Z-order) index of (lng, lat), big-endian |
//! | time within bin | 4 | `t_ms mod bin_ms`, big-endian |
//! | id | rest | the point's id, raw |
//!
//! Times are milliseconds since the Unix epoch, from 1970 on. Within a bin
//! and salt, nearby points have nearby keys, so an area + time query reads a
//! few short ranges per (salt, bin): see [`crate::plan`].

use crate::curve::{cell_lat, cell_lng, lat_cell, lng_cell, Curve};
use crate::error::{Error, Result};
use crate::salt::MAX_BUCKETS;
use crate::xxh64::xxh64;

/// Length of the fixed part of a key (everything but the id).
pub const FIXED_LEN: usize = 1 + 4 + 8 + 4;

/// Size of a time bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeBin {
    Hour,
    Day,
    Week,
}

impl TimeBin {
    pub fn millis(self) -> i64 {
        match self {
            TimeBin::Hour => 3_600_000,
            TimeBin::Day => 86_400_000,
            TimeBin::Week => 604_800_000,
        }
    }

    /// Parse `hour`, `day` or `week`.
    pub fn parse(text: &str) -> Result<TimeBin> {
        match text {
            "hour" => Ok(TimeBin::Hour),
            "day" => Ok(TimeBin::Day),
            "week" => Ok(TimeBin::Week),
            _ => Err(Error::InvalidArgument {
                name: "bin",
                reason: format!("{text:?} is not hour, day or week"),
            }),
        }
    }
}

/// A decoded location + time key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeoKey {
    pub salt: u8,
    pub bin: u32,
    pub index: u64,
    pub offset_millis: u32,
    pub id: Vec<u8>,
}

/// The parameters of the key layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeoLayout {
    pub curve: Curve,
    pub bin: TimeBin,
    salts: u32,
}

impl GeoLayout {
    /// A layout with `salts` salt values (1..=256).
    pub fn new(curve: Curve, bin: TimeBin, salts: u32) -> Result<GeoLayout> {
        if !(1..=MAX_BUCKETS).contains(&salts) {
            return Err(Error::InvalidBuckets { buckets: salts });
        }
        Ok(GeoLayout { curve, bin, salts })
    }

    pub fn salts(&self) -> u32 {
        self.salts
    }

    /// The salt of an id.
    pub fn salt_of(&self, id: &[u8]) -> u8 {
        (xxh64(id) % u64::from(self.salts)) as u8
    }

    /// The time bin of a time, checked to fit the key.
    pub fn bin_of(&self, time_millis: i64) -> Result<u32> {
        if time_millis < 0 {
            return Err(Error::InvalidTimestamp {
                value: time_millis.to_string(),
                reason: "is before 1970, which the location key cannot hold",
            });
        }
        u32::try_from(time_millis / self.bin.millis()).map_err(|_| Error::InvalidTimestamp {
            value: time_millis.to_string(),
            reason: "is too far in the future for a 32-bit time bin",
        })
    }

    /// The key of point `id` at (lng, lat) and `time_millis`.
    pub fn encode(&self, lng: f64, lat: f64, time_millis: i64, id: &[u8]) -> Result<Vec<u8>> {
        let index = self.curve.encode(lng_cell(lng)?, lat_cell(lat)?);
        let bin = self.bin_of(time_millis)?;
        let offset = (time_millis % self.bin.millis()) as u32;
        let mut key = Vec::with_capacity(FIXED_LEN + id.len());
        key.push(self.salt_of(id));
        key.extend_from_slice(&bin.to_be_bytes());
        key.extend_from_slice(&index.to_be_bytes());
        key.extend_from_slice(&offset.to_be_bytes());
        key.extend_from_slice(id);
        Ok(key)
    }

    /// Decode a key written by [`GeoLayout::encode`].
    pub fn decode(&self, key: &[u8]) -> Result<GeoKey> {
        if key.len() < FIXED_LEN {
            return Err(Error::MalformedKey {
                key: format!("{key:02x?}"),
                reason: format!(
                    "is {} bytes, a location key has at least {FIXED_LEN}",
                    key.len()
                ),
            });
        }
        let mut word4 = [0u8; 4];
        let mut word8 = [0u8; 8];
        word4.copy_from_slice(&key[1..5]);
        let bin = u32::from_be_bytes(word4);
        word8.copy_from_slice(&key[5..13]);
        let index = u64::from_be_bytes(word8);
        word4.copy_from_slice(&key[13..17]);
        let offset_millis = u32::from_be_bytes(word4);
        Ok(GeoKey {
            salt: key[0],
            bin,
            index,
            offset_millis,
            id: key[FIXED_LEN..].to_vec(),
        })
    }

    /// The time of a decoded key, in milliseconds since the epoch.
    pub fn time_of(&self, key: &GeoKey) -> i64 {
        i64::from(key.bin) * self.bin.millis() + i64::from(key.offset_millis)
    }

    /// The south-west corner of a decoded key's grid cell, as (lng, lat).
    pub fn position_of(&self, key: &GeoKey) -> (f64, f64) {
        let (x, y) = self.curve.decode(key.index);
        (cell_lng(x), cell_lat(y))
    }
}
