//! The sync message between an edge and the manager (`POST /internal/v1/sync`): the edge's
//! lease renewals and releases in, grants and the current pacing controls out. Plain data;
//! the manager answers it in process for `marquee serve`'s own edge and over HTTP (JSON) for
//! remote ones. [`EdgeReport`] is the edge's heartbeat (`POST /internal/v1/edges`), which
//! registers it with the manager's edge registry.

use jiff::Timestamp;
use marquee_model::LineItemId;
use serde::{Deserialize, Serialize};

use crate::{EdgeId, LeaseGrant, PacingOutput, Renewal, Settlement};

/// What an edge sends once per sync interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncRequest {
    pub edge: EdgeId,
    /// The control set the edge applied last; 0 asks for the current one.
    pub control_version: u64,
    /// Leases whose `needs_renewal` is true (or that have no grant yet).
    pub renewals: Vec<Renewal>,
    /// Leases given back (shutdown): the unused part returns at once.
    pub releases: Vec<Renewal>,
    /// Reserved and settled counts per window of decision time that changed since the last
    /// sync.
    #[serde(default)]
    pub settlements: Vec<Settlement>,
}

/// One line item's pacing control as the edge applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlEntry {
    pub line_item: LineItemId,
    pub stopped: bool,
    pub throttle_ppm: u32,
    pub bid_multiplier_permille: u32,
}

impl ControlEntry {
    pub fn new(line_item: LineItemId, output: &PacingOutput) -> ControlEntry {
        ControlEntry {
            line_item,
            stopped: output.stopped,
            throttle_ppm: output.throttle_ppm,
            bid_multiplier_permille: output.bid_multiplier_permille,
        }
    }

    /// The throttle as the engine's probability.
    pub fn throttle(&self) -> f32 {
        crate::controller::throttle_from_ppm(self.throttle_ppm)
    }
}

/// The manager's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncResponse {
    /// Names the manager process (random at its start). An edge that sees it change sends
    /// all its settlement windows again: a restarted manager may have missed the last counts
    /// before its state was persisted.
    #[serde(default)]
    pub manager: u64,
    /// The version of the control set below (or of the one the edge already has).
    pub control_version: u64,
    /// `Some` when the edge's version differs: the whole control set, replacing the edge's
    /// (a line item absent from it runs at full speed). `None`: keep the current one.
    pub controls: Option<Vec<ControlEntry>>,
    /// One per renewal that found a budget, in the renewals' order.
    pub grants: Vec<LeaseGrant>,
    /// Renewals for line items without a budget now (outside the flight, no goal): the edge
    /// keeps such a lease without room.
    pub unbudgeted: Vec<LineItemId>,
}

/// An edge's heartbeat: who it is, where the manager reaches it, and how it is doing. The
/// first one registers the edge; the manager then collects its log from `log_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeReport {
    /// Stable across restarts (configured, or kept in the edge's data directory): the
    /// manager's log checkpoints are stored under it.
    pub id: String,
    /// Where browsers and exchanges reach the edge.
    pub public_url: String,
    /// Where the manager reads the edge's log (`/log/…`).
    pub log_url: String,
    /// This process's lease identity (a new one per start).
    pub pacing_edge: EdgeId,
    /// The snapshot the edge serves, and when it was built.
    pub snapshot_version: Option<u64>,
    pub snapshot_built_at: Option<Timestamp>,
    /// Requests answered since the process started (ad, tracking and bid requests).
    pub requests_total: u64,
    /// When the edge sent the report, by its clock.
    pub sent_at: Timestamp,
}

impl EdgeReport {
    /// The id every edge reports under and the in-process edge of `marquee serve` has.
    pub const IN_PROCESS_ID: &str = "local";

    /// Is `id` usable as a remote edge's id: 1 to 64 ASCII letters, digits, `-`, `_` or `.`,
    /// and not [`IN_PROCESS_ID`](Self::IN_PROCESS_ID)? (It names the edge's log checkpoints and
    /// appears in URLs and file names.)
    pub fn valid_id(id: &str) -> bool {
        !id.is_empty()
            && id.len() <= 64
            && id != Self::IN_PROCESS_ID
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    }
}
