//! Seeded sample data for tests and benchmarks: sensor points crowding
//! around cities (and around the antimeridian) over one week, the same
//! for `affinity bench geo` and this crate's tests.

use crate::{Field, Point};

/// Cities the generated points crowd around: Portland, Milan and Venice
/// share a latitude band, and Suva sits by the antimeridian.
pub const CITIES: [(&str, f64, f64); 16] = [
    ("Portland", -122.68, 45.52),
    ("Milan", 9.19, 45.46),
    ("Venice", 12.33, 45.44),
    ("Montreal", -73.57, 45.50),
    ("Bordeaux", -0.58, 44.84),
    ("Harbin", 126.63, 45.80),
    ("New York", -74.0, 40.71),
    ("London", -0.13, 51.51),
    ("Tokyo", 139.69, 35.69),
    ("Sao Paulo", -46.63, -23.55),
    ("Sydney", 151.21, -33.87),
    ("Lagos", 3.38, 6.52),
    ("Mumbai", 72.88, 19.08),
    ("Auckland", 174.76, -36.85),
    ("Anchorage", -149.9, 61.2),
    ("Suva", 178.44, -18.14),
];

/// Start of the generated week: 2024-01-01T00:00:00Z.
pub const GENERATED_START: i64 = 1_704_067_200_000;
const MEASUREMENTS: [&str; 8] = [
    "temperature",
    "humidity",
    "pressure",
    "speed",
    "heading",
    "battery",
    "pm25",
    "noise",
];

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal deviate (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// `n` sensor points over one week, seeded: 80% around the [`CITIES`]
/// (about 30 km spread), 20% anywhere between 60 S and 70 N; 8 numeric
/// measurements each; one id per 50 points.
pub fn sensor_points(n: usize, seed: u64) -> Vec<Point> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let devices = (n / 50).max(1);
    let week = 7.0 * 86_400_000.0;
    (0..n)
        .map(|i| {
            let (lng, lat) = if rng.unit() < 0.8 {
                let (_, clng, clat) = CITIES[(rng.unit() * CITIES.len() as f64) as usize % 16];
                let lat = (clat + 0.3 * rng.normal()).clamp(-89.0, 89.0);
                let lng = clng + 0.3 * rng.normal() / clat.to_radians().cos();
                ((lng + 180.0).rem_euclid(360.0) - 180.0, lat)
            } else {
                (rng.unit() * 360.0 - 180.0, rng.unit() * 130.0 - 60.0)
            };
            let fields = MEASUREMENTS
                .iter()
                .map(|m| {
                    (
                        m.to_string(),
                        Field::Number((rng.unit() * 1000.0).round() / 10.0),
                    )
                })
                .collect();
            Point {
                id: format!("sensor{:07}", i % devices),
                time_millis: GENERATED_START + (rng.unit() * week) as i64,
                lng,
                lat,
                fields,
            }
        })
        .collect()
}

/// Query centres for [`sensor_points`]: five of the [`CITIES`] (Suva's
/// boxes cross the antimeridian), at the middle of the week.
pub fn sensor_centres() -> Vec<(f64, f64, i64)> {
    let mid = GENERATED_START + 3 * 86_400_000 + 12 * 3_600_000 + 1_800_000;
    ["Portland", "Milan", "Tokyo", "Sydney", "Suva"]
        .iter()
        .filter_map(|name| CITIES.iter().find(|c| c.0 == *name))
        .map(|&(_, lng, lat)| (lng, lat, mid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_seeded_within_the_week_and_crowd_around_cities() {
        let points = sensor_points(2000, 7);
        assert_eq!(points, sensor_points(2000, 7));
        assert_ne!(points, sensor_points(2000, 8));
        let week = GENERATED_START..GENERATED_START + 7 * 86_400_000;
        assert!(points.iter().all(|p| week.contains(&p.time_millis)));
        assert!(points
            .iter()
            .all(|p| (-180.0..180.0).contains(&p.lng) && (-89.0..=89.0).contains(&p.lat)));
        let ids: std::collections::BTreeSet<&str> = points.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), 40, "one id per 50 points");
        assert!(points.iter().all(|p| p.fields.len() == MEASUREMENTS.len()));
        // Within 2 degrees of a city: the 80% around them, and a few of
        // the rest.
        let near = points
            .iter()
            .filter(|p| {
                CITIES
                    .iter()
                    .any(|(_, lng, lat)| (p.lat - lat).abs() < 2.0 && (p.lng - lng).abs() < 3.0)
            })
            .count();
        assert!((1500..1800).contains(&near), "{near} of 2000 near a city");
        assert_eq!(sensor_centres().len(), 5);
    }
}
