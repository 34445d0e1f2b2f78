//! API keys kept in the store, so every server sees a key created or
//! deleted through any one of them (`docs/design/keys.md`). The engine
//! stores records; what an ACL means, how keys are made and how requests
//! are authenticated is `affinity_http`'s.
//!
//! Table `keys`, family `k` (one version):
//! - row `app,<sha256 hex>`: one key of `app`, column `key` its record
//!   (JSON: `acl`, `description`, `createdAt`, `validUntil`, and `value`,
//!   the key itself, only when the caller chose to keep it);
//! - row `~generation`, column `g`: a counter incremented after every
//!   change. A reader that reads the counter and then the keys holds every
//!   change made before the counter it read; re-reading the keys only when
//!   the counter moved makes a steady-state refresh one point read.
//!
//! No application id holds `,` or `~`, so an application's rows are
//! exactly the prefix `app,`, and the counter's row is no application's.

use std::collections::HashMap;

use affinity_model::{Mutation, ReadModifyWriteRule, ReadRowsRequest, RowFilter, RowRange, RowSet};
use serde_json::{json, Value};

use crate::engine::{validate_app, Engine};
use crate::error::{Error, Result};

/// The table of API keys.
pub const KEYS_TABLE: &str = "keys";
pub(crate) const FAMILY: &str = "k";
const COLUMN: &[u8] = b"key";
const GENERATION_ROW: &[u8] = b"~generation";
const GENERATION_COLUMN: &[u8] = b"g";

/// One API key of an application, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// SHA-256 of the key: what requests are compared against.
    pub digest: [u8; 32],
    /// The key itself, kept only when it may be the parent of secured
    /// API keys (whose HMAC needs it).
    pub plain: Option<String>,
    /// ACL names (checked by the caller).
    pub acl: Vec<String>,
    pub description: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch after which the key is refused.
    pub valid_until: Option<i64>,
    /// Algolia's `maxQueriesPerIPPerHour`: the requests one client (an IP
    /// address, or the user token a secured key is restricted to) may
    /// make with this key in an hour; `None`: no such limit.
    pub max_queries_per_ip_per_hour: Option<u32>,
}

impl StoredKey {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "acl": self.acl,
            "description": self.description,
            "createdAt": self.created_at,
            "validUntil": self.valid_until,
        });
        if let Some(plain) = &self.plain {
            v["value"] = json!(plain);
        }
        if let Some(n) = self.max_queries_per_ip_per_hour {
            v["maxQueriesPerIPPerHour"] = json!(n);
        }
        v
    }

    fn from_json(digest: [u8; 32], v: &Value) -> Option<StoredKey> {
        Some(StoredKey {
            digest,
            plain: match v.get("value") {
                None | Some(Value::Null) => None,
                Some(p) => Some(p.as_str()?.to_string()),
            },
            acl: v
                .get("acl")?
                .as_array()?
                .iter()
                .map(|a| a.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
            description: v.get("description")?.as_str()?.to_string(),
            created_at: v.get("createdAt")?.as_i64()?,
            valid_until: match v.get("validUntil") {
                None | Some(Value::Null) => None,
                Some(t) => Some(t.as_i64()?),
            },
            max_queries_per_ip_per_hour: match v.get("maxQueriesPerIPPerHour") {
                None | Some(Value::Null) => None,
                Some(n) => Some(u32::try_from(n.as_u64()?).ok()?),
            },
        })
    }
}

/// Lower-case hexadecimal of a digest.
pub fn digest_hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(hex: &[u8]) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *o = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

fn row_key(app: &str, digest: &[u8; 32]) -> Vec<u8> {
    format!("{app},{}", digest_hex(digest)).into_bytes()
}

/// The row prefix of an application's keys.
pub(crate) fn app_prefix(app: &str) -> Vec<u8> {
    format!("{app},").into_bytes()
}

fn parse_row(row: &affinity_model::Row) -> Result<Option<(String, StoredKey)>> {
    if row.key.as_ref() == GENERATION_ROW {
        return Ok(None);
    }
    let key = String::from_utf8_lossy(&row.key).into_owned();
    let corrupt = |what: &str| Error::corrupt("API key record", format!("{key}: {what}"));
    let (app, hex) = key
        .split_once(',')
        .ok_or_else(|| corrupt("no application"))?;
    let digest = parse_hex(hex.as_bytes()).ok_or_else(|| corrupt("not a SHA-256 digest"))?;
    let Some(cell) = row.latest(FAMILY, COLUMN) else {
        return Ok(None);
    };
    let json: Value = serde_json::from_slice(&cell.value)?;
    let stored = StoredKey::from_json(digest, &json).ok_or_else(|| corrupt("unreadable record"))?;
    Ok(Some((app.to_string(), stored)))
}

impl Engine {
    /// Store `key` as a key of `app` (replacing a key of the same
    /// digest), creating the application with the default settings if it
    /// has none, so deleting the application deletes its keys.
    pub fn put_api_key(&self, app: &str, key: &StoredKey) -> Result<()> {
        validate_app(app)?;
        self.app(app)?;
        let json = serde_json::to_vec(&key.to_json())?;
        self.keys_table.mutate_row(
            &row_key(app, &key.digest),
            &[Mutation::set_cell(FAMILY, COLUMN, 0, json)],
        )?;
        self.bump_keys_generation()
    }

    /// Delete the key of `app` with `digest`; `false` when it has none.
    pub fn delete_api_key(&self, app: &str, digest: &[u8; 32]) -> Result<bool> {
        if self.api_key(app, digest)?.is_none() {
            return Ok(false);
        }
        self.keys_table
            .mutate_row(&row_key(app, digest), &[Mutation::DeleteFromRow])?;
        self.bump_keys_generation()?;
        Ok(true)
    }

    /// The key of `app` with `digest`, if stored.
    pub fn api_key(&self, app: &str, digest: &[u8; 32]) -> Result<Option<StoredKey>> {
        validate_app(app)?;
        let filter = RowFilter::CellsPerColumnLimit(1);
        match self
            .keys_table
            .read_row(&row_key(app, digest), Some(&filter))?
        {
            Some(row) => Ok(parse_row(&row)?.map(|(_, k)| k)),
            None => Ok(None),
        }
    }

    /// The stored keys of `app`, by digest.
    pub fn api_keys(&self, app: &str) -> Result<Vec<StoredKey>> {
        validate_app(app)?;
        let rows = RowSet::from_range(RowRange::prefix(app_prefix(app)));
        Ok(self.read_keys(rows)?.into_values().flatten().collect())
    }

    /// Every stored key, by application.
    pub fn all_api_keys(&self) -> Result<HashMap<String, Vec<StoredKey>>> {
        self.read_keys(RowSet::all())
    }

    fn read_keys(&self, rows: RowSet) -> Result<HashMap<String, Vec<StoredKey>>> {
        let request = ReadRowsRequest::new(rows).with_filter(RowFilter::CellsPerColumnLimit(1));
        let mut out: HashMap<String, Vec<StoredKey>> = HashMap::new();
        for row in self.keys_table.read_rows(&request)? {
            if let Some((app, key)) = parse_row(&row?)? {
                out.entry(app).or_default().push(key);
            }
        }
        Ok(out)
    }

    /// The change counter of the stored keys: read it, then the keys, and
    /// read them again only once it moved.
    pub fn api_keys_generation(&self) -> Result<i64> {
        let filter = RowFilter::CellsPerColumnLimit(1);
        let Some(row) = self.keys_table.read_row(GENERATION_ROW, Some(&filter))? else {
            return Ok(0);
        };
        let Some(cell) = row.latest(FAMILY, GENERATION_COLUMN) else {
            return Ok(0);
        };
        let bytes: [u8; 8] = cell
            .value
            .as_ref()
            .try_into()
            .map_err(|_| Error::corrupt("API key generation", "not an 8-byte counter"))?;
        Ok(i64::from_be_bytes(bytes))
    }

    pub(crate) fn bump_keys_generation(&self) -> Result<()> {
        self.keys_table.read_modify_write_row(
            GENERATION_ROW,
            &[ReadModifyWriteRule::increment(FAMILY, GENERATION_COLUMN, 1)],
        )?;
        Ok(())
    }
}
