//! One aggregation run's work in memory: decode raw frames in bulk, sanitise, drop repeats,
//! and sum what is left by minute × line item × creative × placement × country × region ×
//! device, with
//! unique-user sketches per line item and day. Nothing here touches a database; the result,
//! [`Deltas`], is written by the store in a constant number of statements.

use jiff::Timestamp;
use marquee_eventlog::{Event, EventKind, FrameError, Record, parse_frame};
use rustc_hash::FxHashMap;

use crate::counters::Counters;
use crate::dims::Dimensions;
use crate::hll::Hll;
use crate::seen::{Pending, Seen};

/// Bucket widths in seconds.
pub const MINUTE: i64 = 60;
pub const HOUR: i64 = 3_600;
pub const DAY: i64 = 86_400;

/// The largest amount one event may carry (100,000,000 currency units per mille or per click),
/// defined by the model, which holds line item prices below it when they are written. Anything
/// above is a corrupt or hostile record, and refusing it keeps sums far from overflow.
pub use marquee_model::MAX_AMOUNT_MICROS;

/// Device type codes as the edge writes them: `0` unknown, then the model's `DeviceType` in
/// declaration order plus one.
pub const DEVICES: [&str; 7] = ["", "desktop", "phone", "tablet", "ctv", "other", "console"];

/// The acceptance window for event times, relative to the run's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Now, seconds since the epoch.
    pub now_secs: i64,
    /// Events older than this are dropped (see the manager's dedupe retention).
    pub max_age_secs: i64,
    /// Events stamped further ahead than this (clock skew between edges and manager) are
    /// dropped.
    pub max_future_secs: i64,
    /// How long a tracking token is valid: how much longer a click's or conversion's id must
    /// be remembered than its event (see [`Ingest::event`]).
    pub token_lifetime_secs: i64,
}

/// Why a record was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Invalid {
    /// An intact frame no version writes: empty, or of a known format version but another
    /// length. (Records of a later build are left for an upgraded manager, not dropped.)
    Undecodable,
    TooOld,
    InFuture,
    UnknownLineItem,
    /// Unknown, or belonging to another line item than the event's.
    UnknownCreative,
    UnknownPlacement,
    /// Negative, or above [`MAX_AMOUNT_MICROS`].
    BadAmount,
}

impl Invalid {
    pub const ALL: [Invalid; 7] = [
        Invalid::Undecodable,
        Invalid::TooOld,
        Invalid::InFuture,
        Invalid::UnknownLineItem,
        Invalid::UnknownCreative,
        Invalid::UnknownPlacement,
        Invalid::BadAmount,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Invalid::Undecodable => "undecodable",
            Invalid::TooOld => "too_old",
            Invalid::InFuture => "in_future",
            Invalid::UnknownLineItem => "unknown_line_item",
            Invalid::UnknownCreative => "unknown_creative",
            Invalid::UnknownPlacement => "unknown_placement",
            Invalid::BadAmount => "bad_amount",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Dropped records by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InvalidCounts([u64; 7]);

impl InvalidCounts {
    pub fn get(&self, reason: Invalid) -> u64 {
        self.0[reason.index()]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    fn bump(&mut self, reason: Invalid) {
        self.0[reason.index()] += 1;
    }

    pub fn add(&mut self, other: &InvalidCounts) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
    }
}

/// The dimensions of one aggregate row. `bucket` is the bucket's start in seconds since the
/// epoch (UTC); `country` is two ASCII capitals or `[0, 0]` for unknown; `region` the
/// subdivision code within the country (one to three ASCII capitals or digits, `0`-padded; all
/// `0` when unknown, always so when the country is); `device` a [`DEVICES`] index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub line_item: u64,
    pub bucket: i64,
    pub creative: u64,
    pub placement: u64,
    pub country: [u8; 2],
    pub region: [u8; 3],
    pub device: u8,
}

impl RowKey {
    /// The country as text, empty when unknown.
    pub fn country_str(&self) -> &str {
        std::str::from_utf8(&self.country)
            .ok()
            .filter(|c| *c != "\0\0")
            .unwrap_or("")
    }

    /// The region as ISO 3166-2 (`US-CA`), empty when unknown.
    pub fn region_code(&self) -> String {
        let subdivision = self.region.split(|&b| b == 0).next().unwrap_or(&[]);
        match (self.country_str(), std::str::from_utf8(subdivision)) {
            ("", _) | (_, Ok("") | Err(_)) => String::new(),
            (country, Ok(subdivision)) => format!("{country}-{subdivision}"),
        }
    }

    fn rebucket(mut self, width: i64) -> RowKey {
        self.bucket -= self.bucket.rem_euclid(width);
        self
    }
}

/// A unique-users sketch: one line item, one day in its advertiser's time zone, as the
/// number `yyyymmdd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SketchKey {
    pub line_item: u64,
    pub day: i32,
}

/// What one chunk of frames held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkSummary {
    /// Records read (counted or dropped), up to [`newer_at`](Self::newer_at) if set.
    pub records: usize,
    /// Where in the chunk (bytes from its start) the first record a later build wrote begins:
    /// it and everything after it are left unread, for an upgraded manager to count.
    pub newer_at: Option<usize>,
    /// The latest event time in the chunk (µs), for the source's watermark; `None` if it held
    /// no decodable event.
    pub max_time_micros: Option<i64>,
}

/// A run's aggregation in progress. Feed it chunks with [`frames`](Self::frames) (or events
/// with [`event`](Self::event)), then take the [`Deltas`].
#[derive(Debug)]
pub struct Ingest<'a> {
    dims: &'a Dimensions,
    seen: &'a Seen,
    rules: Rules,
    pending: Pending,
    minutes: FxHashMap<RowKey, Counters>,
    users: FxHashMap<SketchKey, Hll>,
    /// (zone, minute) → local day, so that time zone arithmetic runs once per minute.
    days: FxHashMap<(u16, i64), i32>,
    invalid: InvalidCounts,
    duplicates: u64,
    accepted: u64,
    payloads: Vec<(usize, usize)>,
    samples: Vec<(i32, Vec<u8>)>,
}

/// A run's result, ready for the store.
#[derive(Debug, Default)]
pub struct Deltas {
    /// Sorted by key, as are `hours` and `days`.
    pub minutes: Vec<(RowKey, Counters)>,
    /// The same counts in UTC hour buckets.
    pub hours: Vec<(RowKey, Counters)>,
    /// The same counts in UTC day buckets.
    pub days: Vec<(RowKey, Counters)>,
    /// Hourly totals per line item: keys with only `line_item` and `bucket` set.
    pub line_item_hours: Vec<(RowKey, Counters)>,
    /// This run's sketches, to be merged into the stored ones.
    pub sketches: Vec<(SketchKey, Hll)>,
    /// The ids counted by this run (to store, and to apply to [`Seen`] after commit).
    pub seen: Pending,
    /// Totals per line item (for pacing).
    pub per_line_item: FxHashMap<u64, Counters>,
    pub accepted: u64,
    pub duplicates: u64,
    pub invalid: InvalidCounts,
    /// The sample records read ([`Record::Sample`]), in log order: each one's UTC day (days
    /// since 1970-01-01) and body, not read here (the forecast's encoding). Their times pass
    /// the same window as events'; they are not in `accepted`.
    pub samples: Vec<(i32, Vec<u8>)>,
}

impl<'a> Ingest<'a> {
    pub fn new(dims: &'a Dimensions, seen: &'a Seen, rules: Rules) -> Ingest<'a> {
        Ingest {
            dims,
            seen,
            rules,
            pending: Pending::default(),
            minutes: FxHashMap::default(),
            users: FxHashMap::default(),
            days: FxHashMap::default(),
            invalid: InvalidCounts::default(),
            duplicates: 0,
            accepted: 0,
            payloads: Vec::new(),
            samples: Vec::new(),
        }
    }

    /// Aggregates a chunk of whole frames. Every frame is checked before any is counted: a
    /// chunk with a damaged frame is refused whole (nothing counted), so its source can be
    /// read again from the same offset. Reading stops before the first record a later build
    /// wrote
    /// ([`from_newer_writer`](marquee_eventlog::DecodeError::from_newer_writer)): dropping it would lose an event (perhaps a
    /// billing) that the upgraded manager can count.
    pub fn frames(&mut self, bytes: &[u8]) -> Result<ChunkSummary, FrameError> {
        self.payloads.clear();
        let mut pos = 0;
        while pos < bytes.len() {
            let (payload, len) = parse_frame(&bytes[pos..])?;
            self.payloads.push((pos + 4, payload.len()));
            pos += len;
        }
        let mut summary = ChunkSummary::default();
        let payloads = std::mem::take(&mut self.payloads);
        for &(start, len) in &payloads {
            match Record::decode(&bytes[start..start + len]) {
                Ok(Record::Event(event)) => {
                    summary.max_time_micros = Some(
                        summary
                            .max_time_micros
                            .map_or(event.time_micros, |t| t.max(event.time_micros)),
                    );
                    self.event(&event);
                }
                Ok(Record::Sample { time_micros, body }) => self.sample(time_micros, body),
                Err(error) if error.from_newer_writer() => {
                    // The frame starts at its length prefix, 4 bytes before the payload.
                    summary.newer_at = Some(start - 4);
                    break;
                }
                Err(_) => self.invalid.bump(Invalid::Undecodable),
            }
            summary.records += 1;
        }
        self.payloads = payloads;
        Ok(summary)
    }

    /// Sanitises, dedupes and counts one event.
    pub fn event(&mut self, event: &Event) {
        match self.key(event) {
            Ok(key) => {
                let secs = event.time_micros.div_euclid(1_000_000);
                // A click mints a conversion token valid a token lifetime from then, and a
                // repeated click (its own token still valid) mints another: an id that was
                // clicked or converted can see a conversion up to a lifetime later than any
                // other callback. It is remembered as if its event were that much later.
                let remember_from = match event.kind {
                    EventKind::Click | EventKind::Conversion => {
                        secs.saturating_add(self.rules.token_lifetime_secs)
                    }
                    _ => secs,
                };
                // Only callbacks can repeat; deduping the rest would only grow the seen set.
                if event.event_id != 0
                    && event.kind.may_repeat()
                    && self.seen.check_and_add(
                        &mut self.pending,
                        event.event_id,
                        event.kind,
                        remember_from,
                    )
                {
                    self.duplicates += 1;
                    return;
                }
                let counters = self.minutes.entry(key).or_default();
                if event.kind == EventKind::ProgrammaticAuction {
                    counters.record_auction(event.line_item, key.creative != 0);
                } else {
                    counters.record(event.kind, event.amount_micros);
                }
                // Users are counted on what was served and paid for: never on invalid
                // traffic, whose users a crawler or a data centre would inflate.
                if event.user != 0
                    && matches!(event.kind, EventKind::Impression | EventKind::Billing)
                    && let Some(li) = self.dims.line_item(key.line_item)
                {
                    let day = self.local_day(li.zone, key.bucket);
                    self.users
                        .entry(SketchKey {
                            line_item: key.line_item,
                            day,
                        })
                        .or_default()
                        .insert(event.user);
                }
                self.accepted += 1;
            }
            Err(reason) => self.invalid.bump(reason),
        }
    }

    /// Keeps a sample record for the store, or counts why it is dropped.
    pub fn sample(&mut self, time_micros: i64, body: &[u8]) {
        match self.in_window(time_micros.div_euclid(1_000_000)) {
            Ok(secs) => {
                // Days since 1970 fit an i32 for any second jiff can represent.
                let day = i32::try_from(secs.div_euclid(DAY)).unwrap_or(i32::MAX);
                self.samples.push((day, body.to_vec()));
            }
            Err(reason) => self.invalid.bump(reason),
        }
    }

    /// The second, if it is neither too old nor too far ahead for this run.
    fn in_window(&self, secs: i64) -> Result<i64, Invalid> {
        if secs < self.rules.now_secs.saturating_sub(self.rules.max_age_secs) {
            return Err(Invalid::TooOld);
        }
        if secs
            > self
                .rules
                .now_secs
                .saturating_add(self.rules.max_future_secs)
        {
            return Err(Invalid::InFuture);
        }
        Ok(secs)
    }

    /// The row an event counts in, or why it is dropped.
    fn key(&self, e: &Event) -> Result<RowKey, Invalid> {
        let secs = self.in_window(e.time_micros.div_euclid(1_000_000))?;
        if !(0..=MAX_AMOUNT_MICROS).contains(&e.amount_micros) {
            return Err(Invalid::BadAmount);
        }
        // A no-bid names no line item, nor does invalid traffic refused before an ad was
        // decided (an untokened image tag on a placement that refuses them); a loss's and a
        // no-bid's `creative` is a reason code. An invalid event's amount is its reason code,
        // within the amount check above.
        //
        // Programmatic demand has no line item either: an auction record's `line_item` is its
        // outcome, and its rows (an impression's too) hold the bidder's id where a line item's
        // hold the creative, as do the invalid events of a programmatic impression. Bidder ids
        // are names hashed on the edge: there is no list to check them against.
        let programmatic = matches!(
            e.kind,
            EventKind::ProgrammaticAuction | EventKind::ProgrammaticImpression
        );
        let line_item = match (e.kind, e.line_item) {
            _ if programmatic => 0,
            (EventKind::NoBid | EventKind::NoBidsCounted, 0) => 0,
            (kind, 0) if kind.is_invalid() => 0,
            (_, id) if self.dims.line_item(id).is_some() => id,
            _ => return Err(Invalid::UnknownLineItem),
        };
        let creative = match e.kind {
            EventKind::Loss | EventKind::NoBid | EventKind::NoBidsCounted => 0,
            _ if e.creative == 0 => 0,
            _ if line_item == 0 && (programmatic || e.kind.is_invalid()) => e.creative,
            _ if self.dims.creative(e.creative) == Some(line_item) => e.creative,
            _ => return Err(Invalid::UnknownCreative),
        };
        if programmatic && e.placement == 0 {
            return Err(Invalid::UnknownPlacement);
        }
        if e.placement != 0 && self.dims.placement(e.placement).is_none() {
            return Err(Invalid::UnknownPlacement);
        }
        let country = if e.country.iter().all(u8::is_ascii_uppercase) {
            e.country
        } else {
            [0, 0]
        };
        let region = if country != [0, 0] && is_subdivision(e.region) {
            e.region
        } else {
            [0; 3]
        };
        let device = if usize::from(e.device) < DEVICES.len() {
            e.device
        } else {
            0
        };
        Ok(RowKey {
            line_item,
            bucket: secs - secs.rem_euclid(MINUTE),
            creative,
            placement: e.placement,
            country,
            region,
            device,
        })
    }

    fn local_day(&mut self, zone: u16, minute: i64) -> i32 {
        let dims = self.dims;
        *self
            .days
            .entry((zone, minute))
            .or_insert_with(|| local_day(dims.zone(zone), minute))
    }

    /// Ends the run: sorted minute rows, their hour and day roll-ups, sketches and counts.
    pub fn finish(self) -> Deltas {
        let mut per_line_item: FxHashMap<u64, Counters> = FxHashMap::default();
        for (key, counters) in &self.minutes {
            per_line_item
                .entry(key.line_item)
                .or_default()
                .add(counters);
        }
        let roll = |width: i64| {
            let mut rolled: FxHashMap<RowKey, Counters> = FxHashMap::default();
            for (key, counters) in &self.minutes {
                rolled.entry(key.rebucket(width)).or_default().add(counters);
            }
            sorted(rolled)
        };
        let hours = roll(HOUR);
        let days = roll(DAY);
        let line_item_hours = line_item_totals(&hours);
        let mut sketches: Vec<(SketchKey, Hll)> = self.users.into_iter().collect();
        sketches.sort_unstable_by_key(|(key, _)| *key);
        Deltas {
            minutes: sorted(self.minutes),
            hours,
            days,
            line_item_hours,
            sketches,
            seen: self.pending,
            per_line_item,
            accepted: self.accepted,
            duplicates: self.duplicates,
            invalid: self.invalid,
            samples: self.samples,
        }
    }
}

/// Rows summed per line item and bucket (the other dimensions zeroed), sorted.
pub fn line_item_totals(rows: &[(RowKey, Counters)]) -> Vec<(RowKey, Counters)> {
    let mut totals: FxHashMap<RowKey, Counters> = FxHashMap::default();
    for (key, counters) in rows {
        let total = RowKey {
            line_item: key.line_item,
            bucket: key.bucket,
            creative: 0,
            placement: 0,
            country: [0, 0],
            region: [0; 3],
            device: 0,
        };
        totals.entry(total).or_default().add(counters);
    }
    sorted(totals)
}

/// Whether `region` is a subdivision code as ISO 3166-2 writes them: one to three ASCII
/// capitals or digits, then `0` padding.
fn is_subdivision(region: [u8; 3]) -> bool {
    let len = region.iter().take_while(|&&b| b != 0).count();
    len > 0
        && region[..len]
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        && region[len..].iter().all(|&b| b == 0)
}

fn sorted(rows: FxHashMap<RowKey, Counters>) -> Vec<(RowKey, Counters)> {
    let mut rows: Vec<(RowKey, Counters)> = rows.into_iter().collect();
    rows.sort_unstable_by_key(|(key, _)| *key);
    rows
}

/// The start of the UTC hour `at` falls in: where its hour row begins.
pub fn hour_start(at: Timestamp) -> Timestamp {
    let second = at.as_second();
    // Going back less than an hour from a valid timestamp stays within jiff's range.
    Timestamp::from_second(second - second.rem_euclid(HOUR)).unwrap_or(at)
}

/// The local date of an instant (seconds since the epoch) as `yyyymmdd`.
pub fn local_day(zone: &jiff::tz::TimeZone, secs: i64) -> i32 {
    let date = Timestamp::from_second(secs)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_zoned(zone.clone())
        .date();
    i32::from(date.year()) * 10_000 + i32::from(date.month()) * 100 + i32::from(date.day())
}

#[cfg(test)]
mod tests {
    use super::*;
    use marquee_eventlog::{PAYLOAD_LEN, RECORD_VERSION};

    const NOW: i64 = 1_790_000_000; // 2026-09-21T14:13:20Z

    fn dims() -> Dimensions {
        Dimensions::builder()
            .advertiser(1, "America/New_York", "USD")
            .campaign(10, 1)
            .line_item(100, 10)
            .line_item(200, 10)
            .creative(1000, 100)
            .creative(2000, 200)
            .site(5, 50)
            .placement(7, 5)
            .build()
    }

    fn rules() -> Rules {
        Rules {
            now_secs: NOW,
            max_age_secs: 3_600,
            max_future_secs: 300,
            token_lifetime_secs: 3_600,
        }
    }

    fn event(kind: EventKind, id: u128, secs: i64) -> Event {
        Event {
            kind,
            time_micros: secs * 1_000_000 + 123,
            line_item: 100,
            creative: 1000,
            placement: 7,
            user: 42,
            country: *b"DE",
            region: *b"BE\0",
            device: 2,
            amount_micros: if kind == EventKind::Impression {
                2_000_000
            } else {
                0
            },
            event_id: id,
        }
    }

    fn frames(events: &[Event]) -> Vec<u8> {
        events.iter().flat_map(|e| e.to_frame()).collect()
    }

    /// `payload` in an intact frame.
    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut framed = (payload.len() as u32).to_le_bytes().to_vec();
        framed.extend_from_slice(payload);
        framed.extend_from_slice(&crc32fast::hash(&framed).to_le_bytes());
        framed
    }

    #[test]
    fn records_of_a_later_build_stop_the_chunk_unread() {
        let dims = dims();
        let seen = Seen::default();
        let t = NOW - 100;
        let mut version_2 = event(EventKind::Billing, 2, t).encode().to_vec();
        version_2[0] = RECORD_VERSION + 1;
        version_2.extend_from_slice(&[0; 8]);
        let mut new_kind = event(EventKind::Billing, 2, t).encode();
        new_kind[1] = 99;
        let version_0 = {
            let mut payload = event(EventKind::Billing, 2, t).encode();
            payload[0] = 0;
            payload
        };
        for (newer, held) in [
            (&version_2[..], true),
            (&new_kind[..], true),
            (&version_0[..], false),
        ] {
            let mut ingest = Ingest::new(&dims, &seen, rules());
            let mut bytes = frames(&[event(EventKind::Impression, 1, t)]);
            let at = bytes.len();
            bytes.extend_from_slice(&framed(newer));
            bytes.extend_from_slice(&frames(&[event(EventKind::Impression, 3, t)]));
            let summary = ingest.frames(&bytes).unwrap();
            let deltas = ingest.finish();
            if held {
                assert_eq!(summary.newer_at, Some(at));
                assert_eq!(summary.records, 1);
                // Nothing after it counts either: it is all read again from `at`.
                assert_eq!((deltas.accepted, deltas.invalid.total()), (1, 0));
            } else {
                // Version 0 was never written: damage, dropped and counted.
                assert_eq!(summary.newer_at, None);
                assert_eq!(summary.records, 3);
                assert_eq!(deltas.accepted, 2);
                assert_eq!(deltas.invalid.get(Invalid::Undecodable), 1);
            }
        }
    }

    #[test]
    fn sample_records_are_kept_by_utc_day_beside_the_events() {
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let sample = |secs: i64, body: &[u8]| {
            let mut payload = vec![RECORD_VERSION, marquee_eventlog::SAMPLE_KIND];
            payload.extend_from_slice(&(secs * 1_000_000).to_le_bytes());
            payload.extend_from_slice(body);
            framed(&payload)
        };
        let t = NOW - 100;
        let mut bytes = frames(&[event(EventKind::Decision, 1, t)]);
        bytes.extend_from_slice(&sample(t, b"first"));
        bytes.extend_from_slice(&sample(NOW - 7_200, b"too old"));
        bytes.extend_from_slice(&sample(NOW + 3_600, b"ahead"));
        bytes.extend_from_slice(&sample(t + 1, &[9; 72 - 10]));
        bytes.extend_from_slice(&frames(&[event(EventKind::Impression, 1, t)]));
        let summary = ingest.frames(&bytes).unwrap();
        assert_eq!((summary.records, summary.newer_at), (6, None));
        let deltas = ingest.finish();
        let day = i32::try_from(NOW / DAY).unwrap();
        assert_eq!(
            deltas.samples,
            vec![(day, b"first".to_vec()), (day, vec![9; 62])]
        );
        assert_eq!(deltas.accepted, 2);
        assert_eq!(deltas.invalid.get(Invalid::TooOld), 1);
        assert_eq!(deltas.invalid.get(Invalid::InFuture), 1);
    }

    #[test]
    fn events_are_summed_per_minute_and_rolled_up() {
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let t = NOW - 100;
        let summary = ingest
            .frames(&frames(&[
                event(EventKind::Decision, 1, t),
                event(EventKind::Impression, 1, t + 1),
                event(EventKind::Impression, 2, t - 60),
                event(EventKind::Click, 1, t + 2),
            ]))
            .unwrap();
        assert_eq!(summary.records, 4);
        assert_eq!(summary.max_time_micros, Some((t + 2) * 1_000_000 + 123));
        let deltas = ingest.finish();
        assert_eq!(deltas.accepted, 4);
        assert_eq!(deltas.minutes.len(), 2, "two minutes");
        let minute = t - t.rem_euclid(60);
        let (key, counters) = deltas
            .minutes
            .iter()
            .find(|(k, _)| k.bucket == minute)
            .unwrap();
        assert_eq!(key.country_str(), "DE");
        assert_eq!(key.region_code(), "DE-BE");
        assert_eq!(
            (counters.decisions, counters.impressions, counters.clicks),
            (1, 1, 1)
        );
        assert_eq!(deltas.hours.len(), 1);
        assert_eq!(deltas.line_item_hours.len(), 1);
        assert_eq!(deltas.line_item_hours[0].1.impressions, 2);
        assert_eq!(deltas.line_item_hours[0].0.placement, 0);
        assert_eq!(deltas.hours[0].1.impressions, 2);
        assert_eq!(deltas.hours[0].0.bucket % 3_600, 0);
        assert_eq!(deltas.days[0].0.bucket % 86_400, 0);
        assert_eq!(deltas.per_line_item[&100].spend_micros(), 4_000);
        // One user, one day (in New York: 2026-09-21).
        assert_eq!(deltas.sketches.len(), 1);
        assert_eq!(deltas.sketches[0].0.day, 20_260_921);
        assert_eq!(deltas.sketches[0].1.estimate(), 1);
    }

    /// Counter records count as many bids and no-bids as they say, beside single records, and
    /// are checked like them: a counted no-bid's reason leaves the row, a counted bid needs a
    /// known line item. The rows' totals are the log's.
    #[test]
    fn counter_records_count_their_events() {
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let t = NOW - 100;
        let no_bid = |kind, amount_micros| Event {
            line_item: 0,
            creative: 500,
            user: 0,
            amount_micros,
            ..event(kind, 0, t)
        };
        let counted_bids = |line_item, amount_micros| Event {
            line_item,
            user: 0,
            amount_micros,
            ..event(EventKind::BidsCounted, 0, t)
        };
        let log = [
            Event {
                amount_micros: 1_500_000,
                ..event(EventKind::Bid, 1, t)
            },
            counted_bids(100, 41),
            counted_bids(100, 8),
            no_bid(EventKind::NoBid, 0),
            no_bid(EventKind::NoBidsCounted, 6),
        ];
        ingest.frames(&frames(&log)).unwrap();
        ingest.event(&counted_bids(999, 5));
        let deltas = ingest.finish();
        assert_eq!(deltas.accepted, 5);
        assert_eq!(deltas.invalid.get(Invalid::UnknownLineItem), 1);
        let total = |rows: &[(RowKey, Counters)]| {
            rows.iter().fold(Counters::default(), |mut sum, (_, c)| {
                sum.add(c);
                sum
            })
        };
        for rows in [&deltas.minutes, &deltas.hours, &deltas.days] {
            let sum = total(rows);
            assert_eq!((sum.bids, sum.no_bids), (50, 7));
            assert_eq!(sum.spend_micros(), 0, "bids carry no money");
        }
        let log_bids: u64 = log
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Bid | EventKind::BidsCounted))
            .map(Event::event_count)
            .sum();
        assert_eq!(log_bids, 50);
        let no_bid_rows: Vec<_> = deltas
            .minutes
            .iter()
            .filter(|(_, c)| c.no_bids > 0)
            .collect();
        assert_eq!(
            no_bid_rows.len(),
            1,
            "one row for single and counted no-bids"
        );
        assert_eq!(
            (no_bid_rows[0].0.line_item, no_bid_rows[0].0.creative),
            (0, 0)
        );
        assert!(deltas.sketches.is_empty(), "no users from bids");
    }

    /// An auction's records (one per bidder called) and its impression count on line item 0
    /// under the bidder's id; a repeated beacon counts once; a record without a placement is
    /// dropped.
    #[test]
    fn programmatic_demand_counts_by_bidder() {
        use marquee_eventlog::{auction, bidder_id};
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let t = NOW - 100;
        let (a, b) = (bidder_id("a"), bidder_id("b"));
        let record = |bidder: u64, outcome: u64, amount_micros: i64| Event {
            line_item: outcome,
            creative: bidder,
            amount_micros,
            ..event(EventKind::ProgrammaticAuction, 0, t)
        };
        let impression = Event {
            line_item: 0,
            creative: a,
            amount_micros: 2_700_000,
            ..event(EventKind::ProgrammaticImpression, 77, t + 1)
        };
        ingest
            .frames(&frames(&[
                record(
                    a,
                    auction::outcome(auction::AUCTION | auction::WON, 1),
                    2_700_000,
                ),
                record(b, auction::outcome(auction::TIMED_OUT, 0), 0),
                impression,
                impression,
                Event {
                    placement: 0,
                    ..record(a, auction::AUCTION, 0)
                },
            ]))
            .unwrap();
        let deltas = ingest.finish();
        assert_eq!((deltas.accepted, deltas.duplicates), (3, 1));
        assert_eq!(deltas.invalid.get(Invalid::UnknownPlacement), 1);
        let row = |bidder: u64| {
            deltas
                .minutes
                .iter()
                .find(|(k, _)| k.creative == bidder)
                .map(|(k, c)| (k.line_item, k.placement, *c))
                .unwrap()
        };
        let (line_item, placement, of_a) = row(a);
        assert_eq!((line_item, placement), (0, 7));
        assert_eq!(
            (
                of_a.programmatic_auctions,
                of_a.programmatic_requests,
                of_a.programmatic_bids,
                of_a.programmatic_wins,
                of_a.programmatic_impressions,
                of_a.programmatic_revenue_micros()
            ),
            (1, 1, 1, 1, 1, 2_700)
        );
        let (_, _, of_b) = row(b);
        assert_eq!(
            (
                of_b.programmatic_auctions,
                of_b.programmatic_requests,
                of_b.programmatic_timeouts
            ),
            (0, 1, 1)
        );
        assert!(deltas.sketches.is_empty(), "users are a line item's");
    }

    #[test]
    fn invalid_records_are_dropped_and_counted_by_reason() {
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let t = NOW;
        // A payload one byte short: no build writes it.
        let short = &event(EventKind::Decision, 9, t).encode()[..PAYLOAD_LEN - 1];
        let mut bytes = frames(&[
            event(EventKind::Impression, 1, t - 7_200),
            event(EventKind::Impression, 2, t + 3_600),
            Event {
                line_item: 555,
                ..event(EventKind::Impression, 3, t)
            },
            Event {
                creative: 2000,
                ..event(EventKind::Impression, 4, t)
            },
            Event {
                placement: 8,
                ..event(EventKind::Impression, 5, t)
            },
            Event {
                amount_micros: -1,
                ..event(EventKind::Impression, 6, t)
            },
            Event {
                country: [b'd', 0xFF],
                region: [b'b', 0xFF, 0],
                device: 77,
                ..event(EventKind::Impression, 7, t)
            },
            // A no-bid has no line item and a reason code for a creative.
            Event {
                line_item: 0,
                creative: 8,
                ..event(EventKind::NoBid, 8, t)
            },
        ]);
        bytes.extend_from_slice(&framed(short));
        ingest.frames(&bytes).unwrap();
        let deltas = ingest.finish();
        for reason in Invalid::ALL {
            assert_eq!(deltas.invalid.get(reason), 1, "{reason:?}");
        }
        assert_eq!(deltas.accepted, 2);
        let sanitised = deltas
            .minutes
            .iter()
            .find(|(k, _)| k.line_item == 100)
            .unwrap()
            .0;
        assert_eq!(
            (sanitised.country, sanitised.region, sanitised.device),
            ([0, 0], [0; 3], 0)
        );
        let no_bid = deltas
            .minutes
            .iter()
            .find(|(k, _)| k.line_item == 0)
            .unwrap();
        assert_eq!((no_bid.0.creative, no_bid.1.no_bids), (0, 1));
    }

    /// Invalid traffic is counted, by kind and by reason, also without a line item or a
    /// creative (refused before an ad was decided); its reason code is no bad amount, it adds
    /// no spend, no unique user, and each record counts (the edge logs each invalid request
    /// once, so nothing is deduplicated). An unknown line item or a negative code is still
    /// dropped.
    #[test]
    fn invalid_traffic_is_counted_by_reason_without_spend_or_users() {
        use marquee_eventlog::InvalidReason;
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let t = NOW - 30;
        let code = |reason: InvalidReason| i64::from(reason.code());
        let invalid = |kind: EventKind, id: u128, reason: i64| Event {
            amount_micros: reason,
            user: 77,
            ..event(kind, id, t)
        };
        for e in [
            invalid(
                EventKind::InvalidImpression,
                1,
                code(InvalidReason::Crawler),
            ),
            // The same id again: counted again.
            invalid(
                EventKind::InvalidImpression,
                1,
                code(InvalidReason::Crawler),
            ),
            invalid(EventKind::InvalidClick, 2, code(InvalidReason::TooFast)),
            invalid(
                EventKind::InvalidConversion,
                3,
                code(InvalidReason::RepeatConversion),
            ),
            Event {
                line_item: 0,
                creative: 0,
                ..invalid(
                    EventKind::InvalidImpression,
                    4,
                    code(InvalidReason::UntokenedDisabled),
                )
            },
            Event {
                creative: 0,
                ..invalid(EventKind::InvalidClick, 5, code(InvalidReason::Datacenter))
            },
            // Dropped as any event would be.
            Event {
                line_item: 555,
                ..invalid(
                    EventKind::InvalidImpression,
                    6,
                    code(InvalidReason::Crawler),
                )
            },
            invalid(EventKind::InvalidImpression, 7, -1),
        ] {
            ingest.event(&e);
        }
        let deltas = ingest.finish();
        assert_eq!(deltas.accepted, 6);
        assert_eq!(deltas.duplicates, 0);
        assert_eq!(deltas.invalid.get(Invalid::UnknownLineItem), 1);
        assert_eq!(deltas.invalid.get(Invalid::BadAmount), 1);
        assert!(deltas.seen.is_empty(), "invalid events are not remembered");
        assert!(deltas.sketches.is_empty(), "no users from invalid traffic");

        let served = &deltas.per_line_item[&100];
        assert_eq!(
            (
                served.invalid_impressions,
                served.invalid_clicks,
                served.invalid_conversions
            ),
            (2, 2, 1)
        );
        assert_eq!(served.invalid(InvalidReason::Crawler), 2);
        assert_eq!(served.invalid(InvalidReason::TooFast), 1);
        assert_eq!(served.invalid(InvalidReason::Datacenter), 1);
        assert_eq!(served.invalid(InvalidReason::RepeatConversion), 1);
        assert_eq!(
            (served.impressions, served.clicks, served.conversions),
            (0, 0, 0)
        );
        assert_eq!(served.spend_micros(), 0);
        let refused = deltas
            .minutes
            .iter()
            .find(|(k, _)| k.line_item == 0)
            .unwrap();
        assert_eq!((refused.0.creative, refused.0.placement), (0, 7));
        assert_eq!(refused.1.invalid_impressions, 1);
        assert_eq!(refused.1.invalid(InvalidReason::UntokenedDisabled), 1);
        // Rolled up like any counter.
        let hour_total: i64 = deltas.hours.iter().map(|(_, c)| c.invalid_total()).sum();
        assert_eq!(hour_total, 6);
        assert_eq!(deltas.line_item_hours.len(), 2);
    }

    /// Prices a line item may have are counted: a premium CPM in rupiah (1,500,000 IDR, about
    /// $90, which the old limit of 1,000,000 units dropped with its impression), the highest
    /// price, and a clearing price ten times it (the largest bid multiplier); an amount above
    /// the limit is still a corrupt record.
    #[test]
    fn every_price_a_line_item_may_have_is_counted() {
        use marquee_model::MAX_PRICE_MICROS;
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let t = NOW;
        let rupiah = 1_500_000 * 1_000_000;
        for (id, kind, amount) in [
            (1, EventKind::Impression, rupiah),
            (2, EventKind::Impression, MAX_PRICE_MICROS),
            (3, EventKind::Billing, MAX_PRICE_MICROS * 10),
            (4, EventKind::Billing, MAX_AMOUNT_MICROS + 1),
        ] {
            ingest.event(&Event {
                amount_micros: amount,
                ..event(kind, id, t)
            });
        }
        let deltas = ingest.finish();
        assert_eq!(deltas.accepted, 3);
        assert_eq!(deltas.invalid.get(Invalid::BadAmount), 1);
        let counted = &deltas.per_line_item[&100];
        assert_eq!((counted.impressions, counted.billings), (2, 1));
        assert_eq!(
            counted.cpm_micros,
            rupiah + MAX_PRICE_MICROS + MAX_PRICE_MICROS * 10
        );
    }

    #[test]
    fn repeats_count_once_within_a_run_and_across_runs() {
        let dims = dims();
        let mut seen = Seen::default();
        let t = NOW;
        let mut first = Ingest::new(&dims, &seen, rules());
        for e in [
            event(EventKind::Impression, 1, t),
            event(EventKind::Impression, 1, t + 1),
            event(EventKind::Impression, 0, t),
            event(EventKind::Impression, 0, t),
        ] {
            first.event(&e);
        }
        let deltas = first.finish();
        assert_eq!(
            (deltas.accepted, deltas.duplicates),
            (3, 1),
            "id 0 is never deduped"
        );
        seen.apply(deltas.seen);
        let mut second = Ingest::new(&dims, &seen, rules());
        second.event(&event(EventKind::Impression, 1, t + 2));
        second.event(&event(EventKind::Click, 1, t + 2));
        let deltas = second.finish();
        assert_eq!((deltas.accepted, deltas.duplicates), (1, 1));
    }

    /// Impression at t, click at t + 10, conversion at t + 20; the click's URL followed again
    /// at t + 3,500 (its token still valid) mints a new conversion token, whose conversion at
    /// t + 4,400 is a repeat. The manager's cutoff then is its watermark less a lifetime and
    /// the skew (here 4,400 − 3,600 − 300 = 500): the id must still be known.
    #[test]
    fn a_conversion_is_remembered_as_long_as_a_repeated_click_can_mint_another() {
        let dims = dims();
        let mut seen = Seen::default();
        let t = NOW - 5_000;
        let rules = Rules {
            max_age_secs: 86_400,
            ..rules()
        };
        let mut first = Ingest::new(&dims, &seen, rules);
        for (kind, at) in [
            (EventKind::Impression, t),
            (EventKind::Click, t + 10),
            (EventKind::Conversion, t + 20),
        ] {
            first.event(&event(kind, 1, at));
        }
        let deltas = first.finish();
        assert_eq!(deltas.accepted, 3);
        seen.apply(deltas.seen);
        seen.prune(t + 4_400 - rules.token_lifetime_secs - rules.max_future_secs);
        let mut later = Ingest::new(&dims, &seen, rules);
        later.event(&event(EventKind::Conversion, 1, t + 4_400));
        let deltas = later.finish();
        assert_eq!((deltas.accepted, deltas.duplicates), (0, 1));
    }

    #[test]
    fn only_callback_kinds_are_deduped() {
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        for kind in EventKind::ALL {
            let id = u128::from(kind.code());
            ingest.event(&event(kind, id, NOW));
            ingest.event(&event(kind, id, NOW));
        }
        let deltas = ingest.finish();
        let repeating = EventKind::ALL.iter().filter(|k| k.may_repeat()).count() as u64;
        assert_eq!(deltas.duplicates, repeating);
        assert_eq!(
            deltas.seen.len() as u64,
            repeating,
            "only callbacks are remembered"
        );
    }

    #[test]
    fn a_damaged_chunk_is_refused_whole() {
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        let mut bytes = frames(&[
            event(EventKind::Impression, 1, NOW),
            event(EventKind::Click, 1, NOW),
        ]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(matches!(
            ingest.frames(&bytes),
            Err(FrameError::CrcMismatch { .. })
        ));
        assert_eq!(ingest.finish().accepted, 0);
    }

    #[test]
    fn a_region_is_a_subdivision_code_of_a_known_country() {
        for (region, valid) in [
            (*b"CA\0", true),
            (*b"ENG", true),
            (*b"75\0", true),
            (*b"B\0\0", true),
            (*b"ca\0", false),
            (*b"B\0E", false),
            (*b"-CA", false),
            ([0; 3], false),
        ] {
            assert_eq!(is_subdivision(region), valid, "{region:?}");
        }
        let dims = dims();
        let seen = Seen::default();
        let mut ingest = Ingest::new(&dims, &seen, rules());
        ingest
            .frames(&frames(&[Event {
                country: [0, 0],
                ..event(EventKind::Impression, 1, NOW)
            }]))
            .unwrap();
        let key = ingest.finish().minutes[0].0;
        assert_eq!((key.region, key.region_code().as_str()), ([0; 3], ""));
    }
}
