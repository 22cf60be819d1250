//! The naive evaluator of targeting expressions. The index (index.rs) must agree with it on
//! every expression and request; the property tests check that. It also evaluates the leaves
//! the index cannot take (URL prefixes, IP networks, geo radius) after retrieval, and finds the
//! leaf to blame in explain mode.

use marquee_model::{Targeting, Weekday};

use crate::request::{Request, domain_suffixes};

/// The request's local day and hour in one line item's time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    pub weekday: Weekday,
    pub hour: u8,
}

impl LocalTime {
    pub fn of(now: jiff::Timestamp, zone: &jiff::tz::TimeZone) -> LocalTime {
        let local = zone.to_datetime(now);
        let weekday = match local.weekday() {
            jiff::civil::Weekday::Monday => Weekday::Mon,
            jiff::civil::Weekday::Tuesday => Weekday::Tue,
            jiff::civil::Weekday::Wednesday => Weekday::Wed,
            jiff::civil::Weekday::Thursday => Weekday::Thu,
            jiff::civil::Weekday::Friday => Weekday::Fri,
            jiff::civil::Weekday::Saturday => Weekday::Sat,
            jiff::civil::Weekday::Sunday => Weekday::Sun,
        };
        // Hours of a civil time are 0..=23.
        let hour = u8::try_from(local.hour()).unwrap_or(0);
        LocalTime { weekday, hour }
    }
}

/// Whether `expr` matches `request` (with `local` the request's time in the line item's zone).
pub fn matches(expr: &Targeting, request: &Request<'_>, local: LocalTime) -> bool {
    match expr {
        Targeting::All(children) => children.iter().all(|c| matches(c, request, local)),
        Targeting::Any(children) => children.iter().any(|c| matches(c, request, local)),
        Targeting::Not(child) => !matches(child, request, local),
        leaf => leaf_matches(leaf, request, local),
    }
}

/// Whether one leaf matches. `All`, `Any` and `Not` are evaluated by [`matches`].
pub(crate) fn leaf_matches(leaf: &Targeting, request: &Request<'_>, local: LocalTime) -> bool {
    let r = request;
    match leaf {
        Targeting::All(_) | Targeting::Any(_) | Targeting::Not(_) => matches(leaf, r, local),
        Targeting::Placement(ids) => r.placement.is_some_and(|p| ids.contains(&p)),
        Targeting::Site(ids) => r.site.is_some_and(|s| ids.contains(&s)),
        Targeting::Domain(domains) => r.domain.is_some_and(|host| {
            domain_suffixes(host).any(|suffix| domains.iter().any(|d| d == suffix))
        }),
        Targeting::PageUrl(prefixes) => r
            .page_url
            .is_some_and(|url| prefixes.iter().any(|p| url.starts_with(p.as_str()))),
        Targeting::Country(codes) => contains_str(codes, r.geo.country),
        Targeting::Region(codes) => contains_str(codes, r.geo.region),
        Targeting::City(names) => contains_str(names, r.geo.city),
        Targeting::GeoRadius(circle) => r.geo.point.is_some_and(|(lat, lon)| {
            distance_km(lat, lon, circle.lat, circle.lon) <= circle.radius_km
        }),
        Targeting::DeviceType(types) => r.device.device_type.is_some_and(|t| types.contains(&t)),
        Targeting::Os(names) => contains_str(names, r.device.os),
        Targeting::Browser(names) => contains_str(names, r.device.browser),
        Targeting::Language(codes) => contains_str(codes, r.device.language),
        Targeting::DayOfWeek(days) => days.contains(&local.weekday),
        Targeting::Hour(ranges) => ranges
            .iter()
            .any(|range| (range.from..range.to).contains(&local.hour)),
        Targeting::KeyValue(kv) => r
            .key_values
            .iter()
            .any(|(key, value)| *key == kv.key && kv.values.iter().any(|v| v == value)),
        Targeting::Segment(segments) => r
            .user
            .segments
            .iter()
            .any(|s| segments.iter().any(|t| t == s)),
        Targeting::Ip(nets) => r
            .device
            .ip
            .is_some_and(|ip| nets.iter().any(|n| n.contains(&ip))),
        Targeting::Size(sizes) => r.slot.sizes.iter().any(|s| sizes.contains(s)),
        Targeting::Format(formats) => r.formats().iter().any(|f| formats.contains(f)),
    }
}

fn contains_str(list: &[String], value: Option<&str>) -> bool {
    value.is_some_and(|v| list.iter().any(|item| item == v))
}

/// Great-circle distance on a sphere of the Earth's mean radius.
pub(crate) fn distance_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    const EARTH_RADIUS_KM: f64 = 6_371.0;
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = (lat2 - lat1).to_radians();
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
}

/// The name of a leaf's attribute, as explain mode reports it.
pub fn attribute_name(leaf: &Targeting) -> &'static str {
    match leaf {
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
    }
}

/// Why an expression that does not match fails: the first leaf, in evaluation order, whose
/// value decided it, prefixed `not ` when the leaf matched under a negation. `None` if it
/// matches.
pub fn blame(expr: &Targeting, request: &Request<'_>, local: LocalTime) -> Option<String> {
    blame_under(expr, request, local, false)
}

fn blame_under(
    expr: &Targeting,
    request: &Request<'_>,
    local: LocalTime,
    negated: bool,
) -> Option<String> {
    // Under a negation the expression fails when it matches.
    if matches(expr, request, local) != negated {
        return None;
    }
    match (expr, negated) {
        (Targeting::Not(child), _) => blame_under(child, request, local, !negated),
        // A failing all, or a negated any that matched: the first child that decided it.
        (Targeting::All(children), false) | (Targeting::Any(children), true) => children
            .iter()
            .find_map(|c| blame_under(c, request, local, negated)),
        // A failing any, or a negated all that matched: every child decided it; name the first.
        (Targeting::Any(children), false) | (Targeting::All(children), true) => children
            .first()
            .and_then(|c| blame_under(c, request, local, negated)),
        (leaf, false) => Some(attribute_name(leaf).to_owned()),
        (leaf, true) => Some(format!("not {}", attribute_name(leaf))),
    }
}
