//! A registry as text: OpenMetrics, which prometheus-client writes, or the Prometheus text
//! format (0.0.4) derived from it line by line, for scrapers that do not ask for OpenMetrics
//! and for pages that append other 0.0.4 text to it.

use prometheus_client::registry::Registry;

/// The content type of [`Format::OpenMetrics`].
pub const CONTENT_TYPE_OPENMETRICS: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Format::Text`].
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text, `# EOF` included.
    OpenMetrics,
    /// The Prometheus text format 0.0.4: no `# UNIT` lines nor `# EOF`, and a counter's
    /// `# HELP` and `# TYPE` name its samples (`…_total`).
    Text,
}

impl Format {
    /// OpenMetrics when the `Accept` header lists it (as Prometheus's does), else the text
    /// format every scraper reads.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Text,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => CONTENT_TYPE_OPENMETRICS,
            Format::Text => CONTENT_TYPE_TEXT,
        }
    }
}

/// The registry's families and samples in `format`.
pub fn encode(registry: &Registry, format: Format) -> String {
    let mut open = String::with_capacity(4 * 1024);
    // Writing to a String cannot fail, and our metrics' encoders fail only on a gauge
    // of u64 past i64::MAX; the text written until then is served.
    let _ = prometheus_client::encoding::text::encode(&mut open, registry);
    match format {
        Format::OpenMetrics => open,
        Format::Text => to_text(&open),
    }
}

/// OpenMetrics text as the 0.0.4 format. prometheus-client writes each family as `# HELP`,
/// `# TYPE`, an optional `# UNIT`, then its samples.
fn to_text(open: &str) -> String {
    let mut out = String::with_capacity(open.len());
    let mut help: Option<(&str, &str)> = None;
    for line in open.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let total = if kind == "counter" { "_total" } else { "" };
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name}{total} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name}{total} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_asks_for_openmetrics_and_others_get_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(None), Format::Text);
    }
}
