//! A shard's counted events: bids and no-bids tallied in memory by row and minute, and written as
//! counter records ([`EventKind::BidsCounted`], [`EventKind::NoBidsCounted`]) when the shard's
//! flusher takes its buffer, so a counted event costs a hash-map update instead of a record.

use rustc_hash::FxHashMap;

use crate::event::{Event, EventKind};
use crate::frame::FRAME_LEN;

/// Rows a shard tallies before they are written into its buffer at once, which keeps the
/// table (and the records it turns into) small whatever the traffic's variety.
pub(crate) const MAX_ROWS: usize = 1024;

/// Buffer bytes the table's records take when drained full.
pub(crate) const MAX_DRAIN_BYTES: usize = MAX_ROWS * FRAME_LEN;

const MINUTE_MICROS: i64 = 60_000_000;

/// What one counter record tallies: everything an aggregate row keeps apart, and the minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Row {
    /// The counter kind.
    kind: EventKind,
    minute_micros: i64,
    line_item: u64,
    creative: u64,
    placement: u64,
    country: [u8; 2],
    region: [u8; 3],
    device: u8,
}

#[derive(Debug, Clone, Copy)]
struct Tally {
    count: u64,
    /// The first counted event's id: callers give each event a random one, so counter records
    /// have distinct ids without this crate drawing any.
    event_id: u128,
}

/// The tallies of one shard, under its append lock. Its map keeps its capacity when drained, so
/// counting allocates nothing in steady state.
#[derive(Debug, Default)]
pub(crate) struct CountTable {
    rows: FxHashMap<Row, Tally>,
}

impl CountTable {
    /// Counts `event` as one of `kind` (its counter kind). Returns `false`, counting nothing,
    /// when the event needs a new row and the table has [`MAX_ROWS`]: drain it first.
    pub(crate) fn add(&mut self, kind: EventKind, event: &Event) -> bool {
        let row = Row {
            kind,
            minute_micros: event.time_micros - event.time_micros.rem_euclid(MINUTE_MICROS),
            line_item: event.line_item,
            creative: event.creative,
            placement: event.placement,
            country: event.country,
            region: event.region,
            device: event.device,
        };
        if let Some(tally) = self.rows.get_mut(&row) {
            tally.count = tally.count.saturating_add(1);
            return true;
        }
        if self.rows.len() >= MAX_ROWS {
            return false;
        }
        self.rows.insert(
            row,
            Tally {
                count: 1,
                event_id: event.event_id,
            },
        );
        true
    }

    /// Appends one framed counter record per row to `buf` and empties the table; returns the
    /// records appended.
    pub(crate) fn drain_into(&mut self, buf: &mut Vec<u8>) -> u64 {
        let mut records = 0;
        for (row, tally) in self.rows.drain() {
            let event = Event {
                kind: row.kind,
                time_micros: row.minute_micros,
                line_item: row.line_item,
                creative: row.creative,
                placement: row.placement,
                user: 0,
                country: row.country,
                region: row.region,
                device: row.device,
                amount_micros: i64::try_from(tally.count).unwrap_or(i64::MAX),
                event_id: tally.event_id,
            };
            buf.extend_from_slice(&event.to_frame());
            records += 1;
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::parse_frame;

    fn bid(time_micros: i64, line_item: u64, event_id: u128) -> Event {
        Event {
            kind: EventKind::Bid,
            time_micros,
            line_item,
            creative: 2,
            placement: 0,
            user: 99,
            country: [0, 0],
            region: [0; 3],
            device: 1,
            amount_micros: 1_500_000,
            event_id,
        }
    }

    fn drained(table: &mut CountTable) -> Vec<Event> {
        let mut buf = Vec::new();
        let records = table.drain_into(&mut buf);
        let mut events = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            let (payload, len) = parse_frame(&buf[pos..]).unwrap();
            events.push(Event::decode(payload).unwrap());
            pos += len;
        }
        assert_eq!(records, events.len() as u64);
        events.sort_by_key(|e| (e.time_micros, e.line_item));
        events
    }

    #[test]
    fn equal_rows_merge_and_minutes_stay_apart() {
        let mut table = CountTable::default();
        let minute = 29_000_000 * MINUTE_MICROS;
        for (i, (at, line_item)) in [
            (minute + 1, 7),
            (minute + MINUTE_MICROS - 1, 7),
            (minute + 5, 8),
            (minute + MINUTE_MICROS, 7),
        ]
        .into_iter()
        .enumerate()
        {
            assert!(table.add(EventKind::BidsCounted, &bid(at, line_item, 10 + i as u128)));
        }
        let events = drained(&mut table);
        let summary: Vec<_> = events
            .iter()
            .map(|e| {
                (
                    e.kind,
                    e.time_micros,
                    e.line_item,
                    e.amount_micros,
                    e.event_id,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (EventKind::BidsCounted, minute, 7, 2, 10),
                (EventKind::BidsCounted, minute, 8, 1, 12),
                (EventKind::BidsCounted, minute + MINUTE_MICROS, 7, 1, 13),
            ]
        );
        assert!(events.iter().all(|e| e.user == 0 && e.creative == 2));
        assert!(drained(&mut table).is_empty(), "drained once");
    }

    #[test]
    fn minutes_before_1970_start_at_their_own_minute() {
        let mut table = CountTable::default();
        assert!(table.add(EventKind::NoBidsCounted, &bid(-1, 0, 1)));
        assert_eq!(drained(&mut table)[0].time_micros, -MINUTE_MICROS);
    }

    #[test]
    fn a_full_table_takes_only_rows_it_has() {
        let mut table = CountTable::default();
        for line_item in 0..MAX_ROWS as u64 {
            assert!(table.add(EventKind::BidsCounted, &bid(0, line_item, 1)));
        }
        assert!(!table.add(EventKind::BidsCounted, &bid(0, MAX_ROWS as u64, 1)));
        assert!(table.add(EventKind::BidsCounted, &bid(0, 3, 1)));
        let events = drained(&mut table);
        assert_eq!(events.len(), MAX_ROWS);
        assert_eq!(
            events.iter().map(Event::event_count).sum::<u64>(),
            MAX_ROWS as u64 + 1
        );
    }
}
