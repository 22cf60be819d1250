//! From sampled profiles to engine requests, and the projection that collapses profiles the
//! targeting of a set of line items cannot tell apart.
//!
//! A targeting leaf asks whether an attribute is one of its values; a value that no leaf of
//! any line item names answers exactly as an absent one. So replacing every value nobody names
//! by "absent" (a page URL by the longest prefix named, key-values and segments by the named
//! ones) changes no line item's answer, and profiles equal after that are one representative.

use std::hash::{Hash, Hasher};

use jiff::Timestamp;
use marquee_engine::{Device, Geo, LocalTime, Request, Slot, User};
use marquee_model::{Channel, ConnectionType, DeviceType, Targeting, Weekday};
use marquee_snapshot::SnapshotData;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::sample::{BROWSER, CITY, COUNTRY, LANGUAGE, OS, PAGE_URL, POSTAL, Profile, REGION};
use crate::{Sample, sample::Sym};

/// What the targeting of some line items names.
#[derive(Debug, Default)]
pub(crate) struct Vocabulary {
    /// Country, region, city, postal, os, browser, language.
    texts: [FxHashSet<Sym>; 7],
    /// Page URL prefixes.
    urls: Vec<String>,
    device_type: bool,
    connection_type: bool,
    metros: FxHashSet<u16>,
    asns: FxHashSet<u32>,
    point: bool,
    key_values: FxHashSet<(Sym, Sym)>,
    segments: FxHashSet<Sym>,
}

/// A profile as some line items see it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    placement: u64,
    device_type: Option<DeviceType>,
    connection_type: Option<ConnectionType>,
    metro: Option<u16>,
    asn: Option<u32>,
    point: Option<(i32, i32)>,
    texts: [Sym; 7],
    /// 1 + the position of the longest URL prefix named, 0 for none.
    url: u32,
    /// Hash of the sizes and the named key-values and segments: lists are not copied per
    /// profile. A collision would merge two representatives (odds about n²/2⁶⁵).
    lists: u64,
}

impl Vocabulary {
    pub(crate) fn of<'t>(sample: &Sample, targetings: impl Iterator<Item = &'t Targeting>) -> Self {
        let mut vocabulary = Vocabulary::default();
        for targeting in targetings {
            vocabulary.add(sample, targeting);
        }
        vocabulary
            .urls
            .sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        vocabulary.urls.dedup();
        vocabulary
    }

    fn add(&mut self, sample: &Sample, targeting: &Targeting) {
        let mut texts = |slot: usize, values: &[String]| {
            self.texts[slot].extend(values.iter().filter_map(|v| sample.symbol(v)));
        };
        match targeting {
            Targeting::All(children) | Targeting::Any(children) => {
                for child in children {
                    self.add(sample, child);
                }
            }
            Targeting::Not(child) => self.add(sample, child),
            Targeting::Country(v) => texts(COUNTRY, v),
            Targeting::Region(v) => texts(REGION, v),
            Targeting::City(v) => texts(CITY, v),
            Targeting::Postal(v) => texts(POSTAL, v),
            Targeting::Os(v) => texts(OS, v),
            Targeting::Browser(v) => texts(BROWSER, v),
            Targeting::Language(v) => texts(LANGUAGE, v),
            Targeting::PageUrl(prefixes) => self.urls.extend(prefixes.iter().cloned()),
            Targeting::DeviceType(_) => self.device_type = true,
            Targeting::ConnectionType(_) => self.connection_type = true,
            Targeting::Metro(codes) => self.metros.extend(codes),
            Targeting::Asn(numbers) => self.asns.extend(numbers),
            Targeting::GeoRadius(_) => self.point = true,
            Targeting::KeyValue(kv) => {
                if let Some(key) = sample.symbol(&kv.key) {
                    self.key_values.extend(
                        kv.values
                            .iter()
                            .filter_map(|v| sample.symbol(v))
                            .map(|v| (key, v)),
                    );
                }
            }
            Targeting::Segment(v) => self
                .segments
                .extend(v.iter().filter_map(|s| sample.symbol(s))),
            // Placement, site, domain (the placement's site), sizes and formats (the
            // placement's, or the request's sizes) are kept whole; days and hours are time; no
            // IP address is sampled.
            Targeting::Placement(_)
            | Targeting::Site(_)
            | Targeting::Domain(_)
            | Targeting::Size(_)
            | Targeting::Format(_)
            | Targeting::DayOfWeek(_)
            | Targeting::Hour(_)
            | Targeting::Ip(_) => {}
        }
    }

    /// Whether everything `other` names is named here too: then profiles alike for these line
    /// items are alike for `other`'s. (Of URL prefixes, the longest one named that a URL
    /// starts with tells which shorter ones it starts with: those that are its prefixes.)
    pub(crate) fn covers(&self, other: &Vocabulary) -> bool {
        self.texts
            .iter()
            .zip(&other.texts)
            .all(|(here, there)| there.is_subset(here))
            && other.urls.iter().all(|url| self.urls.contains(url))
            && (self.device_type || !other.device_type)
            && (self.connection_type || !other.connection_type)
            && (self.point || !other.point)
            && other.metros.is_subset(&self.metros)
            && other.asns.is_subset(&self.asns)
            && other.key_values.is_subset(&self.key_values)
            && other.segments.is_subset(&self.segments)
    }

    /// The profile as these line items see it; `urls` remembers URL projections.
    pub(crate) fn key(
        &self,
        sample: &Sample,
        profile: &Profile,
        urls: &mut FxHashMap<Sym, u32>,
    ) -> Key {
        let mut texts = [0; 7];
        for (slot, kept) in texts.iter_mut().enumerate() {
            let sym = profile.texts[slot];
            if self.texts[slot].contains(&sym) {
                *kept = sym;
            }
        }
        let url = match profile.texts[PAGE_URL] {
            0 => 0,
            sym => *urls.entry(sym).or_insert_with(|| {
                let text = sample.text(sym).unwrap_or("");
                self.urls
                    .iter()
                    .position(|prefix| text.starts_with(prefix.as_str()))
                    .map_or(0, |i| i as u32 + 1)
            }),
        };
        let mut hasher = FxHasher::default();
        sample.sizes[profile.sizes.range()].hash(&mut hasher);
        for pair in &sample.key_values[profile.key_values.range()] {
            if self.key_values.contains(pair) {
                pair.hash(&mut hasher);
            }
        }
        0xffu8.hash(&mut hasher);
        for segment in &sample.segments[profile.segments.range()] {
            if self.segments.contains(segment) {
                segment.hash(&mut hasher);
            }
        }
        Key {
            placement: profile.placement.0,
            device_type: profile.device_type.filter(|_| self.device_type),
            connection_type: profile.connection_type.filter(|_| self.connection_type),
            metro: profile.metro.filter(|m| self.metros.contains(m)),
            asn: profile.asn.filter(|a| self.asns.contains(a)),
            point: profile.point.filter(|_| self.point),
            texts,
            url,
            lists: hasher.finish(),
        }
    }
}

/// Borrowed lists of one profile's request.
pub(crate) struct Parts<'a> {
    key_values: Vec<(&'a str, &'a str)>,
    segments: Vec<&'a str>,
}

impl<'a> Parts<'a> {
    pub(crate) fn of(sample: &'a Sample, profile: &Profile) -> Parts<'a> {
        let text = |sym| sample.text(sym).unwrap_or("");
        Parts {
            key_values: sample.key_values[profile.key_values.range()]
                .iter()
                .map(|&(k, v)| (text(k), text(v)))
                .collect(),
            segments: sample.segments[profile.segments.range()]
                .iter()
                .map(|&s| text(s))
                .collect(),
        }
    }
}

/// The engine's request for a sampled profile, as the edge builds it for an ad request: our
/// placement and its site, domain and formats; the sizes the request named or else the
/// placement's.
pub(crate) fn request<'a>(
    sample: &'a Sample,
    data: &'a SnapshotData,
    profile: &'a Profile,
    parts: &'a Parts<'a>,
    now: Timestamp,
) -> Request<'a> {
    let text = |slot: usize| sample.text(profile.texts[slot]);
    let entry = data.placement(profile.placement);
    let named = &sample.sizes[profile.sizes.range()];
    let sizes = match entry {
        Some(entry) if named.is_empty() => &entry.sizes[..],
        _ => named,
    };
    let mut request = Request::at(now);
    request.channel = Channel::Direct;
    request.placement = Some(profile.placement);
    request.site = entry.map(|e| e.site_id);
    request.slot = Slot {
        sizes,
        formats: entry.map_or(&[][..], |e| &e.formats[..]),
        ..Slot::default()
    };
    request.domain = entry
        .and_then(|e| data.site(e.site_id))
        .map(|s| s.domain.as_str());
    request.page_url = text(PAGE_URL);
    request.device = Device {
        device_type: profile.device_type,
        os: text(OS),
        browser: text(BROWSER),
        language: text(LANGUAGE),
        ip: None,
    };
    request.geo = Geo {
        country: text(COUNTRY),
        region: text(REGION),
        city: text(CITY),
        point: profile
            .point
            .map(|(lat, lon)| (f64::from(lat) / 100.0, f64::from(lon) / 100.0)),
        metro: profile.metro,
        postal: text(POSTAL),
        asn: profile.asn,
        connection_type: profile.connection_type,
    };
    request.user = User {
        id: None,
        segments: &parts.segments,
    };
    request.key_values = &parts.key_values;
    request
}

/// Hours of the week in local time, bit `weekday × 24 + hour` (Monday 0).
pub(crate) type WeekMask = [u64; 3];

pub(crate) const ALL_WEEK: WeekMask = [u64::MAX, u64::MAX, (1 << 40) - 1];

const WEEKDAYS: [Weekday; 7] = Weekday::ALL;

pub(crate) fn has_bit(mask: &WeekMask, bit: u8) -> bool {
    mask[usize::from(bit / 64)] & (1 << (bit % 64)) != 0
}

/// The local hours of the week at which `targeting` accepts the request: day and hour leaves
/// are masks, every other leaf is the engine's answer (time plays no part in it), combined as
/// the expression combines them.
pub(crate) fn week_mask(targeting: &Targeting, request: &Request<'_>) -> WeekMask {
    let bits = |keep: &dyn Fn(usize, u8) -> bool| {
        let mut mask = [0; 3];
        for day in 0..7 {
            for hour in 0..24u8 {
                if keep(day, hour) {
                    let bit = day * 24 + usize::from(hour);
                    mask[bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        mask
    };
    match targeting {
        Targeting::All(children) => {
            let mut mask = ALL_WEEK;
            for child in children {
                if mask == [0; 3] {
                    break;
                }
                let other = week_mask(child, request);
                mask = [mask[0] & other[0], mask[1] & other[1], mask[2] & other[2]];
            }
            mask
        }
        Targeting::Any(children) => {
            let mut mask = [0; 3];
            for child in children {
                if mask == ALL_WEEK {
                    break;
                }
                let other = week_mask(child, request);
                mask = [mask[0] | other[0], mask[1] | other[1], mask[2] | other[2]];
            }
            mask
        }
        Targeting::Not(child) => {
            let inner = week_mask(child, request);
            [
                !inner[0] & ALL_WEEK[0],
                !inner[1] & ALL_WEEK[1],
                !inner[2] & ALL_WEEK[2],
            ]
        }
        Targeting::DayOfWeek(days) => bits(&|day, _| days.contains(&WEEKDAYS[day])),
        Targeting::Hour(ranges) => bits(&|_, hour| {
            ranges
                .iter()
                .any(|range| (range.from..range.to).contains(&hour))
        }),
        leaf => {
            let any_time = LocalTime {
                weekday: Weekday::Mon,
                hour: 0,
            };
            if marquee_engine::expr::matches(leaf, request, any_time) {
                ALL_WEEK
            } else {
                [0; 3]
            }
        }
    }
}

/// Whether the expression names days or hours.
pub(crate) fn names_time(targeting: &Targeting) -> bool {
    match targeting {
        Targeting::All(children) | Targeting::Any(children) => children.iter().any(names_time),
        Targeting::Not(child) => names_time(child),
        Targeting::DayOfWeek(_) | Targeting::Hour(_) => true,
        _ => false,
    }
}

/// An expression with its day and hour leaves made constant.
enum Relaxed {
    True,
    False,
    Expr(Targeting),
}

/// An expression that accepts a request whenever `targeting` accepts it at some local time:
/// day and hour leaves become true where they count for a match and false under a `not`. The
/// engine's index retrieves candidates by it; [`week_mask`] then says at which hours.
/// `None` is "always", and an expression that can never match stays as it was.
pub(crate) fn relax(targeting: &Targeting) -> Option<Targeting> {
    match relaxed(targeting, true) {
        Relaxed::True => None,
        Relaxed::False => Some(targeting.clone()),
        Relaxed::Expr(expr) => Some(expr),
    }
}

fn relaxed(targeting: &Targeting, positive: bool) -> Relaxed {
    match targeting {
        Targeting::DayOfWeek(_) | Targeting::Hour(_) => {
            if positive {
                Relaxed::True
            } else {
                Relaxed::False
            }
        }
        Targeting::Not(child) => match relaxed(child, !positive) {
            Relaxed::True => Relaxed::False,
            Relaxed::False => Relaxed::True,
            Relaxed::Expr(expr) => Relaxed::Expr(Targeting::Not(Box::new(expr))),
        },
        Targeting::All(children) => {
            let mut kept = Vec::new();
            for child in children {
                match relaxed(child, positive) {
                    Relaxed::True => {}
                    Relaxed::False => return Relaxed::False,
                    Relaxed::Expr(expr) => kept.push(expr),
                }
            }
            match kept.len() {
                0 => Relaxed::True,
                1 => Relaxed::Expr(kept.remove(0)),
                _ => Relaxed::Expr(Targeting::All(kept)),
            }
        }
        Targeting::Any(children) => {
            let mut kept = Vec::new();
            for child in children {
                match relaxed(child, positive) {
                    Relaxed::True => return Relaxed::True,
                    Relaxed::False => {}
                    Relaxed::Expr(expr) => kept.push(expr),
                }
            }
            match kept.len() {
                0 => Relaxed::False,
                1 => Relaxed::Expr(kept.remove(0)),
                _ => Relaxed::Expr(Targeting::Any(kept)),
            }
        }
        leaf => Relaxed::Expr(leaf.clone()),
    }
}

#[cfg(test)]
mod tests {
    use marquee_model::HourRange;

    use super::*;

    #[test]
    fn relaxing_drops_time_where_it_restricts_and_keeps_the_rest() {
        let de = Targeting::Country(vec!["DE".to_owned()]);
        let evenings = Targeting::Hour(vec![HourRange { from: 18, to: 24 }]);
        let both = Targeting::All(vec![de.clone(), evenings.clone()]);
        assert_eq!(relax(&both), Some(de.clone()));
        assert_eq!(relax(&evenings), None);
        // "not in the evening" can still match (in the morning): relaxed to always.
        assert_eq!(relax(&Targeting::Not(Box::new(evenings.clone()))), None);
        let not_both = Targeting::Not(Box::new(both.clone()));
        assert_eq!(relax(&not_both), None);
        let either = Targeting::Any(vec![de.clone(), evenings]);
        assert_eq!(relax(&either), None);
        assert!(names_time(&both) && !names_time(&de));
    }

    /// The mask agrees with the engine's evaluator at every local hour of the week.
    #[test]
    fn week_masks_agree_with_the_engine_hour_by_hour() {
        let de = Targeting::Country(vec!["DE".to_owned()]);
        let evenings = Targeting::Hour(vec![HourRange { from: 18, to: 24 }]);
        let weekend = Targeting::DayOfWeek(vec![Weekday::Sat, Weekday::Sun]);
        let expr = Targeting::Any(vec![
            Targeting::All(vec![de.clone(), evenings.clone()]),
            Targeting::Not(Box::new(Targeting::Any(vec![weekend, de]))),
        ]);
        for country in ["DE", "FR"] {
            let mut request = Request::at(Timestamp::UNIX_EPOCH);
            request.geo.country = Some(country);
            let mask = week_mask(&expr, &request);
            for (day, weekday) in WEEKDAYS.into_iter().enumerate() {
                for hour in 0..24u8 {
                    let local = LocalTime { weekday, hour };
                    assert_eq!(
                        has_bit(&mask, (day * 24) as u8 + hour),
                        marquee_engine::expr::matches(&expr, &request, local),
                        "{country} {weekday:?} {hour}"
                    );
                }
            }
        }
    }
}
