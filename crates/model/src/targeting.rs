//! Targeting: a typed boolean expression over request attributes. Every leaf is "attribute is one
//! of these values"; `not` gives "none of these", `all` / `any` combine. It is stored as JSON,
//! validated on write and only ever interpreted by the decision engine, never run as code.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validate::{Violations, rules};
use crate::{Format, PlacementId, SiteId, Size};

/// Deepest nesting of `all` / `any` / `not` accepted.
pub const MAX_DEPTH: usize = 8;
/// Most leaf values in one expression, all leaves together.
pub const MAX_VALUES: usize = 10_000;

/// A targeting expression. Snapshots encode a variant by its position, so new attributes are
/// appended at the end: a snapshot written before them decodes unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Targeting {
    /// Every sub-expression matches.
    All(Vec<Targeting>),
    /// At least one sub-expression matches.
    Any(Vec<Targeting>),
    /// The sub-expression does not match.
    Not(Box<Targeting>),
    /// The request is for one of these placements.
    Placement(Vec<PlacementId>),
    /// The request is for a placement of one of these sites.
    Site(Vec<SiteId>),
    /// The page's host is one of these domains or a subdomain of one.
    Domain(Vec<String>),
    /// The page URL starts with one of these prefixes.
    PageUrl(Vec<String>),
    /// ISO 3166-1 alpha-2 country codes, e.g. `DE`.
    Country(Vec<String>),
    /// ISO 3166-2 region codes, e.g. `DE-BY`.
    Region(Vec<String>),
    /// City names as the geo database spells them.
    City(Vec<String>),
    /// The device's location lies within this circle.
    GeoRadius(GeoCircle),
    DeviceType(Vec<DeviceType>),
    /// Operating system family, e.g. `iOS`, `Android`, `Windows`.
    Os(Vec<String>),
    /// Browser family, e.g. `Chrome`, `Firefox`, `Safari`.
    Browser(Vec<String>),
    /// ISO 639-1 language codes, e.g. `de`.
    Language(Vec<String>),
    /// Day of the week in the line item's time zone.
    DayOfWeek(Vec<Weekday>),
    /// Hour of the day in the line item's time zone, as half-open ranges.
    Hour(Vec<HourRange>),
    /// A key-value from the ad tag has one of these values.
    KeyValue(KeyValues),
    /// The user is in one of these segments.
    Segment(Vec<String>),
    /// The device's IP address is in one of these networks (CIDR).
    Ip(#[schemars(with = "Vec<String>")] Vec<ipnet::IpNet>),
    /// The ad slot accepts one of these sizes.
    Size(Vec<Size>),
    /// The ad slot accepts one of these formats.
    Format(Vec<Format>),
    /// Nielsen DMA (designated market area) codes, the United States' metro areas: three
    /// digits from 500 to 881, e.g. `807` (San Francisco-Oakland-San Jose).
    Metro(Vec<u16>),
    /// Postal codes as the geo database spells them, e.g. `10115`, `SW1A 1AA`.
    Postal(Vec<String>),
    /// Autonomous system numbers of the network the request comes from, e.g. `3320`.
    Asn(Vec<u32>),
    /// The kind of network the request comes from.
    ConnectionType(Vec<ConnectionType>),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeoCircle {
    /// Degrees, -90 to 90.
    pub lat: f64,
    /// Degrees, -180 to 180.
    pub lon: f64,
    /// Greater than 0, at most 20,000.
    pub radius_km: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeviceType {
    Desktop,
    Phone,
    Tablet,
    Ctv,
    Other,
    /// A games console (PlayStation, Xbox, Nintendo). Last, so that the codes and encodings of
    /// the variants before it stay as they were.
    Console,
}

/// The kind of network a request comes from, as geo databases classify an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionType {
    /// A fixed broadband line (cable, DSL, fibre).
    CableDsl,
    /// A mobile network.
    Cellular,
    /// A company's own network.
    Corporate,
    Satellite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl Weekday {
    /// The days in order, Monday first (as a week's hours are numbered).
    pub const ALL: [Weekday; 7] = [
        Weekday::Mon,
        Weekday::Tue,
        Weekday::Wed,
        Weekday::Thu,
        Weekday::Fri,
        Weekday::Sat,
        Weekday::Sun,
    ];
}

/// Hours `from` (inclusive, 0–23) to `to` (exclusive, 1–24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HourRange {
    pub from: u8,
    pub to: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyValues {
    /// Lower-case letters, digits and `_`, at most 64 characters.
    pub key: String,
    pub values: Vec<String>,
}

const MAX_VALUE_CHARS: usize = 256;
/// Longest postal code accepted, in characters.
const MAX_POSTAL_CHARS: usize = 16;
/// Nielsen DMA codes lie in this range.
const METRO_CODES: std::ops::RangeInclusive<u16> = 500..=881;

impl Targeting {
    pub fn validate(&self, v: &mut Violations) {
        self.validate_at(v, 1, &mut 0);
    }

    fn validate_at(&self, v: &mut Violations, depth: usize, values: &mut usize) {
        if depth > MAX_DEPTH {
            v.fail(format!("nests deeper than {MAX_DEPTH} levels"));
            return;
        }
        match self {
            Targeting::All(children) => v.field("all", |v| {
                Self::validate_children(v, children, depth, values)
            }),
            Targeting::Any(children) => v.field("any", |v| {
                Self::validate_children(v, children, depth, values)
            }),
            Targeting::Not(child) => v.field("not", |v| child.validate_at(v, depth + 1, values)),
            Targeting::Placement(ids) => v.field("placement", |v| {
                leaf(v, ids, values, |v, id| v.check(id.0 > 0, "ids start at 1"))
            }),
            Targeting::Site(ids) => v.field("site", |v| {
                leaf(v, ids, values, |v, id| v.check(id.0 > 0, "ids start at 1"))
            }),
            Targeting::Domain(domains) => v.field("domain", |v| {
                leaf(v, domains, values, |v, d| rules::domain(v, d))
            }),
            Targeting::PageUrl(prefixes) => v.field("page_url", |v| {
                leaf(v, prefixes, values, |v, p| rules::http_url(v, p))
            }),
            Targeting::Country(codes) => v.field("country", |v| {
                leaf(v, codes, values, |v, c| {
                    v.check(
                        is_upper_code(c, 2),
                        format!("{c:?} is not an ISO 3166-1 alpha-2 code such as DE"),
                    )
                })
            }),
            Targeting::Region(codes) => v.field("region", |v| {
                leaf(v, codes, values, |v, c| {
                    v.check(
                        is_region_code(c),
                        format!("{c:?} is not an ISO 3166-2 code such as DE-BY"),
                    )
                })
            }),
            Targeting::City(names) => v.field("city", |v| leaf(v, names, values, plain_text)),
            Targeting::GeoRadius(circle) => v.field("geo_radius", |v| circle.validate(v)),
            Targeting::DeviceType(types) => {
                v.field("device_type", |v| leaf(v, types, values, |_, _| ()))
            }
            Targeting::Os(names) => v.field("os", |v| leaf(v, names, values, plain_text)),
            Targeting::Browser(names) => v.field("browser", |v| leaf(v, names, values, plain_text)),
            Targeting::Language(codes) => v.field("language", |v| {
                leaf(v, codes, values, |v, c| {
                    v.check(
                        c.len() == 2 && c.bytes().all(|b| b.is_ascii_lowercase()),
                        format!("{c:?} is not an ISO 639-1 code such as de"),
                    )
                })
            }),
            Targeting::DayOfWeek(days) => {
                v.field("day_of_week", |v| leaf(v, days, values, |_, _| ()))
            }
            Targeting::Hour(ranges) => v.field("hour", |v| {
                leaf(v, ranges, values, |v, r| {
                    v.check(
                        r.from < 24 && r.to <= 24 && r.from < r.to,
                        format!(
                            "{}..{} is not a range with 0 <= from < to <= 24",
                            r.from, r.to
                        ),
                    )
                })
            }),
            Targeting::KeyValue(kv) => v.field("key_value", |v| {
                v.check_field(
                    "key",
                    crate::objects::is_key_value_key(&kv.key),
                    format!(
                        "{:?} must be 1 to 64 lower-case letters, digits or _",
                        kv.key
                    ),
                );
                v.field("values", |v| leaf(v, &kv.values, values, plain_text));
            }),
            Targeting::Segment(ids) => v.field("segment", |v| leaf(v, ids, values, plain_text)),
            Targeting::Ip(nets) => v.field("ip", |v| leaf(v, nets, values, |_, _| ())),
            Targeting::Size(sizes) => v.field("size", |v| leaf(v, sizes, values, Size::validate)),
            Targeting::Format(formats) => {
                v.field("format", |v| leaf(v, formats, values, |_, _| ()))
            }
            Targeting::Metro(codes) => v.field("metro", |v| {
                leaf(v, codes, values, |v, c| {
                    v.check(
                        METRO_CODES.contains(c),
                        format!(
                            "{c} is not a Nielsen DMA code ({} to {})",
                            METRO_CODES.start(),
                            METRO_CODES.end()
                        ),
                    )
                })
            }),
            Targeting::Postal(codes) => v.field("postal", |v| leaf(v, codes, values, postal_code)),
            Targeting::Asn(numbers) => v.field("asn", |v| {
                leaf(v, numbers, values, |v, n| {
                    v.check(*n > 0, "autonomous system numbers start at 1")
                })
            }),
            Targeting::ConnectionType(types) => {
                v.field("connection_type", |v| leaf(v, types, values, |_, _| ()))
            }
        }
    }

    /// The attribute a leaf targets, by its JSON key (`all`, `any` and `not` for the
    /// combinators).
    pub fn attribute(&self) -> &'static str {
        match self {
            Targeting::All(_) => "all",
            Targeting::Any(_) => "any",
            Targeting::Not(_) => "not",
            Targeting::Placement(_) => "placement",
            Targeting::Site(_) => "site",
            Targeting::Domain(_) => "domain",
            Targeting::PageUrl(_) => "page_url",
            Targeting::Country(_) => "country",
            Targeting::Region(_) => "region",
            Targeting::City(_) => "city",
            Targeting::GeoRadius(_) => "geo_radius",
            Targeting::DeviceType(_) => "device_type",
            Targeting::Os(_) => "os",
            Targeting::Browser(_) => "browser",
            Targeting::Language(_) => "language",
            Targeting::DayOfWeek(_) => "day_of_week",
            Targeting::Hour(_) => "hour",
            Targeting::KeyValue(_) => "key_value",
            Targeting::Segment(_) => "segment",
            Targeting::Ip(_) => "ip",
            Targeting::Size(_) => "size",
            Targeting::Format(_) => "format",
            Targeting::Metro(_) => "metro",
            Targeting::Postal(_) => "postal",
            Targeting::Asn(_) => "asn",
            Targeting::ConnectionType(_) => "connection_type",
        }
    }

    /// Whether this is a leaf over where the request comes from: a place (country, region,
    /// city, metro, postal code, circle) or a network (autonomous system, connection type),
    /// which an edge knows only from a geo source.
    pub fn is_geo(&self) -> bool {
        match self {
            Targeting::Country(_)
            | Targeting::Region(_)
            | Targeting::City(_)
            | Targeting::Metro(_)
            | Targeting::Postal(_)
            | Targeting::GeoRadius(_)
            | Targeting::Asn(_)
            | Targeting::ConnectionType(_) => true,
            Targeting::All(_)
            | Targeting::Any(_)
            | Targeting::Not(_)
            | Targeting::Placement(_)
            | Targeting::Site(_)
            | Targeting::Domain(_)
            | Targeting::PageUrl(_)
            | Targeting::DeviceType(_)
            | Targeting::Os(_)
            | Targeting::Browser(_)
            | Targeting::Language(_)
            | Targeting::DayOfWeek(_)
            | Targeting::Hour(_)
            | Targeting::KeyValue(_)
            | Targeting::Segment(_)
            | Targeting::Ip(_)
            | Targeting::Size(_)
            | Targeting::Format(_) => false,
        }
    }

    /// Whether any leaf, however nested (negated ones too), is a geo leaf ([`Self::is_geo`]).
    pub fn uses_geo(&self) -> bool {
        self.leaves().any(Targeting::is_geo)
    }

    /// Every leaf of the expression, however nested, in the order they are written.
    pub fn leaves(&self) -> Leaves<'_> {
        Leaves { stack: vec![self] }
    }

    fn validate_children(
        v: &mut Violations,
        children: &[Targeting],
        depth: usize,
        values: &mut usize,
    ) {
        if children.is_empty() {
            v.fail("must have at least one sub-expression");
        }
        for (i, child) in children.iter().enumerate() {
            v.index(i, |v| child.validate_at(v, depth + 1, values));
        }
    }
}

/// The leaves of an expression, depth first: see [`Targeting::leaves`].
#[derive(Debug, Clone)]
pub struct Leaves<'t> {
    /// Expressions still to visit, the next on top.
    stack: Vec<&'t Targeting>,
}

impl<'t> Iterator for Leaves<'t> {
    type Item = &'t Targeting;

    fn next(&mut self) -> Option<&'t Targeting> {
        while let Some(expr) = self.stack.pop() {
            match expr {
                Targeting::All(children) | Targeting::Any(children) => {
                    self.stack.extend(children.iter().rev());
                }
                Targeting::Not(child) => self.stack.push(child),
                leaf => return Some(leaf),
            }
        }
        None
    }
}

/// A leaf list: non-empty, no duplicates, each value checked. `values` counts the values of the
/// leaves before it; the leaf that takes it past [`MAX_VALUES`] is refused.
fn leaf<T: Eq + std::hash::Hash + std::fmt::Debug>(
    v: &mut Violations,
    items: &[T],
    values: &mut usize,
    check: impl Fn(&mut Violations, &T),
) {
    let before = *values;
    *values = before.saturating_add(items.len());
    if items.is_empty() {
        v.fail("must list at least one value");
    }
    if *values > MAX_VALUES {
        // Refused before any other check, so an over-long list costs no more than its reading;
        // the leaves after it are past the limit too, and not checked either.
        if before <= MAX_VALUES {
            v.fail(format!(
                "brings the expression to {} values in all; at most {MAX_VALUES} are allowed",
                *values
            ));
        }
        return;
    }
    rules::unique(v, items);
    for (i, item) in items.iter().enumerate() {
        v.index(i, |v| check(v, item));
    }
}

fn plain_text(v: &mut Violations, s: &impl AsRef<str>) {
    let s = s.as_ref();
    if s.trim().is_empty() {
        v.fail("must not be empty");
    } else if s.chars().count() > MAX_VALUE_CHARS {
        v.fail(format!("must be at most {MAX_VALUE_CHARS} characters"));
    } else if s.chars().any(char::is_control) {
        v.fail("must not contain control characters");
    }
}

fn postal_code(v: &mut Violations, code: &impl AsRef<str>) {
    let code = code.as_ref();
    if code.trim().is_empty() {
        v.fail("must not be empty");
    } else if code.chars().count() > MAX_POSTAL_CHARS {
        v.fail(format!("must be at most {MAX_POSTAL_CHARS} characters"));
    } else if code.chars().any(char::is_control) {
        v.fail("must not contain control characters");
    } else if code.trim() != code {
        v.fail("must not begin or end with white space");
    }
}

fn is_upper_code(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// Whether `s` is an ISO 3166-2 code as targeting and reports name regions: two capitals, `-`,
/// and one to three capitals or digits (`US-CA`, `GB-ENG`, `FR-75`).
pub fn is_region_code(s: &str) -> bool {
    match s.split_once('-') {
        Some((country, sub)) => {
            is_upper_code(country, 2)
                && (1..=3).contains(&sub.len())
                && sub
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        }
        None => false,
    }
}

impl GeoCircle {
    fn validate(&self, v: &mut Violations) {
        v.check_field(
            "lat",
            (-90.0..=90.0).contains(&self.lat),
            "must be between -90 and 90",
        );
        v.check_field(
            "lon",
            (-180.0..=180.0).contains(&self.lon),
            "must be between -180 and 180",
        );
        v.check_field(
            "radius_km",
            self.radius_km > 0.0 && self.radius_km <= 20_000.0,
            "must be greater than 0 and at most 20000",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn violations(expr: serde_json::Value) -> Vec<(String, String)> {
        let targeting: Targeting = serde_json::from_value(expr).expect("parses");
        let mut v = Violations::new();
        targeting.validate(&mut v);
        v.into_result()
            .err()
            .map(|e| {
                e.violations
                    .into_iter()
                    .map(|v| (v.path, v.message))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn first_path(expr: serde_json::Value) -> String {
        violations(expr)
            .into_iter()
            .next()
            .map(|(path, _)| path)
            .unwrap_or_else(|| "<valid>".into())
    }

    #[test]
    fn a_rich_expression_is_valid() {
        let expr = json!({"all": [
            {"country": ["DE", "AT"]},
            {"region": ["DE-BY"]},
            {"not": {"device_type": ["tablet"]}},
            {"any": [{"key_value": {"key": "section", "values": ["sport"]}}, {"segment": ["s1"]}]},
            {"hour": [{"from": 8, "to": 20}]},
            {"day_of_week": ["mon", "sat"]},
            {"geo_radius": {"lat": 52.5, "lon": 13.4, "radius_km": 50.0}},
            {"ip": ["10.0.0.0/8", "2001:db8::/32"]},
            {"size": [{"w": 300, "h": 250}]},
            {"format": ["banner"]},
            {"domain": ["news.example.com"]},
            {"page_url": ["https://news.example.com/sport/"]},
            {"placement": [1]}, {"site": [2]}, {"os": ["iOS"]}, {"browser": ["Chrome"]},
            {"language": ["de"]}, {"city": ["Berlin"]},
            {"metro": [500, 807, 881]}, {"postal": ["10115", "SW1A 1AA"]},
            {"asn": [3320, 4_200_000_000u32]},
            {"connection_type": ["cable_dsl", "cellular", "corporate", "satellite"]}
        ]});
        assert_eq!(violations(expr), vec![]);
    }

    #[test]
    fn each_rule_names_its_path() {
        let cases = [
            (json!({"all": []}), "all"),
            (json!({"country": []}), "country"),
            (json!({"country": ["de"]}), "country[0]"),
            (json!({"country": ["DE", "DE"]}), "country[1]"),
            (json!({"region": ["Bavaria"]}), "region[0]"),
            (json!({"language": ["deu"]}), "language[0]"),
            (json!({"hour": [{"from": 20, "to": 8}]}), "hour[0]"),
            (json!({"hour": [{"from": 0, "to": 25}]}), "hour[0]"),
            (
                json!({"geo_radius": {"lat": 91.0, "lon": 0.0, "radius_km": 1.0}}),
                "geo_radius.lat",
            ),
            (
                json!({"geo_radius": {"lat": 0.0, "lon": 181.0, "radius_km": 1.0}}),
                "geo_radius.lon",
            ),
            (
                json!({"geo_radius": {"lat": 0.0, "lon": 0.0, "radius_km": 0.0}}),
                "geo_radius.radius_km",
            ),
            (
                json!({"key_value": {"key": "Bad Key", "values": ["x"]}}),
                "key_value.key",
            ),
            (
                json!({"key_value": {"key": "k", "values": [""]}}),
                "key_value.values[0]",
            ),
            (json!({"domain": ["not a domain"]}), "domain[0]"),
            (json!({"page_url": ["ftp://example.com/"]}), "page_url[0]"),
            (json!({"placement": [0]}), "placement[0]"),
            (json!({"size": [{"w": 0, "h": 250}]}), "size[0].w"),
            (json!({"segment": ["a\u{0007}"]}), "segment[0]"),
            (json!({"metro": []}), "metro"),
            (json!({"metro": [807, 499]}), "metro[1]"),
            (json!({"metro": [882]}), "metro[0]"),
            (json!({"metro": [807, 807]}), "metro[1]"),
            (json!({"postal": [""]}), "postal[0]"),
            (json!({"postal": ["  "]}), "postal[0]"),
            (json!({"postal": ["12345678901234567"]}), "postal[0]"),
            (json!({"postal": ["101\n15"]}), "postal[0]"),
            (json!({"postal": [" 10115"]}), "postal[0]"),
            (json!({"asn": [3320, 0]}), "asn[1]"),
            (json!({"connection_type": []}), "connection_type"),
            (
                json!({"not": {"all": [{"postal": ["10115", "10115"]}]}}),
                "not.all[0].postal[1]",
            ),
            (
                json!({"any": [{"not": {"country": ["D"]}}]}),
                "any[0].not.country[0]",
            ),
        ];
        for (expr, path) in cases {
            assert_eq!(first_path(expr.clone()), path, "{expr}");
        }
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let mut expr = json!({"country": ["DE"]});
        for _ in 0..MAX_DEPTH {
            expr = json!({"not": expr});
        }
        let found = violations(expr);
        assert!(found.iter().any(|(_, m)| m.contains("deeper")), "{found:?}");

        let many: Vec<String> = (0..=MAX_VALUES).map(|i| format!("s{i}")).collect();
        let found = violations(json!({"segment": many}));
        assert!(
            found.iter().any(|(_, m)| m.contains("values in all")),
            "{found:?}"
        );
    }

    #[test]
    fn an_over_long_leaf_is_refused_by_its_length_alone() {
        // All duplicates, all invalid: only the limit is reported, at the leaf.
        let zeros = vec![0; MAX_VALUES + 1];
        let found = violations(json!({"not": {"placement": zeros}}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "not.placement");
        assert!(found[0].1.contains("at most 10000"), "{found:?}");
    }

    #[test]
    fn the_leaf_that_crosses_the_limit_is_named_and_later_ones_are_not_checked() {
        let segments = |from: usize, count: usize| -> Vec<String> {
            (from..from + count).map(|i| format!("s{i}")).collect()
        };
        let found = violations(json!({"all": [
            {"segment": segments(0, MAX_VALUES - 1)},
            {"segment": segments(MAX_VALUES, 2)},
            {"country": ["de", "de"]}
        ]}));
        assert_eq!(
            found,
            vec![(
                "all[1].segment".to_owned(),
                "brings the expression to 10001 values in all; at most 10000 are allowed"
                    .to_owned()
            )]
        );
    }

    #[test]
    fn rule_messages_say_what_is_expected() {
        let messages =
            |expr| -> Vec<String> { violations(expr).into_iter().map(|(_, m)| m).collect() };
        assert_eq!(
            messages(json!({"metro": [100]})),
            ["100 is not a Nielsen DMA code (500 to 881)"]
        );
        assert_eq!(
            messages(json!({"postal": ["12345678901234567"]})),
            ["must be at most 16 characters"]
        );
        // Sixteen characters, counted as characters, not bytes.
        assert_eq!(
            messages(json!({"postal": ["ÄÖÜ-ÄÖÜ-ÄÖÜ-ÄÖÜÄ"]})),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(json!({"asn": [0]})),
            ["autonomous system numbers start at 1"]
        );
    }

    #[test]
    fn the_new_leaves_parse_from_their_json_names_only() {
        let parsed: Targeting =
            serde_json::from_value(json!({"connection_type": ["cable_dsl"]})).expect("parses");
        assert_eq!(
            parsed,
            Targeting::ConnectionType(vec![ConnectionType::CableDsl])
        );
        for bad in [
            json!({"connection_type": ["dialup"]}),
            json!({"connection_type": ["CableDsl"]}),
            json!({"metro": [-1]}),
            json!({"metro": [70_000]}),
            json!({"asn": ["AS3320"]}),
            json!({"postal": [10115]}),
        ] {
            assert!(
                serde_json::from_value::<Targeting>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    /// One leaf of every attribute, in declaration order.
    fn one_of_each() -> Vec<Targeting> {
        let leaves = json!([
            {"placement": [1]}, {"site": [1]}, {"domain": ["example.com"]},
            {"page_url": ["https://example.com/"]}, {"country": ["DE"]}, {"region": ["DE-BY"]},
            {"city": ["Berlin"]}, {"geo_radius": {"lat": 0.0, "lon": 0.0, "radius_km": 1.0}},
            {"device_type": ["phone"]}, {"os": ["iOS"]}, {"browser": ["Chrome"]},
            {"language": ["de"]}, {"day_of_week": ["mon"]}, {"hour": [{"from": 1, "to": 2}]},
            {"key_value": {"key": "k", "values": ["v"]}}, {"segment": ["s"]},
            {"ip": ["10.0.0.0/8"]}, {"size": [{"w": 1, "h": 1}]}, {"format": ["banner"]},
            {"metro": [807]}, {"postal": ["10115"]}, {"asn": [3320]},
            {"connection_type": ["cellular"]}
        ]);
        serde_json::from_value(leaves).expect("parses")
    }

    #[test]
    fn a_leaf_names_its_attribute_by_its_json_key() {
        let mut leaves = one_of_each();
        leaves.push(Targeting::Not(Box::new(Targeting::Segment(vec![
            "s".into(),
        ]))));
        leaves.push(Targeting::All(vec![Targeting::Segment(vec!["s".into()])]));
        leaves.push(Targeting::Any(vec![Targeting::Segment(vec!["s".into()])]));
        for leaf in leaves {
            let json = serde_json::to_value(&leaf).expect("serialises");
            let key = json.as_object().and_then(|o| o.keys().next()).cloned();
            assert_eq!(key.as_deref(), Some(leaf.attribute()), "{json}");
        }
    }

    #[test]
    fn geo_leaves_are_found_however_nested() {
        let geo: Vec<&str> = one_of_each()
            .iter()
            .filter(|l| l.is_geo())
            .map(Targeting::attribute)
            .collect();
        assert_eq!(
            geo,
            [
                "country",
                "region",
                "city",
                "geo_radius",
                "metro",
                "postal",
                "asn",
                "connection_type"
            ]
        );
        for leaf in one_of_each() {
            let nested = Targeting::All(vec![
                Targeting::Segment(vec!["s".into()]),
                Targeting::Any(vec![
                    Targeting::Os(vec!["iOS".into()]),
                    Targeting::Not(Box::new(leaf.clone())),
                ]),
            ]);
            assert_eq!(nested.uses_geo(), leaf.is_geo(), "{leaf:?}");
        }
        let parse = |expr| serde_json::from_value::<Targeting>(expr).expect("parses");
        assert!(!parse(json!({"all": [{"ip": ["10.0.0.0/8"]}, {"os": ["iOS"]}]})).uses_geo());
    }

    #[test]
    fn leaves_come_in_written_order() {
        let expr: Targeting = serde_json::from_value(json!({"all": [
            {"country": ["DE"]},
            {"any": [{"os": ["iOS"]}, {"not": {"metro": [807]}}]},
            {"not": {"all": [{"asn": [1]}, {"postal": ["1"]}]}},
            {"segment": ["s"]}
        ]}))
        .expect("parses");
        let names: Vec<&str> = expr.leaves().map(Targeting::attribute).collect();
        assert_eq!(
            names,
            ["country", "os", "metro", "asn", "postal", "segment"]
        );
    }

    #[test]
    fn unknown_attributes_and_bad_networks_do_not_parse() {
        assert!(serde_json::from_value::<Targeting>(json!({"planet": ["mars"]})).is_err());
        assert!(serde_json::from_value::<Targeting>(json!({"ip": ["10.0.0.0/33"]})).is_err());
        assert!(
            serde_json::from_value::<Targeting>(
                json!({"key_value": {"key": "k", "values": [], "extra": 1}})
            )
            .is_err()
        );
    }
}
