//! Hilbert and Z-order (Morton) curves over a 2^32 x 2^32 grid, and the
//! quantization of (longitude, latitude) onto that grid.
//!
//! `x` is the longitude cell, `y` the latitude cell:
//! `x = floor((lng + 180) / 360 * 2^32)`, `y = floor((lat + 90) / 180 * 2^32)`,
//! clamped to `2^32 - 1` (so 180 and 90 fall in the last cell).
//!
//! The Hilbert curve is the one of the classic `xy2d` (it starts at cell
//! (0, 0) and ends at (2^32 - 1, 0); at every level the quadrants are
//! visited lower-left, upper-left, upper-right, lower-right). The encoder is
//! the branch-free prefix-scan algorithm of rawrunprotected's public-domain
//! `hilbert_curves`, widened to 32 bits per axis: a handful of word
//! operations instead of 32 rounds of quadrant rotations.

use crate::error::{Error, Result};

const M: u64 = 0xFFFF_FFFF;

/// A space-filling curve over the 2^32 x 2^32 grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    Hilbert,
    ZOrder,
}

impl Curve {
    /// The curve index of a cell.
    #[inline]
    pub fn encode(self, x: u32, y: u32) -> u64 {
        match self {
            Curve::Hilbert => hilbert_encode(x, y),
            Curve::ZOrder => zorder_encode(x, y),
        }
    }

    /// The cell of a curve index.
    pub fn decode(self, index: u64) -> (u32, u32) {
        match self {
            Curve::Hilbert => hilbert_decode(index),
            Curve::ZOrder => zorder_decode(index),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Curve::Hilbert => "hilbert",
            Curve::ZOrder => "z-order",
        }
    }
}

/// Spread the 32 bits of `v` to the even bits of a u64.
#[inline]
fn interleave(v: u64) -> u64 {
    let mut v = v & M;
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333;
    (v | (v << 1)) & 0x5555_5555_5555_5555
}

/// Gather the even bits of a u64 into 32 bits.
#[inline]
fn deinterleave(v: u64) -> u64 {
    let mut v = v & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
    (v | (v >> 16)) & M
}

/// Z-order index: bits of `x` at even positions, of `y` at odd positions.
#[inline]
pub fn zorder_encode(x: u32, y: u32) -> u64 {
    interleave(u64::from(x)) | (interleave(u64::from(y)) << 1)
}

/// Inverse of [`zorder_encode`].
pub fn zorder_decode(index: u64) -> (u32, u32) {
    (deinterleave(index) as u32, deinterleave(index >> 1) as u32)
}

/// Hilbert index of cell `(x, y)`.
#[inline]
pub fn hilbert_encode(x: u32, y: u32) -> u64 {
    let (x, y) = (u64::from(x), u64::from(y));
    let (mut a_, mut b_, mut c_, mut d_);
    {
        let a = x ^ y;
        let b = M ^ a;
        let c = M ^ (x | y);
        let d = x & (y ^ M);
        a_ = a | (b >> 1);
        b_ = (a >> 1) ^ a;
        c_ = ((c >> 1) ^ (b & (d >> 1))) ^ c;
        d_ = ((a & (c >> 1)) ^ (d >> 1)) ^ d;
    }
    for shift in [2u32, 4, 8] {
        let (a, b, c, d) = (a_, b_, c_, d_);
        a_ = (a & (a >> shift)) ^ (b & (b >> shift));
        b_ = (a & (b >> shift)) ^ (b & ((a ^ b) >> shift));
        c_ = c ^ ((a & (c >> shift)) ^ (b & (d >> shift)));
        d_ = d ^ ((b & (c >> shift)) ^ ((a ^ b) & (d >> shift)));
    }
    {
        let (a, b, c, d) = (a_, b_, c_, d_);
        c_ = c ^ ((a & (c >> 16)) ^ (b & (d >> 16)));
        d_ = d ^ ((b & (c >> 16)) ^ ((a ^ b) & (d >> 16)));
    }
    let a = c_ ^ (c_ >> 1);
    let b = d_ ^ (d_ >> 1);
    let i0 = x ^ y;
    let i1 = b | (M ^ (i0 | a));
    (interleave(i1) << 1) | interleave(i0)
}

/// Inverse of [`hilbert_encode`].
pub fn hilbert_decode(index: u64) -> (u32, u32) {
    let i0 = deinterleave(index);
    let i1 = deinterleave(index >> 1);
    let t0 = (i0 | i1) ^ M;
    let t1 = i0 & i1;
    let prefix = |mut v: u64| {
        v ^= v >> 16;
        v ^= v >> 8;
        v ^= v >> 4;
        v ^= v >> 2;
        v ^ (v >> 1)
    };
    let a = ((i0 ^ M) & prefix(t1)) | (i0 & prefix(t0));
    ((a ^ i1) as u32, (a ^ i0 ^ i1) as u32)
}

/// The textbook Hilbert `xy2d` at `order` bits per axis: 32 rounds of
/// quadrant rotation. The reference the fast encoder is tested against.
pub fn hilbert_encode_reference(order: u32, x: u32, y: u32) -> u64 {
    let (mut x, mut y) = (u64::from(x), u64::from(y));
    let mask: u64 = (1 << order) - 1;
    let mut d = 0u64;
    let mut s: u64 = 1 << order >> 1;
    while s > 0 {
        let rx = u64::from(x & s > 0);
        let ry = u64::from(y & s > 0);
        d += s * s * ((3 * rx) ^ ry);
        if ry == 0 {
            if rx == 1 {
                x ^= mask;
                y ^= mask;
            }
            std::mem::swap(&mut x, &mut y);
        }
        s >>= 1;
    }
    d
}

const CELLS: f64 = 4_294_967_296.0;

fn check(name: &'static str, value: f64, limit: f64) -> Result<()> {
    if !value.is_finite() {
        return Err(Error::InvalidCoordinate {
            name,
            value,
            reason: "is not a finite number",
        });
    }
    if value < -limit || value > limit {
        return Err(Error::InvalidCoordinate {
            name,
            value,
            reason: if limit == 180.0 {
                "must be within [-180, 180]"
            } else {
                "must be within [-90, 90]"
            },
        });
    }
    Ok(())
}

fn quantize(value: f64, min: f64, span: f64) -> u32 {
    let cell = ((value - min) / span * CELLS).floor();
    cell.clamp(0.0, CELLS - 1.0) as u32
}

/// The longitude cell of `lng` in [-180, 180].
pub fn lng_cell(lng: f64) -> Result<u32> {
    check("longitude", lng, 180.0)?;
    Ok(quantize(lng, -180.0, 360.0))
}

/// The latitude cell of `lat` in [-90, 90].
pub fn lat_cell(lat: f64) -> Result<u32> {
    check("latitude", lat, 90.0)?;
    Ok(quantize(lat, -90.0, 180.0))
}

/// The west edge of a longitude cell, in degrees.
pub fn cell_lng(x: u32) -> f64 {
    f64::from(x) / CELLS * 360.0 - 180.0
}

/// The south edge of a latitude cell, in degrees.
pub fn cell_lat(y: u32) -> f64 {
    f64::from(y) / CELLS * 180.0 - 90.0
}

/// The curve index of a point.
pub fn point_index(curve: Curve, lng: f64, lat: f64) -> Result<u64> {
    Ok(curve.encode(lng_cell(lng)?, lat_cell(lat)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_level_quadrant_order() {
        let half = 1u32 << 31;
        let q = |x, y| hilbert_encode(x, y) >> 62;
        assert_eq!(q(0, 0), 0);
        assert_eq!(q(0, half), 1);
        assert_eq!(q(half, half), 2);
        assert_eq!(q(half, 0), 3);
        assert_eq!(hilbert_encode(0, 0), 0);
        assert_eq!(hilbert_encode(u32::MAX, 0), u64::MAX);
    }

    #[test]
    fn matches_reference_on_small_grids() {
        for order in 1..=6u32 {
            let n = 1u32 << order;
            let shift = 32 - order;
            for x in 0..n {
                for y in 0..n {
                    let fast = hilbert_encode(x << shift, y << shift) >> (2 * shift);
                    assert_eq!(
                        fast,
                        hilbert_encode_reference(order, x, y),
                        "order {order} ({x},{y})"
                    );
                }
            }
        }
    }

    #[test]
    fn quantization_edges() {
        assert_eq!(lng_cell(-180.0).unwrap(), 0);
        assert_eq!(lng_cell(180.0).unwrap(), u32::MAX);
        assert_eq!(lat_cell(90.0).unwrap(), u32::MAX);
        assert_eq!(lat_cell(0.0).unwrap(), 1 << 31);
        assert!(lat_cell(90.5).is_err());
        assert!(lng_cell(f64::NAN).is_err());
        let x = lng_cell(-122.676483).unwrap();
        assert!(cell_lng(x) <= -122.676483 && -122.676483 < cell_lng(x + 1));
    }
}
