//! The schema benchmark's chart: export time versus events (the scaling
//! run) or versus facets used, one line per series.

use super::report::{Record, Run};
use crate::svg::line::{line_chart, Series};

const COLOURS: [&str; 6] = [
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
];

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
            "Export of every profile: median time versus events (dashed: narrow)",
            "events",
            "seconds (median)",
            &series,
        )
    } else {
        line_chart(
            "Export of every profile: median time versus facets the strategy uses (dashed: narrow)",
            "facets used",
            "seconds (median)",
            &series,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::report::tests::record;

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
