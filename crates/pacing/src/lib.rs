//! Pacing and budget leases, as a pure library: no I/O, no clock (every instant is a
//! parameter), no shared state beyond what the caller holds.
//!
//! - [`TrafficProfile`]: expected traffic per local hour, the measure goal curves are drawn in.
//! - [`Schedule`]: a line item's goal curves per pacing mode (even, front-loaded, ASAP) in its
//!   time zone, and the budget of the current period.
//! - [`Pacer`]: the controller; per round and line item, [`Delivery`] so far in,
//!   [`PacingOutput`] (stopped, throttle in ppm, bid multiplier per mille) out.
//! - [`LeaseBook`] (manager) and [`Lease`] (edge): budgets split into slices edges bill against
//!   without asking, with a stated bound on overspend; decisions reserved on the deciding
//!   edge's lease and [`Settlement`]s per minute of decision time, so that a reservation whose
//!   tokens expired unsettled returns to its period.
//!
//! The README gives the method, its tuning and stability limits, and the overspend bound.

mod controller;
mod error;
mod lease;
mod message;
mod profile;
mod schedule;
mod settle;

pub use controller::{Delivery, Pacer, PacerConfig, PacingOutput, PacingState, PacingStatus};
pub use error::{ConfigError, LeaseError, ProfileError, ScheduleError};
pub use lease::{
    Billable, BookState, BudgetSpec, BudgetUsage, Charge, EdgeId, Expiry, Lease, LeaseBook,
    LeaseConfig, LeaseGrant, Renewal,
};
pub use message::{ControlEntry, EdgeReport, SyncRequest, SyncResponse};
pub use profile::TrafficProfile;
pub use schedule::{BudgetPeriod, FLIGHT_PERIOD, Period, Schedule, Targets};
pub use settle::{Settlement, WINDOW_SECS, window_of};
