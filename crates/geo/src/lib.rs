//! Located points on the Bigtable data model: a table of points (an id, a
//! place, a time and named measurements) keyed for area + time queries,
//! CSV loading and exact queries.
//!
//! - [`point`]: a point and the compact encoding of its value;
//! - [`layout`]: row keys `[salt][time bin][position][time within bin][id]`
//!   with a Hilbert, Z-order or `lat#long` position, and query plans;
//! - [`table`]: [`PointTable`] on the model's `Store`/`Table` traits:
//!   writes, and queries that read the planner's ranges and keep exactly
//!   the points inside the box and time range;
//! - [`csv`], [`load`]: CSV input (its times in the forms of
//!   `affinity_rowkey::time::parse_time`);
//! - [`sample`]: seeded sensor points for tests and benchmarks.
//!
//! It is not a curve library or a planner (those are `affinity_rowkey`'s),
//! nor a storage backend; regional trends (facet values around a place)
//! belong to the engine, and the benchmark of the key designs (`affinity
//! bench geo`) to `affinity-bench`.
//!
//! ```
//! use affinity_geo::{KeyKind, Point, PointLayout, PointTable, Field};
//! use affinity_model::MemoryStore;
//! use affinity_rowkey::{geo::TimeBin, plan::{BBox, GeoQuery}};
//!
//! let store = MemoryStore::new();
//! let layout = PointLayout::new(KeyKind::Hilbert, TimeBin::Hour, 4)?;
//! let table = PointTable::create(&store, "ships", layout)?;
//! let t = affinity_rowkey::time::parse_time("2020-06-30T00:00:00")?;
//! table.write(&[Point {
//!     id: "367000140".into(), time_millis: t, lng: -74.07157, lat: 40.64409,
//!     fields: vec![("SOG".into(), Field::Number(0.5))],
//! }])?;
//! let query = GeoQuery {
//!     bbox: BBox::parse("-74.1,40.6,-74.0,40.7")?,
//!     from_millis: t,
//!     to_millis: t + 3_600_000,
//! };
//! let (points, stats) = table.query(&query)?;
//! assert_eq!(points[0].field("SOG"), Some(&Field::Number(0.5)));
//! assert_eq!(stats.rows_returned, 1);
//! # Ok::<(), affinity_geo::Error>(())
//! ```

#![deny(clippy::host_endian_bytes, clippy::little_endian_bytes)]

pub mod csv;
pub mod error;
pub mod layout;
pub mod load;
pub mod point;
pub mod sample;
pub mod table;

pub use error::{Error, Result};
pub use layout::{KeyKind, PointLayout, PointPlan};
pub use point::{Field, Point};
pub use table::{contains, PointTable, QueryStats};
