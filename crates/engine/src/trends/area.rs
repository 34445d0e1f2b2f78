//! The area of a trends query: a bounding box, or a circle tested exactly
//! with the haversine distance (its bounding box only picks the key ranges
//! to read).

use affinity_rowkey::plan::BBox;

use crate::error::{Error, Result};

/// Mean Earth radius (IUGG), metres: the sphere of the haversine distance.
pub const EARTH_RADIUS_METERS: f64 = 6_371_008.8;

/// Degrees added around a circle's bounding box, so rounding never leaves
/// a point on the circle outside it (1e-7 degrees is about a centimetre).
const MARGIN_DEGREES: f64 = 1e-7;

/// Where a trends query looks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Area {
    /// A box; edges included; across the antimeridian when
    /// `min_lng > max_lng`.
    BBox(BBox),
    /// Points at most `radius_meters` (haversine) from the centre.
    Circle {
        lat: f64,
        lng: f64,
        radius_meters: f64,
    },
}

/// The great-circle distance in metres between two (lat, lng) points.
pub fn haversine_meters(lat1: f64, lng1: f64, lat2: f64, lng2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lng2 - lng1).to_radians();
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_METERS * h.sqrt().min(1.0).asin()
}

fn invalid(name: &'static str, reason: String) -> Error {
    Error::InvalidArgument { name, reason }
}

impl Area {
    /// A checked circle: latitude in [-90, 90], longitude in [-180, 180],
    /// radius a positive finite number of metres.
    pub fn circle(lat: f64, lng: f64, radius_meters: f64) -> Result<Area> {
        if !(-90.0..=90.0).contains(&lat) {
            return Err(invalid(
                "latitude",
                format!("{lat} is not a latitude in [-90, 90]"),
            ));
        }
        if !(-180.0..=180.0).contains(&lng) {
            return Err(invalid(
                "longitude",
                format!("{lng} is not a longitude in [-180, 180]"),
            ));
        }
        if !(radius_meters.is_finite() && radius_meters > 0.0) {
            return Err(invalid(
                "radius",
                format!("{radius_meters} is not a positive number of metres"),
            ));
        }
        Ok(Area::Circle {
            lat,
            lng,
            radius_meters,
        })
    }

    /// True when (lat, lng) is inside the area.
    pub fn contains(&self, lat: f64, lng: f64) -> bool {
        match *self {
            Area::BBox(b) => {
                let lng_in = if b.crosses_antimeridian() {
                    lng >= b.min_lng || lng <= b.max_lng
                } else {
                    b.min_lng <= lng && lng <= b.max_lng
                };
                lng_in && b.min_lat <= lat && lat <= b.max_lat
            }
            Area::Circle {
                lat: clat,
                lng: clng,
                radius_meters,
            } => haversine_meters(clat, clng, lat, lng) <= radius_meters,
        }
    }

    /// A box holding every point of the area (the box itself for a box).
    pub fn bounding_box(&self) -> Result<BBox> {
        let (lat, lng, radius) = match *self {
            Area::BBox(b) => return Ok(b),
            Area::Circle {
                lat,
                lng,
                radius_meters,
            } => (lat, lng, radius_meters),
        };
        let angle = radius / EARTH_RADIUS_METERS;
        let whole = || Ok(BBox::new(-180.0, -90.0, 180.0, 90.0)?);
        if angle >= std::f64::consts::PI {
            return whole();
        }
        let dlat = angle.to_degrees() + MARGIN_DEGREES;
        let (min_lat, max_lat) = (lat - dlat, lat + dlat);
        if min_lat <= -90.0 || max_lat >= 90.0 {
            // The circle holds a pole: every longitude.
            return Ok(BBox::new(
                -180.0,
                min_lat.max(-90.0),
                180.0,
                max_lat.min(90.0),
            )?);
        }
        // Widest longitude offset of a circle on the sphere.
        let ratio = angle.sin() / lat.to_radians().cos();
        if ratio >= 1.0 {
            return Ok(BBox::new(-180.0, min_lat, 180.0, max_lat)?);
        }
        let dlng = ratio.asin().to_degrees() + MARGIN_DEGREES;
        if dlng >= 180.0 {
            return Ok(BBox::new(-180.0, min_lat, 180.0, max_lat)?);
        }
        let wrap = |v: f64| {
            if v < -180.0 {
                v + 360.0
            } else if v > 180.0 {
                v - 360.0
            } else {
                v
            }
        };
        Ok(BBox::new(
            wrap(lng - dlng),
            min_lat,
            wrap(lng + dlng),
            max_lat,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haversine_matches_known_distances() {
        // One degree of latitude on the mean sphere.
        let d = haversine_meters(0.0, 0.0, 1.0, 0.0);
        assert!((d - 111_195.08).abs() < 1.0, "{d}");
        assert_eq!(haversine_meters(45.0, 7.0, 45.0, 7.0), 0.0);
        // Across the antimeridian, the short way.
        let d = haversine_meters(0.0, 179.9, 0.0, -179.9);
        assert!((d - 22_239.0).abs() < 1.0, "{d}");
    }

    #[test]
    fn circle_boxes_hold_points_on_the_circle() {
        for &(lat, lng, r) in &[
            (45.5, -122.6, 5_000.0),
            (0.0, 179.99, 20_000.0),
            (-33.9, 151.2, 800_000.0),
            (89.9, 0.0, 50_000.0),
            (10.0, 20.0, 30_000_000.0),
        ] {
            let area = Area::circle(lat, lng, r).unwrap();
            let b = area.bounding_box().unwrap();
            let inside = Area::BBox(b);
            // Points on (just inside) the circle, every 5 degrees of bearing.
            for step in 0..72 {
                let bearing = f64::from(step * 5).to_radians();
                let a = r * 0.999_999 / EARTH_RADIUS_METERS;
                let (p1, l1) = (lat.to_radians(), lng.to_radians());
                let p2 = (p1.sin() * a.cos() + p1.cos() * a.sin() * bearing.cos()).asin();
                let l2 =
                    l1 + (bearing.sin() * a.sin() * p1.cos()).atan2(a.cos() - p1.sin() * p2.sin());
                let mut l2 = l2.to_degrees();
                while l2 > 180.0 {
                    l2 -= 360.0;
                }
                while l2 < -180.0 {
                    l2 += 360.0;
                }
                let p2 = p2.to_degrees();
                assert!(
                    area.contains(p2, l2),
                    "({p2}, {l2}) in circle {lat},{lng},{r}"
                );
                assert!(inside.contains(p2, l2), "({p2}, {l2}) in box {b:?}");
            }
        }
    }

    #[test]
    fn bad_circles_name_the_parameter() {
        let msg = |r: Result<Area>| r.unwrap_err().to_string();
        assert!(msg(Area::circle(91.0, 0.0, 1.0)).contains("latitude"));
        assert!(msg(Area::circle(0.0, 181.0, 1.0)).contains("longitude"));
        assert!(msg(Area::circle(0.0, 0.0, 0.0)).contains("radius"));
        assert!(msg(Area::circle(0.0, 0.0, f64::NAN)).contains("radius"));
    }
}
