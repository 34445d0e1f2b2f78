//! A hand-written SVG line chart: recompute time versus events (the
//! scaling run) or versus facets used, one line per series.

use std::fmt::Write;

use super::report::{Record, Run};

/// One line of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub colour: &'static str,
    /// Dashed line (the narrow schema).
    pub dashed: bool,
    /// `(x, y)`, drawn in x order.
    pub points: Vec<(f64, f64)>,
}

const COLOURS: [&str; 6] = [
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
];

/// A "nice" tick step giving about `ticks` ticks up to `max`.
fn step(max: f64, ticks: f64) -> f64 {
    let raw = (max / ticks).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn tick_label(v: f64) -> String {
    if v >= 1e6 && (v / 1e6).fract() == 0.0 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 && (v / 1e3).fract() == 0.0 {
        format!("{}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.2}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart: linear axes from 0, a legend below.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_max) = all.fold((0f64, 0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let (xs, ys) = (step(x_max, 6.0), step(y_max, 6.0));
    let (x_top, y_top) = (
        (x_max / xs).ceil().max(1.0) * xs,
        (y_max / ys).ceil().max(1.0) * ys,
    );
    let legend_rows = series.len().div_ceil(3) as f64;
    let (w, left, right, top) = (820.0, 80.0, 30.0, 50.0);
    let plot_h = 360.0;
    let h = top + plot_h + 50.0 + 18.0 * legend_rows + 10.0;
    let px = |x: f64| left + (w - left - right) * x / x_top;
    let py = |y: f64| top + plot_h * (1.0 - y / y_top);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="24" font-size="14">{}</text>"#,
        escape(title)
    );
    let mut y = 0.0;
    while y <= y_top + ys / 2.0 {
        let _ = writeln!(
            out,
            r##"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            w - right,
            py(y),
            py(y),
            left - 6.0,
            py(y) + 4.0,
            tick_label(y)
        );
        y += ys;
    }
    let mut x = 0.0;
    while x <= x_top + xs / 2.0 {
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{top}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            px(x),
            px(x),
            top + plot_h,
            px(x),
            top + plot_h + 16.0,
            tick_label(x)
        );
        x += xs;
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + (w - left - right) / 2.0,
        top + plot_h + 34.0,
        escape(x_label)
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        escape(y_label)
    );
    for s in series {
        let mut points = s.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            path.join(" "),
            s.colour
        );
        for (x, y) in &points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: {} -> {y:.3}</title></circle>"#,
                px(*x),
                py(*y),
                s.colour,
                escape(&s.label),
                tick_label(*x)
            );
        }
    }
    for (i, s) in series.iter().enumerate() {
        let lx = left + 240.0 * (i % 3) as f64;
        let ly = top + plot_h + 52.0 + 18.0 * (i / 3) as f64;
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" x2="{:.1}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 24.0,
            s.colour,
            lx + 30.0,
            ly + 4.0,
            escape(&s.label)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// The benchmark's chart: median time versus events per (schema, facets)
/// from the scaling run when there is one, else median time versus facets
/// used per (backend, profile, schema).
pub fn chart(records: &[Record]) -> String {
    let scaling = records.iter().any(|r| r.run == Run::Scaling);
    let mut series: Vec<Series> = Vec::new();
    for r in records
        .iter()
        .filter(|r| (r.run == Run::Scaling) == scaling)
    {
        let label = if scaling {
            format!("{} {} facets ({})", r.schema, r.facets_used, r.backend)
        } else {
            format!("{} {} ({})", r.app_profile, r.schema, r.backend)
        };
        let point = if scaling {
            (r.events as f64, r.seconds_median())
        } else {
            (r.facets_used as f64, r.seconds_median())
        };
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => {
                let colour = COLOURS[series.len() / 2 % COLOURS.len()];
                series.push(Series {
                    label,
                    colour,
                    dashed: r.schema == "narrow",
                    points: vec![point],
                });
            }
        }
    }
    if scaling {
        line_chart(
            "Batch recompute: median time versus events (dashed: narrow)",
            "events",
            "seconds (median)",
            &series,
        )
    } else {
        line_chart(
            "Batch recompute: median time versus facets the strategy uses (dashed: narrow)",
            "facets used",
            "seconds (median)",
            &series,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::schemas::report::tests::record;

    #[test]
    fn nice_steps_and_labels() {
        assert_eq!(step(8e6, 6.0), 2e6);
        assert_eq!(step(20.0, 6.0), 5.0);
        assert!(step(0.0, 6.0) > 0.0);
        assert_eq!(tick_label(4e6), "4M");
        assert_eq!(tick_label(3000.0), "3k");
        assert_eq!(tick_label(2500.0), "2500");
        assert_eq!(tick_label(0.25), "0.25");
    }

    #[test]
    fn one_line_per_series_and_a_point_per_record() {
        let records = vec![
            record("narrow", 1, &[3.0], Run::Profiles),
            record("wide", 1, &[1.0], Run::Profiles),
            record("narrow", 20, &[3.0], Run::Profiles),
            record("wide", 20, &[3.0], Run::Profiles),
        ];
        let svg = chart(&records);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 4);
        assert_eq!(svg.matches("stroke-dasharray").count(), 2);
        assert!(svg.contains("facets used"));
        // With a scaling run, the chart is time versus events.
        let mut with_scaling = records.clone();
        with_scaling.push(record("wide", 20, &[2.0], Run::Scaling));
        with_scaling.push(Record {
            events: 2_000_000,
            ..record("wide", 20, &[4.0], Run::Scaling)
        });
        let svg = chart(&with_scaling);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("wide 20 facets (embedded)"));
        assert!(svg.contains(">2M<"));
    }
}
