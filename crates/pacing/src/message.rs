//! The sync message between an edge and the manager (`POST /internal/v1/sync`): the edge's
//! lease renewals and releases in, grants and the current pacing controls out. Plain data;
//! the manager answers it in process for `marquee serve`'s own edge and over HTTP (JSON) for
//! remote ones.

use marquee_model::LineItemId;
use serde::{Deserialize, Serialize};

use crate::{EdgeId, LeaseGrant, PacingOutput, Renewal};

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
