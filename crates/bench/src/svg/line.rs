//! A line chart: series of `(x, y)` points on linear axes from 0, with
//! "nice" ticks and a legend below.

use super::{Anchor, Stroke, Svg};

/// One line of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub colour: &'static str,
    /// Drawn dashed (the schema benchmark's narrow schema).
    pub dashed: bool,
    /// `(x, y)`, drawn in x order.
    pub points: Vec<(f64, f64)>,
}

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

/// The chart: a title, both axes with their labels, one line (and a dot
/// per point) per series, the legend three to a row.
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
    let mut svg = Svg::new(w, h);
    svg.text((left, 24.0), Anchor::Start, Some(14), title);
    let mut y = 0.0;
    while y <= y_top + ys / 2.0 {
        svg.line((left, py(y)), (w - right, py(y)), Stroke::thin("#ddd"));
        svg.text((left - 6.0, py(y) + 4.0), Anchor::End, None, &tick_label(y));
        y += ys;
    }
    let mut x = 0.0;
    while x <= x_top + xs / 2.0 {
        svg.line((px(x), top), (px(x), top + plot_h), Stroke::thin("#eee"));
        let at = (px(x), top + plot_h + 16.0);
        svg.text(at, Anchor::Middle, None, &tick_label(x));
        x += xs;
    }
    let x_axis = (left + (w - left - right) / 2.0, top + plot_h + 34.0);
    svg.text(x_axis, Anchor::Middle, None, x_label);
    svg.vertical_text((18.0, top + plot_h / 2.0), y_label);
    for s in series {
        let stroke = Stroke {
            colour: s.colour,
            width: 2.0,
            dashed: s.dashed,
        };
        let mut points = s.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let drawn: Vec<(f64, f64)> = points.iter().map(|(x, y)| (px(*x), py(*y))).collect();
        svg.polyline(&drawn, stroke);
        for ((x, y), at) in points.iter().zip(drawn) {
            let title = format!("{}: {} -> {y:.3}", s.label, tick_label(*x));
            svg.circle(at, 3.0, s.colour, Some(&title));
        }
    }
    for (i, s) in series.iter().enumerate() {
        let lx = left + 240.0 * (i % 3) as f64;
        let ly = top + plot_h + 52.0 + 18.0 * (i / 3) as f64;
        let stroke = Stroke {
            colour: s.colour,
            width: 2.0,
            dashed: s.dashed,
        };
        svg.line((lx, ly), (lx + 24.0, ly), stroke);
        svg.text((lx + 30.0, ly + 4.0), Anchor::Start, None, &s.label);
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn points_sit_on_the_axes_scale() {
        let series = [Series {
            label: "a".into(),
            colour: "red",
            dashed: false,
            points: vec![(10.0, 5.0), (0.0, 0.0)],
        }];
        let svg = line_chart("t", "x", "y", &series);
        // Axes end at 10 (x) and 5 (y): (0, 0) is the plot's bottom left,
        // (10, 5) its top right (820 - 30 wide, 50 + 360 high).
        assert!(
            svg.contains(r#"<polyline points="80.0,410.0 790.0,50.0""#),
            "{svg}"
        );
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("<title>a: 10 -&gt; 5.000</title>"), "{svg}");
    }
}
