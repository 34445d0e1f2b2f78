//! A bar chart on a log scale: one group of bars per category, one bar per
//! series in each, its value written above it; values are ratios (1 and
//! more: the scale starts at 1).

use super::{Anchor, Stroke, Svg};

/// One series: a bar in every group (`None`: no value, marked "none").
#[derive(Debug, Clone, PartialEq)]
pub struct Bars<'a> {
    pub label: &'a str,
    pub colour: &'a str,
    /// One value per group, in the groups' order.
    pub values: Vec<Option<f64>>,
}

/// The chart: a title, a decade grid up to the largest value (at least
/// 10), the groups along the bottom and the legend under them.
pub fn log_bar_chart(title: &str, groups: &[&str], series: &[Bars<'_>]) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(10.0f64, |m, v| m.max(*v));
    let decades = max.log10().ceil().max(1.0);
    let (w, h, left, top, bottom) = (760.0, 400.0, 70.0, 50.0, 60.0);
    let plot_h = h - top - bottom;
    let y_of = |v: f64| top + plot_h * (1.0 - v.max(1.0).log10() / decades);
    let group_w = (w - left - 20.0) / groups.len().max(1) as f64;
    let bar_w = group_w * 0.8 / series.len().max(1) as f64;
    let mut svg = Svg::new(w, h);
    svg.text((left, 20.0), Anchor::Start, Some(14), title);
    for d in 0..=decades as i32 {
        let y = y_of(10f64.powi(d));
        svg.line((left, y), (w - 20.0, y), Stroke::thin("#ddd"));
        let label = 10u64.pow(d as u32).to_string();
        svg.text((left - 6.0, y + 4.0), Anchor::End, None, &label);
    }
    for (g, group) in groups.iter().enumerate() {
        let gx = left + group_w * g as f64 + group_w * 0.1;
        for (k, s) in series.iter().enumerate() {
            let x = gx + bar_w * k as f64;
            let centre = x + bar_w * 0.45;
            let Some(v) = s.values.get(g).copied().flatten() else {
                svg.text(
                    (centre, top + plot_h - 4.0),
                    Anchor::Middle,
                    Some(9),
                    "none",
                );
                continue;
            };
            let y = y_of(v);
            svg.text(
                (centre, y - 3.0),
                Anchor::Middle,
                Some(10),
                &format!("{v:.2}"),
            );
            let size = (bar_w * 0.9, (top + plot_h - y).max(1.0));
            let tooltip = format!("{} {group}: {v:.2}", s.label);
            svg.rect((x, y), size, s.colour, Some(&tooltip));
        }
        let at = (gx + group_w * 0.4, top + plot_h + 18.0);
        svg.text(at, Anchor::Middle, None, group);
    }
    for (k, s) in series.iter().enumerate() {
        let x = left + 10.0 + 110.0 * k as f64;
        svg.rect((x, h - 24.0), (12.0, 12.0), s.colour, None);
        svg.text((x + 16.0, h - 14.0), Anchor::Start, None, s.label);
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_stand_on_a_log_scale_and_missing_values_say_none() {
        let series = [
            Bars {
                label: "a",
                colour: "red",
                values: vec![Some(1.0), Some(100.0)],
            },
            Bars {
                label: "b",
                colour: "blue",
                values: vec![None, Some(10.0)],
            },
        ];
        let svg = log_bar_chart("t", &["small", "large"], &series);
        // Two decades (1, 10, 100): three grid lines.
        assert_eq!(svg.matches("<line").count(), 3);
        // Three bars and two legend squares; one "none".
        assert_eq!(svg.matches("<rect x=").count(), 5);
        assert_eq!(svg.matches(">none<").count(), 1);
        // 100 reaches the top of the plot (y = 50), 10 halfway, 1 the
        // bottom (at least 1 pixel high).
        assert!(svg.contains(r#"y="50.0" width="#), "{svg}");
        assert!(svg.contains(r#"y="195.0" width="#), "{svg}");
        assert!(svg.contains(r#"y="340.0" width="#), "{svg}");
        assert!(svg.contains("<title>b large: 10.00</title>"), "{svg}");
    }
}
