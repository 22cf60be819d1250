//! Prebid.js header bidding meets direct line items: the price granularities whose buckets
//! Prebid.js writes into the `hb_pb` key-value, and the markup of the creative that renders
//! Prebid's winning bid (following the Prebid Universal Creative's contract). The API's line
//! item set generator builds on these; nothing here does I/O.

use crate::Micros;

/// The key-value Prebid.js sets to the winning bid's price bucket, such as `2.50`.
pub const PRICE_KEY: &str = "hb_pb";

/// Most buckets one set may have ("high" has 2,000).
pub const MAX_BUCKETS: usize = 5_000;

/// Most decimals a bucket may be written with (micros hold six; Prebid's default is two).
pub const MAX_PRECISION: u32 = 4;

/// One range of buckets: from the previous range's `max` (0 for the first) up to `max`, one
/// bucket every `increment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketRange {
    pub max: Micros,
    pub increment: Micros,
}

/// A price granularity as Prebid.js defines it: the standard ones by name, or custom ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granularity {
    /// 0.50 steps to 5.
    Low,
    /// 0.10 steps to 20 (Prebid's default).
    Medium,
    /// 0.01 steps to 20.
    High,
    /// 0.05 steps to 5, 0.10 to 10, 0.50 to 20.
    Auto,
    /// 0.01 steps to 3, 0.05 to 8, 0.50 to 20.
    Dense,
    /// Ranges as in Prebid's `customPriceBucket`, written with `precision` decimals.
    Custom {
        ranges: Vec<BucketRange>,
        precision: u32,
    },
}

/// The names of the standard granularities.
pub const GRANULARITY_NAMES: [&str; 5] = ["low", "medium", "high", "auto", "dense"];

/// Prebid's default number of decimals in `hb_pb`.
const STANDARD_PRECISION: u32 = 2;

const fn cents(n: i64) -> Micros {
    Micros(n * 10_000)
}

impl Granularity {
    /// A standard granularity by its Prebid name.
    pub fn named(name: &str) -> Option<Granularity> {
        Some(match name {
            "low" => Granularity::Low,
            "medium" => Granularity::Medium,
            "high" => Granularity::High,
            "auto" => Granularity::Auto,
            "dense" => Granularity::Dense,
            _ => return None,
        })
    }

    /// Its name, `custom` for custom ranges.
    pub fn name(&self) -> &'static str {
        match self {
            Granularity::Low => "low",
            Granularity::Medium => "medium",
            Granularity::High => "high",
            Granularity::Auto => "auto",
            Granularity::Dense => "dense",
            Granularity::Custom { .. } => "custom",
        }
    }

    pub fn ranges(&self) -> Vec<BucketRange> {
        let range = |max: i64, increment: i64| BucketRange {
            max: cents(max),
            increment: cents(increment),
        };
        match self {
            Granularity::Low => vec![range(500, 50)],
            Granularity::Medium => vec![range(2_000, 10)],
            Granularity::High => vec![range(2_000, 1)],
            Granularity::Auto => vec![range(500, 5), range(1_000, 10), range(2_000, 50)],
            Granularity::Dense => vec![range(300, 1), range(800, 5), range(2_000, 50)],
            Granularity::Custom { ranges, .. } => ranges.clone(),
        }
    }

    pub fn precision(&self) -> u32 {
        match self {
            Granularity::Custom { precision, .. } => *precision,
            _ => STANDARD_PRECISION,
        }
    }

    /// Every price bucket above zero, ascending: what Prebid.js may write into `hb_pb` for a
    /// bid (bids under the first bucket get `0.00`, which no line item is worth booking; bids
    /// over the top are capped at it). Ranges must have passed [`Granularity::check`].
    pub fn buckets(&self) -> Vec<Micros> {
        let mut out: Vec<Micros> = Vec::new();
        let mut min = Micros::ZERO;
        for range in self.ranges() {
            if range.increment.0 <= 0 || range.max <= min {
                break;
            }
            let mut value = min;
            while value <= range.max {
                if value > Micros::ZERO && out.last().is_none_or(|last| *last < value) {
                    out.push(value);
                }
                value = Micros(value.0 + range.increment.0);
            }
            // A range whose increments do not land on its max still caps there.
            if out.last().is_none_or(|last| *last < range.max) {
                out.push(range.max);
            }
            min = range.max;
        }
        out
    }

    /// What is wrong with custom ranges, in plain words (none for the standard ones): ranges
    /// ascending, increments above zero, every bucket writable with the precision, at most
    /// [`MAX_BUCKETS`] buckets.
    pub fn check(&self) -> Vec<String> {
        let Granularity::Custom { ranges, precision } = self else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        if *precision > MAX_PRECISION {
            problems.push(format!("precision must be 0 to {MAX_PRECISION}"));
            return problems;
        }
        if ranges.is_empty() {
            problems.push("must have at least one range".to_owned());
            return problems;
        }
        let step = 10_i64.pow(6 - precision);
        let mut min = Micros::ZERO;
        let mut count: i64 = 0;
        for (i, range) in ranges.iter().enumerate() {
            if range.increment <= Micros::ZERO {
                problems.push(format!("ranges[{i}].increment must be above 0"));
            } else if range.increment.0 % step != 0 {
                problems.push(format!(
                    "ranges[{i}].increment {} has more decimals than the precision ({precision})",
                    range.increment
                ));
            }
            if range.max <= min {
                problems.push(format!(
                    "ranges[{i}].max {} must be above the range before's max ({min})",
                    range.max
                ));
            } else if range.max.0 % step != 0 {
                problems.push(format!(
                    "ranges[{i}].max {} has more decimals than the precision ({precision})",
                    range.max
                ));
            } else if range.increment > Micros::ZERO {
                count = count.saturating_add((range.max.0 - min.0) / range.increment.0 + 1);
            }
            min = min.max(range.max);
        }
        if problems.is_empty() && count > MAX_BUCKETS as i64 {
            problems.push(format!(
                "makes more than {MAX_BUCKETS} buckets; use larger increments"
            ));
        }
        problems
    }
}

/// An amount above zero written as decimal text with at most six decimals (`0.05`, `20`),
/// read exactly; `None` for anything else.
pub fn parse_amount(text: &str) -> Option<Micros> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || whole.len() > 9
        || fraction.len() > 6
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    let fraction: i64 = format!("{fraction:0<6}").parse().ok()?;
    Some(Micros(whole * Micros::PER_UNIT + fraction)).filter(|m| m.0 > 0)
}

/// A bucket as Prebid.js writes it into `hb_pb`: the amount with exactly `precision` decimals
/// (`2.50`). Decimals past the precision are cut, as [`Granularity::check`] refuses buckets
/// that have any.
pub fn bucket_text(value: Micros, precision: u32) -> String {
    let whole = value.0 / Micros::PER_UNIT;
    let fraction = format!("{:06}", value.0 % Micros::PER_UNIT);
    let precision = precision.min(6) as usize;
    if precision == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{}", &fraction[..precision])
    }
}

/// The markup of a Prebid creative. It follows the Prebid Universal Creative's contract with
/// Prebid.js in the page: a `Prebid Request` for the ad id the ad request carried as `hb_adid`
/// (`{{KV:hb_adid}}`), posted to the page with a `MessageChannel` port, answered on it by a
/// `Prebid Response` with the bid's markup (or URL), and a `Prebid Event` saying whether it
/// rendered. It renders the bid in its own document, not in a nested frame as the Universal
/// Creative's script does: the ad's iframe is sandboxed without `allow-same-origin`, so every
/// frame inside it has an opaque origin of its own that the creative could not write into. It
/// replaces its document only once the document has loaded, so that the impression beacon has
/// been fetched. The page's origin, the message's target, is the iframe's parent: from
/// `location.ancestorOrigins` where the browser has it, else from the referrer. It holds no
/// `{{` but the key-value macro and no URL, so it passes the markup rules and is secure.
pub fn creative_html() -> &'static str {
    CREATIVE_HTML
}

const CREATIVE_HTML: &str = r#"<div id="prebid"></div>
<script>
(function () {
  var adId = "{{KV:hb_adid}}";
  var ancestors = window.location.ancestorOrigins;
  var page = ancestors && ancestors.length ? ancestors[0]
    : (document.referrer.match(/^https?:[/][/][^/]+/) || [])[0];
  if (!adId || !page) return;
  function tell(event, info) {
    var message = { message: 'Prebid Event', adId: adId, event: event };
    if (info) message.info = info;
    window.parent.postMessage(JSON.stringify(message), page);
  }
  var channel = new MessageChannel();
  channel.port1.onmessage = function (ev) {
    var bid;
    try { bid = JSON.parse(ev.data); } catch (e) { return; }
    if (!bid || bid.message !== 'Prebid Response' || bid.adId !== adId) return;
    channel.port1.onmessage = null;
    var markup = bid.ad;
    if (!markup && bid.adUrl) {
      markup = '<iframe src="' + String(bid.adUrl).replace(/"/g, '&quot;') + '" width="' +
        (bid.width | 0) + '" height="' + (bid.height | 0) + '" frameborder="0" scrolling="no"></iframe>';
    }
    if (!markup) return tell('adRenderFailed', { reason: 'noAd', message: 'No ad for ' + adId });
    function render() {
      tell('adRenderSucceeded');
      document.open();
      document.write('<!doctype html><html><head><meta charset="utf-8"><style>html,body{margin:0;padding:0;overflow:hidden}</style></head><body>' + markup + '</body></html>');
      document.close();
    }
    if (document.readyState === 'complete') render();
    else window.addEventListener('load', render);
  };
  window.parent.postMessage(JSON.stringify({ message: 'Prebid Request', adId: adId, adServerDomain: '' }),
    page, [channel.port2]);
})();
</script>"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(granularity: &Granularity) -> Vec<String> {
        let precision = granularity.precision();
        granularity
            .buckets()
            .into_iter()
            .map(|b| bucket_text(b, precision))
            .collect()
    }

    #[test]
    fn standard_granularities_have_prebids_buckets() {
        let low = texts(&Granularity::Low);
        assert_eq!(low.len(), 10);
        assert_eq!(low.first().map(String::as_str), Some("0.50"));
        assert_eq!(low.last().map(String::as_str), Some("5.00"));
        assert_eq!(Granularity::Medium.buckets().len(), 200);
        assert_eq!(Granularity::High.buckets().len(), 2_000);
        // auto: 100 to 5.00, 50 more to 10.00, 20 more to 20.00.
        let auto = texts(&Granularity::Auto);
        assert_eq!(auto.len(), 170);
        assert!(auto.contains(&"4.95".to_owned()) && auto.contains(&"5.10".to_owned()));
        assert!(!auto.contains(&"5.05".to_owned()));
        assert_eq!(auto.last().map(String::as_str), Some("20.00"));
        let dense = texts(&Granularity::Dense);
        assert_eq!(dense.len(), 300 + 100 + 24);
        assert!(dense.contains(&"2.99".to_owned()) && dense.contains(&"8.50".to_owned()));
        for name in GRANULARITY_NAMES {
            let granularity = Granularity::named(name).expect(name);
            assert_eq!(granularity.name(), name);
            assert!(granularity.check().is_empty());
            let buckets = granularity.buckets();
            assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{name} ascends");
        }
    }

    #[test]
    fn custom_ranges_are_checked_and_capped_at_their_max() {
        let custom = Granularity::Custom {
            ranges: vec![
                BucketRange {
                    max: Micros(1_000_000),
                    increment: Micros(250_000),
                },
                BucketRange {
                    max: Micros(2_200_000),
                    increment: Micros(500_000),
                },
            ],
            precision: 2,
        };
        assert!(custom.check().is_empty());
        assert_eq!(
            texts(&custom),
            ["0.25", "0.50", "0.75", "1.00", "1.50", "2.00", "2.20"]
        );
        let bad = Granularity::Custom {
            ranges: vec![
                BucketRange {
                    max: Micros(1_000_000),
                    increment: Micros(5_000),
                },
                BucketRange {
                    max: Micros(500_000),
                    increment: Micros::ZERO,
                },
            ],
            precision: 2,
        };
        let problems = bad.check();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("ranges[0].increment"), "{problems:?}");
        let many = Granularity::Custom {
            ranges: vec![BucketRange {
                max: Micros(100_000_000),
                increment: Micros(10_000),
            }],
            precision: 2,
        };
        assert!(many.check()[0].contains("more than 5000"));
    }

    #[test]
    fn amounts_read_exactly() {
        assert_eq!(parse_amount("0.05"), Some(Micros(50_000)));
        assert_eq!(parse_amount("20"), Some(Micros(20_000_000)));
        for bad in ["", ".5", "0", "-1", "1e3", "0.0000001", "1,5"] {
            assert_eq!(parse_amount(bad), None, "{bad}");
        }
    }

    #[test]
    fn bucket_text_has_the_precision() {
        assert_eq!(bucket_text(Micros(2_500_000), 2), "2.50");
        assert_eq!(bucket_text(Micros(20_000_000), 0), "20");
        assert_eq!(bucket_text(Micros(1_234_500), 4), "1.2345");
    }

    #[test]
    fn the_creative_asks_prebid_for_the_ad_id_key_value() {
        let html = creative_html();
        assert!(html.contains("var adId = \"{{KV:hb_adid}}\";"));
        assert!(html.contains("'Prebid Request'") && html.contains("'Prebid Response'"));
        // No other macro-like text, and nothing it loads.
        assert_eq!(html.matches("{{").count(), 1);
        assert!(!html.contains("http:") && !html.contains("src=\"http"));
    }
}
