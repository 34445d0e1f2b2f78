//! The one chart writer of the reports: SVG written by hand (no plotting
//! dependency for two charts). [`Svg`] writes the elements; [`line`] draws
//! series on linear axes (the schema benchmark), [`bars`] groups of bars on
//! a log scale (the geo benchmark).

pub mod bars;
pub mod line;

use std::fmt::Write;

/// Where a text sits relative to its `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// How a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stroke<'a> {
    pub colour: &'a str,
    pub width: f64,
    pub dashed: bool,
}

impl Stroke<'_> {
    /// A thin solid line, for grids.
    pub fn thin(colour: &str) -> Stroke<'_> {
        Stroke {
            colour,
            width: 1.0,
            dashed: false,
        }
    }

    fn attributes(&self) -> String {
        let dash = if self.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        format!(
            r#"stroke="{}" stroke-width="{}"{dash}"#,
            self.colour, self.width
        )
    }
}

/// An SVG document on a white background, in the reports' font.
pub struct Svg {
    out: String,
}

impl Svg {
    pub fn new(width: f64, height: f64) -> Svg {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            out,
            r#"<rect width="{width}" height="{height}" fill="white"/>"#
        );
        Svg { out }
    }

    /// A text; `size` in pixels when not the document's 12.
    pub fn text(&mut self, (x, y): (f64, f64), anchor: Anchor, size: Option<u32>, text: &str) {
        let size = size.map_or(String::new(), |s| format!(r#" font-size="{s}""#));
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{}"{size}>{}</text>"#,
            anchor.as_str(),
            escape(text)
        );
    }

    /// A text read bottom to top, centred on `(x, y)` (a vertical axis's
    /// label).
    pub fn vertical_text(&mut self, (x, y): (f64, f64), text: &str) {
        let _ = writeln!(
            self.out,
            r#"<text transform="translate({x:.1} {y:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            escape(text)
        );
    }

    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: Stroke<'_>) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.1}" x2="{x2:.1}" y1="{y1:.1}" y2="{y2:.1}" {}/>"#,
            stroke.attributes()
        );
    }

    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: Stroke<'_>) {
        let points: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            self.out,
            r#"<polyline points="{}" fill="none" {}/>"#,
            points.join(" "),
            stroke.attributes()
        );
    }

    /// A filled rectangle, with a tooltip when `title` is given.
    pub fn rect(
        &mut self,
        (x, y): (f64, f64),
        (w, h): (f64, f64),
        fill: &str,
        title: Option<&str>,
    ) {
        let _ = write!(
            self.out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}""#
        );
        self.close(title, "rect");
    }

    /// A filled circle, with a tooltip when `title` is given.
    pub fn circle(&mut self, (cx, cy): (f64, f64), r: f64, fill: &str, title: Option<&str>) {
        let _ = write!(
            self.out,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="{r}" fill="{fill}""#
        );
        self.close(title, "circle");
    }

    fn close(&mut self, title: Option<&str>, element: &str) {
        let _ = match title {
            Some(t) => writeln!(self.out, "><title>{}</title></{element}>", escape(t)),
            None => writeln!(self.out, "/>"),
        };
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// `text` with the characters XML gives a meaning escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_written_with_their_attributes_and_text_is_escaped() {
        let mut svg = Svg::new(100.0, 50.0);
        svg.text((10.0, 20.0), Anchor::End, Some(14), "a < b & c");
        svg.line((0.0, 1.0), (2.0, 3.0), Stroke::thin("#ddd"));
        let dashed = Stroke {
            colour: "red",
            width: 2.0,
            dashed: true,
        };
        svg.polyline(&[(1.0, 2.0), (3.04, 4.0)], dashed);
        svg.rect((1.0, 2.0), (3.0, 4.0), "blue", Some("x -> y"));
        svg.circle((5.0, 6.0), 3.0, "green", None);
        let text = svg.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0]
            .starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50""#));
        assert_eq!(lines[1], r#"<rect width="100" height="50" fill="white"/>"#);
        assert_eq!(
            lines[2],
            r#"<text x="10.0" y="20.0" text-anchor="end" font-size="14">a &lt; b &amp; c</text>"#
        );
        assert_eq!(
            lines[3],
            r##"<line x1="0.0" x2="2.0" y1="1.0" y2="3.0" stroke="#ddd" stroke-width="1"/>"##
        );
        assert_eq!(
            lines[4],
            r#"<polyline points="1.0,2.0 3.0,4.0" fill="none" stroke="red" stroke-width="2" stroke-dasharray="6 4"/>"#
        );
        assert_eq!(
            lines[5],
            r#"<rect x="1.0" y="2.0" width="3.0" height="4.0" fill="blue"><title>x -&gt; y</title></rect>"#
        );
        assert_eq!(
            lines[6],
            r#"<circle cx="5.0" cy="6.0" r="3" fill="green"/>"#
        );
        assert_eq!(lines[7], "</svg>");
    }
}
