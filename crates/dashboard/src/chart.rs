//! Charts as SVG text, rendered on the server: a line chart over time and a horizontal bar
//! chart by dimension. Fixed view box, scaled by CSS to the page width (which enlarges the
//! labels on narrow screens, where the chart is drawn smaller); labels escaped. A line chart
//! is followed by its legend.

use std::fmt::Write as _;

// What escapes HTML text and double-quoted attributes escapes SVG ones too.
use marquee_snapshot::escape_html;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;
/// Colours of successive series (accessible on white).
const COLOURS: [&str; 4] = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700"];

/// One line: a value per x position.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub values: Vec<f64>,
    /// Drawn dashed (a target or plan rather than a measurement).
    pub dashed: bool,
}

/// The smallest "nice" number (1, 2 or 5 times a power of ten) at or above `max`, so the
/// axis ends on a round value; 1 for an empty or zero chart.
pub fn nice_ceiling(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|step| step * magnitude)
        .find(|&candidate| candidate >= max)
        .unwrap_or(10.0 * magnitude)
}

/// A tick label, after `unit` (a currency symbol, or nothing for counts): `$500`, `12k`.
fn format_tick(value: f64, unit: &str) -> String {
    if value >= 1_000_000.0 {
        format!("{unit}{}M", trim(value / 1_000_000.0))
    } else if value >= 1_000.0 {
        format!("{unit}{}k", trim(value / 1_000.0))
    } else {
        format!("{unit}{}", trim(value))
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn open_svg(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" \
         aria-label=\"{title}\" xmlns=\"http://www.w3.org/2000/svg\"><title>{title}</title>",
        title = escape_html(title)
    );
}

/// A line chart: one line per series over `x_labels` (a few of which are printed), y from 0
/// to a round ceiling with four grid lines, labelled after `unit` (a currency symbol for
/// amounts in currency units, empty for counts).
pub fn line_chart(title: &str, x_labels: &[String], series: &[Series], unit: &str) -> String {
    let mut out = String::new();
    open_svg(&mut out, title);
    let points = x_labels.len();
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0, f64::max);
    let ceiling = nice_ceiling(max);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |i: usize| {
        if points <= 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + plot_w * i as f64 / (points - 1) as f64
        }
    };
    let y = |v: f64| TOP + plot_h * (1.0 - (v / ceiling).clamp(0.0, 1.0));
    for step in 0..=4 {
        let value = ceiling * f64::from(step) / 4.0;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"tick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(value) + 4.0,
            format_tick(value, unit),
            y = y(value),
        );
    }
    // At most six x labels, evenly spread, first and last included; one too close to the
    // last to be read beside it is left out.
    let label_every = points.div_ceil(6).max(1);
    for (i, label) in x_labels.iter().enumerate() {
        if (i % label_every == 0 && i + label_every < points) || i + 1 == points {
            let _ = write!(
                out,
                "<text class=\"tick\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                x(i),
                HEIGHT - 8.0,
                escape_html(label)
            );
        }
    }
    for (n, s) in series.iter().enumerate() {
        let colour = COLOURS[n % COLOURS.len()];
        let width = stroke_width(n);
        let coordinates: Vec<String> = s
            .values
            .iter()
            .take(points)
            .enumerate()
            .map(|(i, &v)| format!("{:.1},{:.1}", x(i), y(v)))
            .collect();
        let dash = if s.dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<polyline class=\"series\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{width}\"{dash} \
             points=\"{}\"><title>{}</title></polyline>",
            coordinates.join(" "),
            escape_html(&s.label)
        );
        if coordinates.len() == 1 {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>",
                x(0),
                y(s.values[0])
            );
        }
    }
    out.push_str("</svg>");
    legend(&mut out, series);
    out
}

/// Each series' line is narrower than the one before, and drawn over it: where two lines
/// meet, both stay visible.
fn stroke_width(n: usize) -> f64 {
    [4.0, 2.0, 1.5, 1.0][n.min(3)]
}

/// The key to the lines, as HTML after the chart (page-sized text at any width): a sample of
/// each line as drawn, and its label.
fn legend(out: &mut String, series: &[Series]) {
    if series.is_empty() {
        return;
    }
    out.push_str("<ul class=\"legend\">");
    for (n, s) in series.iter().enumerate() {
        let dash = if s.dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<li><svg width=\"28\" height=\"10\" aria-hidden=\"true\"><line x1=\"0\" y1=\"5\" \
             x2=\"28\" y2=\"5\" stroke=\"{}\" stroke-width=\"{}\"{dash}/></svg>{}</li>",
            COLOURS[n % COLOURS.len()],
            stroke_width(n).max(2.0),
            escape_html(&s.label)
        );
    }
    out.push_str("</ul>");
}

/// The most characters of a bar's label drawn left of it: what its margin holds on a 390-px
/// screen, where labels are drawn larger than the view box. A longer label (an object's name beside its id) is cut with "…"; the bar's tooltip
/// keeps it whole.
const BAR_LABEL_CHARS: usize = 10;

fn bar_label(label: &str) -> String {
    if label.chars().count() <= BAR_LABEL_CHARS {
        return label.to_owned();
    }
    let kept: String = label.chars().take(BAR_LABEL_CHARS - 1).collect();
    format!("{}…", kept.trim_end())
}

/// A horizontal bar chart, one bar per `(label, value)`, longest bar to a round ceiling.
pub fn bar_chart(title: &str, bars: &[(String, f64)]) -> String {
    let mut out = String::new();
    open_svg(&mut out, title);
    let ceiling = nice_ceiling(bars.iter().map(|b| b.1).fold(0.0, f64::max));
    let plot_w = WIDTH - LEFT * 2.0 - RIGHT;
    let band = (HEIGHT - TOP - BOTTOM) / bars.len().max(1) as f64;
    for (i, (label, value)) in bars.iter().enumerate() {
        let top = TOP + band * i as f64;
        let width = plot_w * (value / ceiling).clamp(0.0, 1.0);
        let _ = write!(
            out,
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{:.1}\" \
             fill=\"{}\"><title>{}: {}</title></rect>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LEFT * 2.0 - 6.0,
            top + band / 2.0 + 4.0,
            escape_html(&bar_label(label)),
            LEFT * 2.0,
            top + band * 0.15,
            band * 0.7,
            COLOURS[0],
            escape_html(label),
            trim(*value),
            LEFT * 2.0 + width + 4.0,
            top + band / 2.0 + 4.0,
            format_tick(*value, ""),
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_bar_label_is_cut_and_kept_whole_in_the_tooltip() {
        let svg = bar_chart(
            "Impressions by line item",
            &[
                ("Subscribe to the Daily Planet (#6)".into(), 3.0),
                ("Short (#7)".into(), 1.0),
            ],
        );
        assert!(svg.contains(">Subscribe…</text>"), "{svg}");
        assert!(
            svg.contains("<title>Subscribe to the Daily Planet (#6): 3</title>"),
            "{svg}"
        );
        assert!(svg.contains(">Short (#7)</text>"), "{svg}");
    }

    #[test]
    fn ceilings_are_round() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(f64::NAN), 1.0);
        assert_eq!(nice_ceiling(1.0), 1.0);
        assert_eq!(nice_ceiling(1.2), 2.0);
        assert_eq!(nice_ceiling(3.0), 5.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(420.0), 500.0);
    }

    #[test]
    fn a_line_runs_from_the_left_bottom_to_the_right_top() {
        let labels: Vec<String> = ["00:00", "01:00", "02:00"].map(String::from).to_vec();
        let svg = line_chart(
            "Impressions",
            &labels,
            &[Series {
                label: "impressions".into(),
                values: vec![0.0, 5.0, 10.0],
                dashed: false,
            }],
            "",
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.ends_with("</svg><ul class=\"legend\"><li><svg width=\"28\" height=\"10\" aria-hidden=\"true\"><line x1=\"0\" y1=\"5\" x2=\"28\" y2=\"5\" stroke=\"#1f6feb\" stroke-width=\"4\"/></svg>impressions</li></ul>"), "{svg}");
        // Ceiling 10: 0 at the plot's bottom (240 - 28), 10 at its top (12).
        assert!(svg.contains("points=\"56.0,212.0 342.0,112.0 628.0,12.0\""));
        assert!(svg.contains(">10</text>"));
        assert!(svg.contains(">02:00</text>"));
    }

    #[test]
    fn dashed_series_and_single_points_are_drawn() {
        let svg = line_chart(
            "Pacing",
            &["now".to_owned()],
            &[Series {
                label: "goal".into(),
                values: vec![3.0],
                dashed: true,
            }],
            "$",
        );
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains(">$5</text>"), "{svg}");
        assert!(svg.contains("<circle"));
    }

    #[test]
    fn a_line_over_another_leaves_both_visible_and_both_in_the_legend() {
        let same = vec![1.0, 2.0];
        let svg = line_chart(
            "Pacing",
            &["a".to_owned(), "b".to_owned()],
            &[
                Series {
                    label: "goal curve".into(),
                    values: same.clone(),
                    dashed: true,
                },
                Series {
                    label: "delivered".into(),
                    values: same,
                    dashed: false,
                },
            ],
            "",
        );
        // Drawn in order, each narrower than the one under it.
        let first = svg.find("stroke-width=\"4\" stroke-dasharray").unwrap();
        let second = svg.find("stroke-width=\"2\" points").unwrap();
        assert!(first < second, "{svg}");
        assert!(svg.contains("</svg><ul class=\"legend\">"));
        assert!(svg.contains("</svg>goal curve</li>") && svg.contains("</svg>delivered</li>"));
    }

    #[test]
    fn bars_scale_to_the_longest_and_labels_are_escaped() {
        let svg = bar_chart(
            "By line item",
            &[("<b>A&B</b>".to_owned(), 50.0), ("C".to_owned(), 100.0)],
        );
        assert!(svg.contains("&lt;b&gt;A&amp;B&lt;/b&gt;"));
        assert!(!svg.contains("<b>"));
        // Plot width 640 - 112 - 12 = 516: half and full.
        assert!(svg.contains("width=\"258.0\""));
        assert!(svg.contains("width=\"516.0\""));
    }

    #[test]
    fn an_empty_chart_is_still_an_svg() {
        assert!(line_chart("t", &[], &[], "").ends_with("</svg>"));
        assert!(bar_chart("t", &[]).contains("</svg>"));
    }
}
