//! Event aggregation, without I/O: decode and sanitise event-log frames in bulk
//! ([`Ingest`]), drop repeats by event id ([`Seen`]), sum by minute × line item × creative ×
//! placement × country × device and roll up to UTC hours and days ([`Deltas`]), estimate
//! unique users per line item and day ([`Hll`]), and shape stored rows into reports in a
//! time zone ([`ReportSpec`]).
//!
//! Invariants:
//! - Nothing here reads a clock or a database: "now" comes in [`Rules`], the catalog in
//!   [`Dimensions`], stored rows as arguments. The store writes [`Deltas`] in a constant
//!   number of statements; this crate decides what they hold.
//! - An event counts at most once per (event id, kind): [`Seen`] holds every id that can
//!   still repeat, and a run's additions ([`Pending`]) join it only after its commit.
//! - A chunk of frames with any damaged frame is refused whole, so a source can be read again
//!   from the same offset without counting part of it twice.
//! - Money stays integer: spend sums per-mille amounts and per-click amounts separately and
//!   divides once ([`Counters::spend_micros`]).
//! - Invalid traffic (the edge's invalid impressions, clicks and conversions) is counted in
//!   counters of its own, by kind and by reason, and never as an impression, click,
//!   conversion or spend: what pacing and billing read cannot include it.

mod counters;
mod dims;
mod hll;
mod ingest;
mod report;
mod seen;

pub use counters::{COLUMN_COUNT, COLUMNS, Counters};
pub use dims::{AdvertiserDim, Dimensions, DimensionsBuilder, LineItemDim, PlacementDim};
pub use hll::{Hll, PRECISION, REGISTERS, SketchError};
pub use ingest::{
    ChunkSummary, DAY, DEVICES, Deltas, HOUR, Ingest, Invalid, InvalidCounts, MAX_AMOUNT_MICROS,
    MINUTE, RowKey, Rules, SketchKey, hour_start, line_item_totals, local_day,
};
/// The event kinds and the reasons of invalid traffic, as the log defines them.
pub use marquee_eventlog::{Event, EventKind, InvalidReason, bidder_id};
pub use report::{
    Dimension, Granularity, Report, ReportRow, ReportSpec, RowQuery, StoredRow, Value, is_utc,
};
pub use seen::{ENTRY_LEN, Entry, PRUNE_STEP_SECS, Pending, Seen, SeenError, decode_entries};
