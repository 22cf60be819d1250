//! Reports: which stored rows to read for a request, and how to turn them into rows in the
//! reader's time zone, grouped by the dimensions asked for.
//!
//! Stored buckets are UTC minutes, hours and days. A report holds the stored buckets that
//! *start* in its range `[from, to)`: minutes for minute reports, hours for hour and day
//! reports (UTC day rows, which hold whole UTC days of hours, are read instead only when both
//! ends fall on UTC midnights). It covers exactly `[ceil(from), ceil(to))`, each end moved
//! forward to the next bucket boundary ([`ReportSpec::covered`]), so reports sharing a bound
//! never count a bucket twice, and the answer states the range it covered.
//!
//! A report converts each bucket's start to the report's zone: a minute or an hour keeps its
//! start instant (in a zone whose offset is not a whole number of hours, such as
//! Asia/Kolkata, an hour bucket therefore starts at :30 local time); a day is the local date
//! of each hour bucket's start. So local days are exact in every zone whose offset is whole
//! hours, and off by the odd half hour at each end of the day elsewhere.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use rustc_hash::FxHashMap;

use crate::counters::Counters;
use crate::dims::Dimensions;
use crate::hll::Hll;
use crate::ingest::{DAY, HOUR, MINUTE, SketchKey, local_day};

/// Bucket width of a report's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Granularity {
    Minute,
    Hour,
    Day,
}

impl Granularity {
    pub fn parse(text: &str) -> Option<Granularity> {
        match text {
            "minute" => Some(Granularity::Minute),
            "hour" => Some(Granularity::Hour),
            "day" => Some(Granularity::Day),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Minute => "minute",
            Granularity::Hour => "hour",
            Granularity::Day => "day",
        }
    }

    /// Width of the stored bucket in seconds.
    pub fn seconds(self) -> i64 {
        match self {
            Granularity::Minute => MINUTE,
            Granularity::Hour => HOUR,
            Granularity::Day => DAY,
        }
    }
}

// The first seven variants mirror `ObjectKind`'s deliberately: a report groups by each kind of
// object, and by dimensions no object has.
/// What a report can group by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    Advertiser,
    Campaign,
    LineItem,
    Creative,
    Publisher,
    Site,
    Placement,
    Country,
    /// ISO 3166-2 (`US-CA`): the country and its first subdivision.
    Region,
    Device,
    /// A gateway bidder of the unified auction (its id, [`marquee_eventlog::bidder_id`]): rows
    /// of programmatic demand, line item 0. Direct delivery is bidder 0.
    Bidder,
}

impl Dimension {
    pub const ALL: [Dimension; 11] = [
        Dimension::Advertiser,
        Dimension::Campaign,
        Dimension::LineItem,
        Dimension::Creative,
        Dimension::Publisher,
        Dimension::Site,
        Dimension::Placement,
        Dimension::Country,
        Dimension::Region,
        Dimension::Device,
        Dimension::Bidder,
    ];

    pub fn parse(text: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Advertiser => "advertiser",
            Dimension::Campaign => "campaign",
            Dimension::LineItem => "line_item",
            Dimension::Creative => "creative",
            Dimension::Publisher => "publisher",
            Dimension::Site => "site",
            Dimension::Placement => "placement",
            Dimension::Country => "country",
            Dimension::Region => "region",
            Dimension::Device => "device",
            Dimension::Bidder => "bidder",
        }
    }

    /// Whether this dimension describes demand (advertiser side).
    pub fn is_demand(self) -> bool {
        matches!(
            self,
            Dimension::Advertiser | Dimension::Campaign | Dimension::LineItem | Dimension::Creative
        )
    }
}

/// Which stored rows a report reads: one SELECT over one table, grouped by the bucket and the
/// stored columns flagged here (the others come back as 0 or empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowQuery {
    /// The table: minute, hour or day rows.
    pub table: Granularity,
    /// Bucket starts in `[from, to)`, seconds since the epoch.
    pub from: i64,
    pub to: i64,
    /// Only these line items (`None`: all).
    pub line_items: Option<Vec<u64>>,
    /// Only these placements (`None`: all).
    pub placements: Option<Vec<u64>>,
    /// Only these countries (two capitals, or empty for unknown).
    pub countries: Option<Vec<String>>,
    /// Only these regions (ISO 3166-2 such as `US-CA`, or empty for unknown).
    pub regions: Option<Vec<String>>,
    /// Only these device codes.
    pub devices: Option<Vec<u8>>,
    pub by_line_item: bool,
    pub by_creative: bool,
    pub by_placement: bool,
    pub by_country: bool,
    pub by_region: bool,
    pub by_device: bool,
}

/// One row read by a [`RowQuery`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredRow {
    pub bucket: i64,
    pub line_item: u64,
    pub creative: u64,
    pub placement: u64,
    pub country: String,
    /// ISO 3166-2 (`US-CA`), empty when unknown.
    pub region: String,
    pub device: u8,
    pub counters: Counters,
}

/// A report request after parsing and authorisation.
#[derive(Debug, Clone)]
pub struct ReportSpec {
    pub granularity: Granularity,
    pub zone: TimeZone,
    pub from: Timestamp,
    pub to: Timestamp,
    /// In the order asked for.
    pub group_by: Vec<Dimension>,
    pub line_items: Option<Vec<u64>>,
    pub placements: Option<Vec<u64>>,
    pub countries: Option<Vec<String>>,
    pub regions: Option<Vec<String>>,
    pub devices: Option<Vec<u8>>,
}

/// A dimension's value in a report row.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Id(u64),
    Text(&'static str),
    Country(String),
    Region(String),
}

/// One report row.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    /// The bucket's start in the report's zone.
    pub start: jiff::Zoned,
    /// One value per `group_by` dimension, in order.
    pub values: Vec<Value>,
    pub counters: Counters,
    /// The row's spend in micros: its exact amount rounded down or up to the micro so that
    /// the rows add up to the totals' spend ([`Counters::spend_shares`]). Use this, not
    /// `counters.spend_micros()`, wherever rows are shown with their totals.
    pub spend_micros: i64,
    /// The row's programmatic revenue in micros, shared out as `spend_micros` is
    /// ([`Counters::revenue_shares`]).
    pub revenue_micros: i64,
    /// Estimated unique users, when the row is a day and groups by demand no finer than line
    /// item (sketches are per line item and day).
    pub unique_users: Option<u64>,
}

/// A finished report.
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: Vec<ReportRow>,
    pub totals: Counters,
    /// All users of the line items in scope over every day the range touches, each line item's
    /// days counted in the zone its sketches were kept in (a merge of their daily sketches).
    pub unique_users: Option<u64>,
}

impl ReportSpec {
    /// Width in seconds of the stored buckets the report counts: minutes for minute reports,
    /// hours for hour and day reports (a day row holds whole UTC days of hours).
    fn precision(&self) -> i64 {
        match self.granularity {
            Granularity::Minute => MINUTE,
            Granularity::Hour | Granularity::Day => HOUR,
        }
    }

    /// The range the report covers, in seconds: `[from, to)` with each end moved forward to
    /// the next boundary of the buckets it counts (unchanged on one). The report holds exactly
    /// the stored buckets that start in `[from, to)`; so two reports sharing a bound never
    /// count a bucket twice, and a range in which no bucket starts is empty (`from == to`).
    fn covered_secs(&self) -> (i64, i64) {
        let width = self.precision();
        let from = ceil_to(self.from, width);
        (from, ceil_to(self.to, width).max(from))
    }

    /// The range the report covers (see [`covered_secs`](Self::covered_secs)): what its
    /// answer states as `from` and `to`.
    pub fn covered(&self) -> (Timestamp, Timestamp) {
        let (from, to) = self.covered_secs();
        (
            Timestamp::from_second(from).unwrap_or(self.from),
            Timestamp::from_second(to).unwrap_or(self.to),
        )
    }

    /// The stored table this report reads. UTC day rows only for a day report in UTC whose
    /// covered range is whole UTC days; otherwise hours (they hold the same counts).
    pub fn table(&self) -> Granularity {
        match self.granularity {
            Granularity::Day if is_utc(&self.zone) => {
                let (from, to) = self.covered_secs();
                if from.rem_euclid(DAY) == 0 && to.rem_euclid(DAY) == 0 {
                    Granularity::Day
                } else {
                    Granularity::Hour
                }
            }
            Granularity::Day => Granularity::Hour,
            other => other,
        }
    }

    /// The one SELECT this report needs: the stored buckets that start in `[from, to)`.
    ///
    /// Local days from hour rows take each hour by the local date of its start; where the
    /// zone's offset has an odd half hour, the hour holding a local midnight starts the day
    /// before and belongs to that day's row. Counting only the hours that start in the range
    /// leaves it there.
    pub fn row_query(&self) -> RowQuery {
        let table = self.table();
        let (from, to) = self.covered_secs();
        let has = |dims: &[Dimension]| self.group_by.iter().any(|d| dims.contains(d));
        RowQuery {
            table,
            from,
            to,
            line_items: self.line_items.clone(),
            placements: self.placements.clone(),
            countries: self.countries.clone(),
            regions: self.regions.clone(),
            devices: self.devices.clone(),
            by_line_item: has(&[
                Dimension::LineItem,
                Dimension::Campaign,
                Dimension::Advertiser,
            ]),
            // A line item 0 row's creative column is its bidder.
            by_creative: has(&[Dimension::Creative, Dimension::Bidder]),
            by_placement: has(&[Dimension::Placement, Dimension::Site, Dimension::Publisher]),
            by_country: has(&[Dimension::Country]),
            by_region: has(&[Dimension::Region]),
            by_device: has(&[Dimension::Device]),
        }
    }

    /// The most stored rows (of [`row_query`](Self::row_query)) that can add up into one
    /// report row, or `None` when nothing known bounds it. A report of at most `max_rows` rows
    /// is read from at most `max_rows` times this many stored rows, so a query that finds more
    /// proves the report too large without the rest being loaded or shaped.
    ///
    /// Stored rows fold into one report row when it is wider in time (local days summed from
    /// UTC hours) or coarser in the catalog (line items into campaigns or advertisers,
    /// placements into sites or publishers); the other stored columns are grouped as asked.
    /// Folding line items or placements is bounded only by the largest group among those in
    /// scope: without a list of them (an admin's report over everything) it is `None`.
    pub fn stored_rows_per_row(&self, dims: &Dimensions) -> Option<usize> {
        let q = self.row_query();
        let coarser = |finest: Dimension,
                       fold: &[Dimension],
                       ids: Option<&[u64]>,
                       row: fn(u64) -> StoredRow| {
            if self.group_by.contains(&finest) || !self.group_by.iter().any(|d| fold.contains(d)) {
                return Some(1);
            }
            let mut groups: FxHashMap<Vec<Value>, usize> = FxHashMap::default();
            for &id in ids? {
                let stored = row(id);
                let key = fold
                    .iter()
                    .filter(|d| self.group_by.contains(d))
                    .map(|&d| value(dims, &stored, d))
                    .collect();
                *groups.entry(key).or_default() += 1;
            }
            Some(groups.into_values().max().unwrap_or(1))
        };
        let line_items = coarser(
            Dimension::LineItem,
            &[Dimension::Campaign, Dimension::Advertiser],
            self.line_items.as_deref(),
            |line_item| StoredRow {
                line_item,
                ..StoredRow::default()
            },
        )?;
        let placements = coarser(
            Dimension::Placement,
            &[Dimension::Site, Dimension::Publisher],
            self.placements.as_deref(),
            |placement| StoredRow {
                placement,
                ..StoredRow::default()
            },
        )?;
        let buckets = if q.table == Granularity::Hour && self.granularity == Granularity::Day {
            self.hours_in_longest_local_day()
        } else {
            1
        };
        line_items.checked_mul(placements)?.checked_mul(buckets)
    }

    /// The most UTC hours that start on one local date in the report's range: 24, or more on a
    /// day whose clocks go back.
    fn hours_in_longest_local_day(&self) -> usize {
        let mut longest = DAY;
        let (from, to) = self.covered();
        // From a day early: a change earlier on the day `from` falls in lengthens that day too.
        let since = from
            .checked_sub(jiff::SignedDuration::from_secs(DAY))
            .unwrap_or(from);
        for change in self
            .zone
            .following(since)
            .take_while(|t| t.timestamp() < to)
        {
            let day = change.timestamp().to_zoned(self.zone.clone());
            if let (Ok(start), Ok(next)) = (
                day.start_of_day(),
                day.tomorrow().and_then(|d| d.start_of_day()),
            ) {
                longest = longest.max(next.timestamp().as_second() - start.timestamp().as_second());
            }
        }
        // A local day of `longest` seconds holds at most this many hour starts, whatever its
        // offset from UTC's hours.
        usize::try_from((longest + HOUR - 1) / HOUR).unwrap_or(usize::MAX)
    }

    /// Whether unique users can be told at all. The sketches count a line item's users per
    /// local day over every placement, country and device: a supply grouping, or a filter on
    /// placements, countries or devices, leaves them unknown (`None`) rather than overstated.
    pub fn users_countable(&self) -> bool {
        self.placements.is_none()
            && self.countries.is_none()
            && self.devices.is_none()
            && !self.group_by.iter().any(|d| {
                matches!(
                    d,
                    Dimension::Placement | Dimension::Site | Dimension::Publisher
                )
            })
    }

    /// Whether per-row unique users can be given: day rows grouped by nothing finer than a
    /// line item on the demand side, users countable at all.
    fn rows_have_users(&self) -> bool {
        self.granularity == Granularity::Day
            && self.users_countable()
            && self.group_by.iter().all(|d| {
                matches!(
                    d,
                    Dimension::LineItem | Dimension::Campaign | Dimension::Advertiser
                )
            })
    }

    /// The local days (`yyyymmdd`, first and last) whose sketches the report reads, or `None`
    /// when it needs none (its covered range is empty, or no line item is in scope).
    ///
    /// Sketches are kept per line item and local day in the zone of the line item's
    /// advertiser, which need not be the report's: these are the days the covered range
    /// touches in the zone of each line item in scope (with no list of them, in any zone: the
    /// range's UTC dates widened by 26 hours, the largest offset there is, either way).
    /// [`shape`](Self::shape) keeps of each line item's sketches the days in its own zone.
    pub fn sketch_days(&self, dims: &Dimensions) -> Option<(i32, i32)> {
        let (from, to) = self.covered_secs();
        if from >= to {
            return None;
        }
        let last = to - 1;
        match &self.line_items {
            Some(ids) => {
                let mut zones: Vec<u16> = ids
                    .iter()
                    .filter_map(|&id| dims.line_item(id).map(|li| li.zone))
                    .collect();
                zones.sort_unstable();
                zones.dedup();
                zones
                    .iter()
                    .map(|&zone| {
                        let zone = dims.zone(zone);
                        (local_day(zone, from), local_day(zone, last))
                    })
                    .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
            }
            None => {
                const WIDEST_OFFSET: i64 = 26 * HOUR;
                Some((
                    local_day(&TimeZone::UTC, from.saturating_sub(WIDEST_OFFSET)),
                    local_day(&TimeZone::UTC, last.saturating_add(WIDEST_OFFSET)),
                ))
            }
        }
    }

    /// Turns stored rows (and the sketches of [`sketch_days`](Self::sketch_days)) into the
    /// report.
    ///
    /// Unique users: the totals merge each line item's sketches of the days the covered range
    /// touches in its own zone. A day row gets the users of its line items' sketches of that
    /// date only where every zone those sketches were kept in has the same day as the report's
    /// zone (same date, same start and end); otherwise its users are unknown (`None`), since a
    /// sketch of another zone's day holds users of another span of time.
    pub fn shape(
        &self,
        dims: &Dimensions,
        rows: &[StoredRow],
        sketches: &[(SketchKey, Hll)],
    ) -> Report {
        let mut grouped: BTreeMap<(i64, Vec<Value>), Counters> = BTreeMap::new();
        let mut totals = Counters::default();
        let mut day_starts: FxHashMap<i64, i64> = FxHashMap::default();
        for row in rows {
            let start = self.bucket_start(row.bucket, &mut day_starts);
            let values = self.group_by.iter().map(|&d| value(dims, row, d)).collect();
            grouped
                .entry((start, values))
                .or_default()
                .add(&row.counters);
            totals.add(&row.counters);
        }

        // The sketches of the days the range touches, each in its line item's zone.
        let (from, to) = self.covered_secs();
        let mut zone_days: FxHashMap<Option<u16>, (i32, i32)> = FxHashMap::default();
        let sketches: Vec<(&SketchKey, &Hll, Option<u16>)> = sketches
            .iter()
            .filter_map(|(key, sketch)| {
                let zone = dims.line_item(key.line_item).map(|li| li.zone);
                let (first, last) = *zone_days.entry(zone).or_insert_with(|| {
                    let zone = zone.map_or(&self.zone, |z| dims.zone(z));
                    (local_day(zone, from), local_day(zone, to - 1))
                });
                (from < to && (first..=last).contains(&key.day)).then_some((key, sketch, zone))
            })
            .collect();
        let mut sketch_zones: Vec<&TimeZone> = Vec::new();
        for (_, _, zone) in &sketches {
            let zone = zone.map_or(&self.zone, |z| dims.zone(z));
            if *zone != self.zone && !sketch_zones.contains(&zone) {
                sketch_zones.push(zone);
            }
        }

        let users_by_row = self.rows_have_users().then(|| {
            let mut merged: FxHashMap<(i32, Vec<Value>), Hll> = FxHashMap::default();
            for (key, sketch, _) in &sketches {
                let row = StoredRow {
                    bucket: 0,
                    line_item: key.line_item,
                    creative: 0,
                    placement: 0,
                    country: String::new(),
                    region: String::new(),
                    device: 0,
                    counters: Counters::default(),
                };
                let values = self
                    .group_by
                    .iter()
                    .map(|&d| value(dims, &row, d))
                    .collect();
                merged.entry((key.day, values)).or_default().merge(sketch);
            }
            merged
        });
        let mut all_users = Hll::new();
        for (_, sketch, _) in &sketches {
            all_users.merge(sketch);
        }

        let spend = Counters::spend_shares(grouped.values());
        let revenue = Counters::revenue_shares(grouped.values());
        let mut same_days: FxHashMap<i64, bool> = FxHashMap::default();
        let rows = grouped
            .into_iter()
            .zip(spend.into_iter().zip(revenue))
            .map(
                |(((start, values), counters), (spend_micros, revenue_micros))| {
                    let unique_users = users_by_row.as_ref().and_then(|merged| {
                        let same_day = *same_days
                            .entry(start)
                            .or_insert_with(|| self.same_day_in(&sketch_zones, start));
                        let day = local_day(&self.zone, start);
                        same_day
                            .then(|| merged.get(&(day, values.clone())).map_or(0, Hll::estimate))
                    });
                    let start = Timestamp::from_second(start)
                        .unwrap_or(Timestamp::UNIX_EPOCH)
                        .to_zoned(self.zone.clone());
                    ReportRow {
                        start,
                        values,
                        counters,
                        spend_micros,
                        revenue_micros,
                        unique_users,
                    }
                },
            )
            .collect();
        Report {
            rows,
            totals,
            unique_users: self.users_countable().then(|| all_users.estimate()),
        }
    }

    /// Whether the report's local day starting at `start` (seconds) is the same day, with the
    /// same date, in each of `zones`: same start, same end.
    fn same_day_in(&self, zones: &[&TimeZone], start: i64) -> bool {
        if zones.is_empty() {
            return true;
        }
        let next = next_local_day_start(&self.zone, start);
        let date = local_day(&self.zone, start);
        zones.iter().all(|zone| {
            local_day_start(zone, start) == start
                && local_day_start(zone, next) == next
                && local_day(zone, start) == date
        })
    }

    /// The start (seconds) of the report bucket a stored bucket falls in.
    fn bucket_start(&self, stored: i64, day_starts: &mut FxHashMap<i64, i64>) -> i64 {
        match self.granularity {
            Granularity::Minute | Granularity::Hour => stored,
            // Day rows, or hour rows where the range is not whole UTC days.
            Granularity::Day if is_utc(&self.zone) => stored - stored.rem_euclid(DAY),
            Granularity::Day => *day_starts
                .entry(stored)
                .or_insert_with(|| local_day_start(&self.zone, stored)),
        }
    }
}

/// Whether a zone is UTC, however it was named.
pub fn is_utc(zone: &TimeZone) -> bool {
    *zone == TimeZone::UTC
        || matches!(
            zone.iana_name(),
            Some("UTC" | "Etc/UTC" | "Etc/UCT" | "UCT")
        )
}

/// `at` moved forward to the next multiple of `width` seconds (unchanged on one).
fn ceil_to(at: Timestamp, width: i64) -> i64 {
    let mut secs = at.as_second();
    // `as_second` truncates towards zero: a positive fraction of a second rounds it up.
    if at.subsec_nanosecond() > 0 {
        secs = secs.saturating_add(1);
    }
    secs.saturating_add((width - secs.rem_euclid(width)) % width)
}

/// The start of the local day after the one containing the instant, in seconds.
fn next_local_day_start(zone: &TimeZone, secs: i64) -> i64 {
    Timestamp::from_second(secs)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_zoned(zone.clone())
        .tomorrow()
        .and_then(|day| day.start_of_day())
        .map_or(secs.saturating_add(DAY), |start| {
            start.timestamp().as_second()
        })
}

/// The start of the local day containing the instant, in seconds.
fn local_day_start(zone: &TimeZone, secs: i64) -> i64 {
    Timestamp::from_second(secs)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_zoned(zone.clone())
        .start_of_day()
        .map_or(secs, |start| start.timestamp().as_second())
}

fn value(dims: &Dimensions, row: &StoredRow, dimension: Dimension) -> Value {
    let line_item = dims.line_item(row.line_item);
    let placement = dims.placement(row.placement);
    match dimension {
        Dimension::Advertiser => Value::Id(line_item.map_or(0, |l| l.advertiser)),
        Dimension::Campaign => Value::Id(line_item.map_or(0, |l| l.campaign)),
        Dimension::LineItem => Value::Id(row.line_item),
        // Line item 0 rows hold a bidder's id in the creative column.
        Dimension::Creative if row.line_item == 0 => Value::Id(0),
        Dimension::Creative => Value::Id(row.creative),
        Dimension::Bidder if row.line_item == 0 => Value::Id(row.creative),
        Dimension::Bidder => Value::Id(0),
        Dimension::Publisher => Value::Id(placement.map_or(0, |p| p.publisher)),
        Dimension::Site => Value::Id(placement.map_or(0, |p| p.site)),
        Dimension::Placement => Value::Id(row.placement),
        Dimension::Country => Value::Country(row.country.clone()),
        Dimension::Region => Value::Region(row.region.clone()),
        Dimension::Device => Value::Text(
            crate::ingest::DEVICES
                .get(usize::from(row.device))
                .copied()
                .unwrap_or(""),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims() -> Dimensions {
        Dimensions::builder()
            .advertiser(1, "Europe/Berlin", "EUR")
            .campaign(10, 1)
            .line_item(100, 10)
            .line_item(101, 10)
            .site(5, 50)
            .placement(7, 5)
            .build()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn spec(granularity: Granularity, zone: &str, group_by: Vec<Dimension>) -> ReportSpec {
        ReportSpec {
            granularity,
            zone: TimeZone::get(zone).unwrap(),
            from: at("2026-03-28T23:00:00Z"),
            to: at("2026-03-30T22:00:00Z"),
            group_by,
            line_items: None,
            placements: None,
            countries: None,
            regions: None,
            devices: None,
        }
    }

    fn row(bucket: &str, line_item: u64, impressions: i64) -> StoredRow {
        StoredRow {
            bucket: at(bucket).as_second(),
            line_item,
            creative: 0,
            placement: 7,
            country: "DE".into(),
            region: "DE-BE".into(),
            device: 1,
            counters: Counters {
                impressions,
                ..Counters::default()
            },
        }
    }

    #[test]
    fn local_days_follow_the_zone_across_a_dst_change() {
        // Berlin moves to summer time on 2026-03-29: that day has 23 hours.
        let spec = spec(Granularity::Day, "Europe/Berlin", vec![Dimension::Campaign]);
        assert_eq!(spec.table(), Granularity::Hour);
        let q = spec.row_query();
        assert!(q.by_line_item && !q.by_placement && !q.by_country);
        let rows = [
            row("2026-03-28T23:00:00Z", 100, 1), // 00:00 on the 29th in Berlin
            row("2026-03-29T21:00:00Z", 101, 2), // 23:00 CEST on the 29th
            row("2026-03-29T22:00:00Z", 100, 4), // 00:00 CEST on the 30th
        ];
        let mut sketch = Hll::new();
        sketch.insert(9);
        let sketches = [(
            SketchKey {
                line_item: 100,
                day: 20_260_329,
            },
            sketch,
        )];
        let report = spec.shape(&dims(), &rows, &sketches);
        assert_eq!(report.rows.len(), 2);
        assert_eq!(
            report.rows[0].start.to_string(),
            "2026-03-29T00:00:00+01:00[Europe/Berlin]"
        );
        assert_eq!(report.rows[0].counters.impressions, 3);
        assert_eq!(report.rows[0].values, vec![Value::Id(10)]);
        assert_eq!(report.rows[0].unique_users, Some(1));
        assert_eq!(
            report.rows[1].start.to_string(),
            "2026-03-30T00:00:00+02:00[Europe/Berlin]"
        );
        assert_eq!(report.rows[1].unique_users, Some(0));
        assert_eq!(report.totals.impressions, 7);
        assert_eq!(report.unique_users, Some(1));
        // Line items 100 and 101 keep their sketches in Berlin: the range's Berlin days.
        let mut scoped = spec.clone();
        scoped.line_items = Some(vec![100, 101]);
        assert_eq!(scoped.sketch_days(&dims()), Some((20_260_329, 20_260_330)));
    }

    #[test]
    fn hours_keep_their_instant_and_supply_rows_have_no_users() {
        let spec = spec(
            Granularity::Hour,
            "Asia/Kolkata",
            vec![Dimension::Publisher, Dimension::Device],
        );
        let q = spec.row_query();
        assert!(q.by_placement && q.by_device && !q.by_line_item);
        let report = spec.shape(&dims(), &[row("2026-03-29T10:00:00Z", 100, 1)], &[]);
        assert_eq!(
            report.rows[0].start.to_string(),
            "2026-03-29T15:30:00+05:30[Asia/Kolkata]"
        );
        assert_eq!(
            report.rows[0].values,
            vec![Value::Id(50), Value::Text("desktop")]
        );
        assert_eq!(report.rows[0].unique_users, None);
        assert_eq!(report.unique_users, None);
    }

    /// Kolkata is 5:30 ahead: its midnight falls inside a UTC hour that starts at 23:30 the day
    /// before, which would have added a row for a day the report did not ask for.
    #[test]
    fn half_hour_zones_start_at_the_first_hour_of_the_asked_day() {
        let mut spec = spec(Granularity::Day, "Asia/Kolkata", vec![]);
        spec.from = at("2026-03-28T18:30:00Z"); // 00:00 on the 29th in Kolkata
        let q = spec.row_query();
        assert_eq!(q.from, at("2026-03-28T19:00:00Z").as_second());
        let rows = [
            row("2026-03-28T19:00:00Z", 100, 2), // 00:30 on the 29th
            row("2026-03-29T17:00:00Z", 100, 3), // 22:30 on the 29th
        ];
        let report = spec.shape(&dims(), &rows, &[]);
        assert_eq!(report.rows.len(), 1);
        assert_eq!(
            report.rows[0].start.to_string(),
            "2026-03-29T00:00:00+05:30[Asia/Kolkata]"
        );
        // A `from` inside a local day starts at the next hour, the first that starts after it.
        spec.from = at("2026-03-29T09:40:00Z"); // 15:10 in Kolkata
        assert_eq!(
            spec.row_query().from,
            at("2026-03-29T10:00:00Z").as_second()
        );
    }

    #[test]
    fn stored_rows_per_report_row_bound_what_can_fold_together() {
        // Hours by creative, placement, country and device: one stored row per report row.
        let detailed = vec![
            Dimension::Creative,
            Dimension::Placement,
            Dimension::Country,
            Dimension::Device,
        ];
        assert_eq!(
            spec(Granularity::Hour, "UTC", detailed).stored_rows_per_row(&dims()),
            Some(1)
        );
        // Berlin's days from UTC hours: 24 a day, 25 on the day the clocks go back.
        let mut days = spec(Granularity::Day, "Europe/Berlin", vec![]);
        assert_eq!(days.stored_rows_per_row(&dims()), Some(24));
        days.to = at("2026-10-26T00:00:00Z");
        assert_eq!(days.stored_rows_per_row(&dims()), Some(25));
        // Line items into campaigns: the largest campaign in scope.
        let mut campaigns = spec(Granularity::Hour, "UTC", vec![Dimension::Campaign]);
        campaigns.line_items = Some(vec![100, 101]);
        assert_eq!(campaigns.stored_rows_per_row(&dims()), Some(2));
        campaigns.line_items = Some(vec![100]);
        assert_eq!(campaigns.stored_rows_per_row(&dims()), Some(1));
        campaigns.group_by.push(Dimension::LineItem);
        campaigns.line_items = Some(vec![100, 101]);
        assert_eq!(campaigns.stored_rows_per_row(&dims()), Some(1));
        // Without a list of line items in scope nothing bounds a campaign's.
        campaigns.group_by = vec![Dimension::Advertiser];
        campaigns.line_items = None;
        assert_eq!(campaigns.stored_rows_per_row(&dims()), None);
        let mut sites = spec(Granularity::Hour, "UTC", vec![Dimension::Site]);
        assert_eq!(sites.stored_rows_per_row(&dims()), None);
        sites.placements = Some(vec![7]);
        assert_eq!(sites.stored_rows_per_row(&dims()), Some(1));
    }

    /// A report holds the stored buckets that start in `[from, to)` and covers
    /// `[ceil(from), ceil(to))`. The `from` used to be floored to its bucket while `to` was
    /// compared with bucket starts: 08:30–09:30 read the 08:00 and 09:00 hours, and the next
    /// report, 09:30–10:30, read the 09:00 hour again.
    #[test]
    fn reports_hold_the_buckets_that_start_in_their_range() {
        let mut hours = spec(Granularity::Hour, "UTC", vec![]);
        hours.from = at("2026-03-29T08:30:00Z");
        hours.to = at("2026-03-29T09:30:00Z");
        let q = hours.row_query();
        assert_eq!(q.table, Granularity::Hour);
        assert_eq!(
            (q.from, q.to),
            (
                at("2026-03-29T09:00:00Z").as_second(),
                at("2026-03-29T10:00:00Z").as_second()
            )
        );
        assert_eq!(
            hours.covered(),
            (at("2026-03-29T09:00:00Z"), at("2026-03-29T10:00:00Z"))
        );
        let mut next = hours.clone();
        next.from = hours.to;
        next.to = at("2026-03-29T10:30:00Z");
        assert_eq!(
            next.row_query().from,
            q.to,
            "adjacent reports share no hour"
        );

        // Aligned bounds are kept as they are; a fraction of a second moves to the next minute.
        let mut minutes = spec(Granularity::Minute, "UTC", vec![]);
        minutes.from = at("2026-03-29T08:00:00Z");
        minutes.to = at("2026-03-29T08:10:00.000001Z");
        assert_eq!(
            minutes.covered(),
            (at("2026-03-29T08:00:00Z"), at("2026-03-29T08:11:00Z"))
        );

        // A range in which no bucket starts is empty.
        hours.to = at("2026-03-29T08:50:00Z");
        assert_eq!(hours.covered().0, hours.covered().1);
        assert_eq!(hours.sketch_days(&dims()), None);
    }

    /// UTC days are read from day rows only when the range is whole UTC days; otherwise from
    /// hour rows, so that a day report is as precise in UTC as in any other zone (it used to
    /// take the whole day rows at both ends).
    #[test]
    fn utc_days_read_day_rows_only_for_whole_days() {
        let mut days = spec(Granularity::Day, "UTC", vec![]);
        days.from = at("2026-03-29T00:00:00Z");
        days.to = at("2026-03-31T00:00:00Z");
        assert_eq!(days.table(), Granularity::Day);
        days.from = at("2026-03-29T10:30:00Z");
        assert_eq!(days.table(), Granularity::Hour);
        let q = days.row_query();
        assert_eq!(q.from, at("2026-03-29T11:00:00Z").as_second());
        // Hour rows fold into their UTC day.
        let rows = [
            row("2026-03-29T11:00:00Z", 100, 1),
            row("2026-03-29T23:00:00Z", 100, 2),
            row("2026-03-30T00:00:00Z", 100, 4),
        ];
        let report = days.shape(&dims(), &rows, &[]);
        let starts: Vec<(String, i64)> = report
            .rows
            .iter()
            .map(|r| (r.start.to_string(), r.counters.impressions))
            .collect();
        assert_eq!(
            starts,
            vec![
                ("2026-03-29T00:00:00+00:00[UTC]".to_owned(), 3),
                ("2026-03-30T00:00:00+00:00[UTC]".to_owned(), 4),
            ]
        );
        assert_eq!(Granularity::parse("hour"), Some(Granularity::Hour));
        assert_eq!(Dimension::parse("line_item"), Some(Dimension::LineItem));
        assert_eq!(Dimension::parse("planet"), None);
    }

    /// Sketches are kept in the advertiser's zone (Berlin here). A day row in another zone's
    /// day would take a Berlin day's users for a New York date: its users are unknown. The
    /// totals take each line item's days in its own zone.
    #[test]
    fn users_are_given_only_on_days_the_sketches_kept() {
        let sketch = |line_item: u64, day: i32, users: std::ops::Range<u64>| {
            let mut hll = Hll::new();
            for user in users {
                hll.insert(user);
            }
            (SketchKey { line_item, day }, hll)
        };
        let sketches = [
            sketch(100, 20_260_328, 0..5),
            sketch(100, 20_260_329, 10..12),
            sketch(100, 20_260_330, 20..27),
            sketch(100, 20_260_331, 30..31),
        ];
        let mut ny = spec(
            Granularity::Day,
            "America/New_York",
            vec![Dimension::LineItem],
        );
        // The 29th in New York: 06:00 on the 29th to 06:00 on the 30th in Berlin.
        ny.from = at("2026-03-29T04:00:00Z");
        ny.to = at("2026-03-30T04:00:00Z");
        ny.line_items = Some(vec![100]);
        assert_eq!(ny.sketch_days(&dims()), Some((20_260_329, 20_260_330)));
        let rows = [row("2026-03-29T10:00:00Z", 100, 1)];
        let kept: Vec<_> = sketches[1..3].to_vec();
        let report = ny.shape(&dims(), &rows, &kept);
        assert_eq!(report.rows.len(), 1);
        assert_eq!(report.rows[0].unique_users, None, "a Berlin day's users");
        assert_eq!(report.unique_users, Some(9), "Berlin's 29th and 30th");
        // Sketches of days outside the range in their own zone are left out of the totals.
        assert_eq!(ny.shape(&dims(), &rows, &sketches).unique_users, Some(9));

        // In Berlin (or a zone with the same days) the rows have them.
        for zone in ["Europe/Berlin", "Europe/Paris"] {
            let mut berlin = ny.clone();
            berlin.zone = TimeZone::get(zone).unwrap();
            berlin.from = at("2026-03-28T23:00:00Z");
            berlin.to = at("2026-03-29T22:00:00Z");
            let report = berlin.shape(&dims(), &rows, &sketches);
            assert_eq!(report.rows[0].unique_users, Some(2), "{zone}");
            assert_eq!(report.unique_users, Some(2), "{zone}");
        }
        // Without a list of line items every zone's days are read, a day either side.
        ny.line_items = None;
        assert_eq!(ny.sketch_days(&dims()), Some((20_260_328, 20_260_331)));
    }

    /// Rows' spend adds up to the totals': each row's exact amount rounded down or up.
    #[test]
    fn rows_spend_adds_up_to_the_totals() {
        let spec = spec(Granularity::Hour, "UTC", vec![]);
        let rows: Vec<StoredRow> = [
            "2026-03-29T01:00:00Z",
            "2026-03-29T02:00:00Z",
            "2026-03-29T03:00:00Z",
        ]
        .into_iter()
        .map(|bucket| {
            let mut r = row(bucket, 100, 1);
            r.counters.cpm_micros = 1_500;
            r
        })
        .collect();
        let report = spec.shape(&dims(), &rows, &[]);
        assert_eq!(report.totals.spend_micros(), 4);
        let spend: Vec<i64> = report.rows.iter().map(|r| r.spend_micros).collect();
        assert_eq!(spend, vec![2, 1, 1]);
    }

    /// By bidder: line item 0 rows split by the bidder in their creative column, direct rows
    /// under bidder 0; their creative column is no creative. Revenue adds up as spend does.
    #[test]
    fn bidders_group_programmatic_rows_and_direct_ones_are_bidder_0() {
        let programmatic = |bidder: u64, cpm: i64| {
            let mut r = row("2026-03-29T01:00:00Z", 0, 0);
            r.creative = bidder;
            r.counters.programmatic_impressions = 1;
            r.counters.programmatic_cpm_micros = cpm;
            r
        };
        let mut direct = row("2026-03-29T01:00:00Z", 100, 3);
        direct.creative = 555;
        let rows = [programmatic(11, 1_600), programmatic(12, 1_600), direct];
        let by_bidder = spec(Granularity::Hour, "UTC", vec![Dimension::Bidder]);
        assert!(by_bidder.row_query().by_creative);
        let report = by_bidder.shape(&dims(), &rows, &[]);
        let got: Vec<(Value, i64, i64)> = report
            .rows
            .iter()
            .map(|r| {
                (
                    r.values[0].clone(),
                    r.counters.impressions,
                    r.revenue_micros,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (Value::Id(0), 3, 0),
                (Value::Id(11), 0, 2),
                (Value::Id(12), 0, 1)
            ]
        );
        assert_eq!(report.totals.programmatic_revenue_micros(), 3);
        let by_creative = spec(Granularity::Hour, "UTC", vec![Dimension::Creative]);
        let creatives: Vec<Value> = by_creative
            .shape(&dims(), &rows, &[])
            .rows
            .into_iter()
            .map(|r| r.values[0].clone())
            .collect();
        assert_eq!(creatives, vec![Value::Id(0), Value::Id(555)]);
    }
}
