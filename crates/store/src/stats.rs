//! The aggregates' side of the store: what an aggregation run writes, what reports and pacing
//! read. A backend implements [`StatsStore`]; every [`Store`](crate::Store) is one.
//!
//! The contract that matters most: [`StatsStore::commit_run`] writes a run's aggregates,
//! sketches, dedupe entries and source checkpoints in **one transaction** with a number of
//! statements that does not depend on how many events or rows the run holds. Rows travel as
//! one bound parameter per table (a JSON array in SQLite), never as one statement per row or
//! per chunk of rows. And the commit is fenced: each checkpoint moves only from the position
//! the run started reading at ([`CheckpointMove`]), so of two runs over the same log bytes
//! (two managers, one of them no longer the active one) only the first to commit counts them.

use std::collections::HashMap;

use async_trait::async_trait;
use jiff::Timestamp;
use marquee_stats::{Counters, Dimensions, Hll, RowKey, RowQuery, Seen, SketchKey, StoredRow};

use crate::StoreError;

/// How far one shard of one source (an edge's log) has been read: the position of the next
/// unread byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The edge's name (`local` for `marquee serve`'s own log).
    pub source: String,
    pub shard: u32,
    pub segment: u64,
    pub offset: u64,
    /// The latest event time read from this shard so far (µs), for the dedupe watermark.
    pub max_event_time_micros: i64,
}

impl Checkpoint {
    /// Where it stands, as a run that starts reading there names it in [`CheckpointMove::from`].
    pub fn position(&self) -> CheckpointPosition {
        CheckpointPosition {
            segment: self.segment,
            offset: self.offset,
            max_event_time_micros: self.max_event_time_micros,
        }
    }
}

/// A stored checkpoint's position: the columns of its row apart from the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPosition {
    pub segment: u64,
    pub offset: u64,
    pub max_event_time_micros: i64,
}

/// One shard's checkpoint as a run moves it: from where the run started reading, to where it
/// stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointMove {
    /// The stored position the run started reading from, exactly as
    /// [`StatsStore::collection_state`] returned it (or as this run's predecessor committed
    /// it); `None`: the shard had no checkpoint yet. The commit moves the checkpoint only if
    /// its row still holds exactly this (for `None`: still does not exist).
    pub from: Option<CheckpointPosition>,
    pub to: Checkpoint,
}

/// What the manager restores at start.
#[derive(Debug, Clone, Default)]
pub struct CollectionState {
    pub checkpoints: Vec<Checkpoint>,
    /// Every stored dedupe entry, merged.
    pub seen: Seen,
}

/// One aggregation run, ready to commit.
#[derive(Debug, Clone, Default)]
pub struct RunWrite {
    /// Added to the stored counters of the same key (UTC minute, hour and day buckets).
    pub minutes: Vec<(RowKey, Counters)>,
    pub hours: Vec<(RowKey, Counters)>,
    pub days: Vec<(RowKey, Counters)>,
    /// Hourly totals per line item (only `line_item` and `bucket` of the key are stored).
    pub line_item_hours: Vec<(RowKey, Counters)>,
    /// Merged into the stored sketch of the same key.
    pub sketches: Vec<(SketchKey, Hll)>,
    /// The run's dedupe entries in their stored form (`Pending::encode`) and their latest
    /// event second.
    pub seen_entries: Vec<u8>,
    pub seen_max_time: i64,
    /// Dedupe rows whose latest event second is below this are deleted.
    pub seen_cutoff_secs: i64,
    /// Minute rows whose bucket starts below this are deleted (retention).
    pub minute_cutoff_secs: i64,
    /// The forecast's sample records the run read, per UTC day (days since 1970-01-01): each
    /// day's records back to back, at most one entry per day.
    pub samples: Vec<(i32, Vec<u8>)>,
    /// Sample of days before this is deleted (the history kept).
    pub sample_cutoff_day: i32,
    /// The positions reached, each with the one it started from; at most one per shard.
    pub checkpoints: Vec<CheckpointMove>,
    /// When the run committed (for `updated_at`).
    pub now: Timestamp,
}

/// What a committed run wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunWritten {
    /// SQL statements executed, `BEGIN` and `COMMIT` included.
    pub statements: u32,
    /// Sketches whose stored form changed.
    pub sketches_changed: usize,
}

/// The aggregates in the manager's database.
#[async_trait]
pub trait StatsStore: Send + Sync {
    /// Every advertiser, campaign, line item, creative, site and placement, whatever its
    /// status, with its parent, and each advertiser's time zone and currency.
    async fn dimensions(&self) -> Result<Dimensions, StoreError>;

    /// The checkpoints of every source and the dedupe entries still stored.
    async fn collection_state(&self) -> Result<CollectionState, StoreError>;

    /// Writes one run in one transaction: moves the checkpoints, adds the counters, merges the
    /// sketches (one SELECT of the touched ones, merged in memory, one upsert), stores the
    /// dedupe entries, prunes dedupe rows and minute rows past their cutoffs. The number of
    /// statements is the same for every run.
    ///
    /// The checkpoint moves are a compare-and-set, checked in the same statement that makes
    /// them: if any shard's row no longer holds the position its [`CheckpointMove::from`]
    /// names (or exists where `from` is `None`), nothing of the run is written and the error
    /// is [`CheckpointMoved`](crate::CheckpointMoved) (in [`StoreError::Backend`], see
    /// [`StoreError::checkpoint_moved`]). On PostgreSQL a commit that meets another
    /// transaction moving the same row waits for it and compares with what it committed. A
    /// run naming a shard twice is refused.
    async fn commit_run(&self, run: RunWrite) -> Result<RunWritten, StoreError>;

    /// Stored rows summed by bucket and the query's grouping columns, in one SELECT.
    async fn report_rows(&self, query: RowQuery) -> Result<Vec<StoredRow>, StoreError> {
        self.report_rows_at_most(query, None).await
    }

    /// [`report_rows`](Self::report_rows) stopping at `limit` rows (any of them): a report
    /// that can tell from that many that it is too large need not load and ship the rest.
    /// Report queries hold a connection for as long as they scan, so only a few run at once
    /// (one on SQLite, leaving the other reader to token lookups; half the pool on
    /// PostgreSQL); one that finds no turn within 2 s is [`StoreError::Busy`].
    async fn report_rows_at_most(
        &self,
        query: RowQuery,
        limit: Option<usize>,
    ) -> Result<Vec<StoredRow>, StoreError>;

    /// The sketches of the line items (all when `None`) for local days `first..=last`
    /// (`yyyymmdd`).
    async fn sketches(
        &self,
        line_items: Option<Vec<u64>>,
        first_day: i32,
        last_day: i32,
    ) -> Result<Vec<(SketchKey, Hll)>, StoreError>;

    /// Delivery per line item (all when `None`) from `since` to `until`, to the minute: whole
    /// UTC days come from day rows, whole hours from hour rows, the rest from minute rows.
    /// `since` is rounded down to its minute, `until` up; a part older than the minute
    /// retention reads as zero, so keep `since` within it or hour-aligned.
    async fn delivery(
        &self,
        line_items: Option<Vec<u64>>,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<HashMap<u64, Counters>, StoreError>;

    /// The forecast's sample of UTC days `first_day..=last_day` (days since 1970-01-01), each
    /// day once with its records back to back, by day.
    async fn samples(
        &self,
        first_day: i32,
        last_day: i32,
    ) -> Result<Vec<(i32, Vec<u8>)>, StoreError>;
}
