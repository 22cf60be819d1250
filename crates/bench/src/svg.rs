//! Hand-made SVG line charts: panels stacked vertically, each with axes, "nice" ticks, a legend
//! and one polyline per series. Small, dependency-free and testable as text.

use std::fmt::Write as _;

use crate::report::{Report, SweepStep};

const WIDTH: f64 = 860.0;
const PANEL_HEIGHT: f64 = 320.0;
const MARGIN_LEFT: f64 = 80.0;
const MARGIN_RIGHT: f64 = 150.0;
const MARGIN_TOP: f64 = 40.0;
const MARGIN_BOTTOM: f64 = 50.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#7f7f7f",
];

/// One line.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed: reference lines such as "offered = answered".
    pub dashed: bool,
}

impl Series {
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.to_owned(),
            points,
            dashed: false,
        }
    }
}

/// One chart.
#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// Latency percentiles and throughput over the time of one run.
pub fn run_chart(report: &Report) -> String {
    let over_time = |pick: fn(&crate::report::Tick) -> f64| {
        report
            .timeline
            .iter()
            .map(|tick| (tick.t_s, pick(tick)))
            .collect::<Vec<_>>()
    };
    let latency = Panel {
        title: format!("Latency percentiles over time: {}", report.url),
        x_label: "time (s)".into(),
        y_label: "latency (ms)".into(),
        series: vec![
            Series::new("p50", over_time(|t| t.latency.p50_ms)),
            Series::new("p90", over_time(|t| t.latency.p90_ms)),
            Series::new("p99", over_time(|t| t.latency.p99_ms)),
            Series::new("p99.9", over_time(|t| t.latency.p999_ms)),
            Series::new("max", over_time(|t| t.latency.max_ms)),
        ],
    };
    let throughput = Panel {
        title: "Answers per second".into(),
        x_label: "time (s)".into(),
        y_label: "req/s".into(),
        series: vec![Series::new("answered", over_time(|t| t.rate))],
    };
    let mut panels = vec![latency, throughput];
    if report.session.is_some() {
        panels.push(session_panel(report));
    }
    render(&panels)
}

/// User sessions: answers per second by request kind over time.
fn session_panel(report: &Report) -> Panel {
    let per_second = |pick: fn(&crate::report::KindCounts) -> u64| {
        let mut last = 0.0;
        report
            .timeline
            .iter()
            .filter_map(|tick| {
                let seconds = tick.t_s - last;
                last = tick.t_s;
                let counts = tick.session.as_ref()?;
                (seconds > 0.0).then(|| (tick.t_s, pick(counts) as f64 / seconds))
            })
            .collect::<Vec<_>>()
    };
    let mut series = vec![
        Series::new("ad requests", per_second(|c| c.ad_requests)),
        Series::new("beacons", per_second(|c| c.impressions)),
        Series::new("clicks", per_second(|c| c.clicks)),
    ];
    if report
        .session
        .as_ref()
        .is_some_and(|session| session.total.page_views > 0)
    {
        series.push(Series::new("page views", per_second(|c| c.page_views)));
    }
    Panel {
        title: "User sessions: answers per second by kind".into(),
        x_label: "time (s)".into(),
        y_label: "answers/s".into(),
        series,
    }
}

/// Throughput and latency against the offered rate of a sweep.
pub fn sweep_chart(steps: &[SweepStep]) -> String {
    let points = |pick: fn(&SweepStep) -> f64| {
        steps
            .iter()
            .map(|step| (step.offered_rate, pick(step)))
            .collect::<Vec<_>>()
    };
    let mut offered = Series::new("offered", points(|s| s.offered_rate));
    offered.dashed = true;
    let throughput = Panel {
        title: "Throughput vs offered rate".into(),
        x_label: "offered (req/s)".into(),
        y_label: "answered (req/s)".into(),
        series: vec![
            Series::new("answered", points(|s| s.report.throughput)),
            Series::new("2xx goodput", points(|s| s.report.goodput)),
            offered,
        ],
    };
    let latency = Panel {
        title: "Latency vs offered rate (from intended send time)".into(),
        x_label: "offered (req/s)".into(),
        y_label: "latency (ms)".into(),
        series: vec![
            Series::new("p50", points(|s| s.report.latency.p50_ms)),
            Series::new("p99", points(|s| s.report.latency.p99_ms)),
        ],
    };
    render(&[throughput, latency])
}

/// Renders panels one above the other into a standalone SVG document.
pub fn render(panels: &[Panel]) -> String {
    let height = PANEL_HEIGHT * panels.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    for (i, panel) in panels.iter().enumerate() {
        render_panel(&mut out, panel, i as f64 * PANEL_HEIGHT);
    }
    out.push_str("</svg>\n");
    out
}

fn render_panel(out: &mut String, panel: &Panel, top: f64) {
    let left = MARGIN_LEFT;
    let right = WIDTH - MARGIN_RIGHT;
    let plot_top = top + MARGIN_TOP;
    let bottom = top + PANEL_HEIGHT - MARGIN_BOTTOM;
    let points = || panel.series.iter().flat_map(|s| s.points.iter());
    let finite = |v: &f64| v.is_finite();
    let x_max = points().map(|p| p.0).filter(finite).fold(0.0, f64::max);
    // Start the axis at zero unless the data sit far from it.
    let x_min = points().map(|p| p.0).filter(finite).fold(x_max, f64::min);
    let x_min = if x_min < x_max * 0.5 {
        0.0_f64.min(x_min)
    } else {
        x_min
    };
    let y_max = points().map(|p| p.1).filter(finite).fold(0.0, f64::max);
    let x_ticks = ticks(x_min, x_max);
    let y_ticks = ticks(0.0, y_max);
    let (x_lo, x_hi) = (x_ticks[0], x_ticks[x_ticks.len() - 1]);
    let y_hi = y_ticks[y_ticks.len() - 1];
    let sx = |x: f64| left + (x - x_lo) / (x_hi - x_lo) * (right - left);
    let sy = |y: f64| bottom - y / y_hi * (bottom - plot_top);

    let _ = writeln!(
        out,
        r#"<text x="{left}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        top + 24.0,
        escape(&panel.title)
    );
    for &x in &x_ticks {
        let px = sx(x);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{plot_top:.1}" x2="{px:.1}" y2="{bottom:.1}" stroke="#e5e5e5"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            bottom + 16.0,
            label(x)
        );
    }
    for &y in &y_ticks {
        let py = sy(y);
        let _ = writeln!(
            out,
            r##"<line x1="{left:.1}" y1="{py:.1}" x2="{right:.1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 6.0,
            py + 4.0,
            label(y)
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{left:.1}" y="{plot_top:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/>"##,
        right - left,
        bottom - plot_top
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (left + right) / 2.0,
        bottom + 36.0,
        escape(&panel.x_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        left - 58.0,
        (plot_top + bottom) / 2.0,
        left - 58.0,
        (plot_top + bottom) / 2.0,
        escape(&panel.y_label)
    );
    for (i, series) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dash = if series.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let pixels: Vec<(f64, f64)> = series
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| (sx(x), sy(y)))
            .collect();
        if let [(cx, cy)] = pixels[..] {
            let _ = writeln!(
                out,
                r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="3" fill="{color}"/>"#
            );
        } else if !pixels.is_empty() {
            let points: Vec<String> = pixels
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                points.join(" ")
            );
        }
        let ly = plot_top + 14.0 + i as f64 * 18.0;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            right + 12.0,
            right + 36.0,
            right + 42.0,
            ly + 4.0,
            escape(&series.name)
        );
    }
}

/// Tick values from `lo` to at least `hi`, 1-2-5 spaced, about five of them.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    let raw = span / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (lo / step).floor() * step;
    let mut out = vec![first];
    let mut value = first;
    while value < hi - step * 1e-9 || out.len() < 2 {
        value += step;
        out.push(value);
    }
    out
}

fn label(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else if value.abs() >= 1000.0 {
        format!("{}k", trim(value / 1000.0))
    } else {
        trim(value)
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_range_with_round_steps() {
        assert_eq!(ticks(0.0, 9.3), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 0.0), vec![0.0, 0.2]);
        let wide = ticks(0.0, 131_000.0);
        assert_eq!(wide[1] - wide[0], 50_000.0);
        assert!(*wide.last().unwrap() >= 131_000.0);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
        assert_eq!(label(20_000.0), "20k");
        assert_eq!(label(2_500.0), "2.5k");
        assert_eq!(label(0.25), "0.25");
    }
}
