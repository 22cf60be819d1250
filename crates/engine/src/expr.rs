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
        LocalTime::of_civil(zone.to_datetime(now))
    }

    fn of_civil(local: jiff::civil::DateTime) -> LocalTime {
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

/// A local time with the whole seconds (unix time) it holds for: `from <= t < until`. Day and
/// hour change only when a local hour begins or the zone's offset changes, so a worker can
/// keep one per zone across requests instead of converting the time for every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalSpan {
    pub from: i64,
    pub until: i64,
    pub local: LocalTime,
}

impl LocalSpan {
    pub fn of(now: jiff::Timestamp, zone: &jiff::tz::TimeZone) -> LocalSpan {
        let civil = zone.to_datetime(now);
        let local = LocalTime::of_civil(civil);
        let second = now.as_second();
        // The local hour began this many seconds ago, unless the offset changed since: the
        // local clock runs with UTC between transitions.
        let hour_start = second - i64::from(civil.minute()) * 60 - i64::from(civil.second());
        let transition = |t: jiff::tz::TimeZoneTransition| t.timestamp().as_second();
        // Transitions fall on whole seconds: the last one at or before `second`, the first after.
        let last = jiff::Timestamp::from_second(second.saturating_add(1))
            .ok()
            .and_then(|after| zone.preceding(after).next())
            .map(transition);
        let next = zone.following(now).next().map(transition);
        LocalSpan {
            from: last.map_or(hour_start, |t| t.max(hour_start)),
            until: next.map_or(hour_start + 3600, |t| t.min(hour_start + 3600)),
            local,
        }
    }

    pub fn holds_at(&self, second: i64) -> bool {
        self.from <= second && second < self.until
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
        Targeting::Metro(codes) => r.geo.metro.is_some_and(|m| codes.contains(&m)),
        Targeting::Postal(codes) => contains_str(codes, r.geo.postal),
        Targeting::Asn(numbers) => r.geo.asn.is_some_and(|n| numbers.contains(&n)),
        Targeting::ConnectionType(types) => {
            r.geo.connection_type.is_some_and(|t| types.contains(&t))
        }
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

/// Why an expression that does not match fails: the first leaf, in evaluation order, whose
/// value decided it, by its attribute's JSON key ([`Targeting::attribute`]), prefixed `not `
/// when the leaf matched under a negation. `None` if it matches.
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
        (leaf, false) => Some(leaf.attribute().to_owned()),
        (leaf, true) => Some(format!("not {}", leaf.attribute())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Around every 2026 clock change of zones with whole-hour, half-hour and 45-minute offsets
    /// (and Lord Howe's half-hour change), each second's span gives the local time a fresh
    /// conversion gives, and every second inside the span has that local time.
    #[test]
    fn a_span_holds_exactly_the_local_time_of_its_seconds() {
        let zones = [
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "America/St_Johns",
            "Asia/Kathmandu",
            "Australia/Lord_Howe",
        ];
        for name in zones {
            let zone = jiff::tz::TimeZone::get(name).expect("a bundled zone");
            let start = jiff::Timestamp::from_second(1_767_225_600).expect("2026-01-01");
            let transitions: Vec<i64> = zone
                .following(start)
                .take(4)
                .map(|t| t.timestamp().as_second())
                .chain([1_767_225_600 + 12_345])
                .collect();
            for around in transitions {
                // Every 7 minutes over six hours around the change, plus the seconds next to it.
                let seconds = (-3 * 3_600..3 * 3_600)
                    .step_by(420)
                    .chain(-2..=2)
                    .map(|delta| around + delta);
                for second in seconds {
                    let now = jiff::Timestamp::from_second(second).expect("valid");
                    let span = LocalSpan::of(now, &zone);
                    assert!(span.holds_at(second), "{name} {second}: {span:?}");
                    assert_eq!(span.local, LocalTime::of(now, &zone), "{name} {second}");
                    for inside in [span.from, span.until - 1, (span.from + span.until) / 2] {
                        let at = jiff::Timestamp::from_second(inside).expect("valid");
                        assert_eq!(
                            LocalTime::of(at, &zone),
                            span.local,
                            "{name}: {inside} in {span:?}"
                        );
                    }
                    assert!(span.until - span.from <= 3_600, "{name}: {span:?}");
                }
            }
        }
    }
}
