//! State shared by edges through Redis: frequency caps, budget counters and user
//! profiles ([`profiles`], which also holds the in-memory store of the embedded default).
//!
//! Every check-and-count is one atomic round trip: a Lua script, loaded once and called by
//! its hash (`EVALSHA`), over keys that one hash tag puts in one Redis Cluster slot (see
//! [`keys`]). In front of Redis sit a bounded cache of caps known full (true until their time
//! runs out, whatever other edges do) and a write-behind queue (counts and budget charges sent
//! every flush interval in pipelines of bounded size, each applied once however often it is
//! sent). Behind it all a circuit breaker: when Redis is slow or down, callers get
//! [`CapAnswer::Unavailable`] at once or within their time budget, decide from local state,
//! and the metrics say so.
//!
//! Invariants:
//! - No call waits past the deadline it is given, nor past the configured timeout.
//! - A cap counts in Redis only if every rule of the call had room (unless forced, for
//!   deliveries that already happened); concurrent calls from any number of edges never let
//!   more than the limit through in a window.
//! - Cap windows slide on the injected [`Clock`](marquee_model::Clock)'s time; key TTLs (one
//!   window after the last count) only collect garbage.
//! - Redis failures never surface as errors: they are answers (`Unavailable`) and metrics.
//!
//! Where things are: `state` holds [`SharedState`], with a table of the modules that add its
//! calls, one concern each.

mod breaker;
mod budgets;
mod cache;
mod caps;
mod config;
mod images;
pub mod keys;
mod metrics;
mod profile_cache;
pub mod profiles;
mod round_trip;
mod shards;
mod state;
mod write_behind;

pub use breaker::BreakerState;
pub use budgets::BudgetAnswer;
pub use caps::{CapAnswer, CapCount, CapRule};
pub use config::SharedConfig;
pub use keys::Scope;
pub use profiles::{MemoryProfiles, Profile};
pub use round_trip::Fallback;
pub use state::{SharedState, SharedStateError};
pub use write_behind::drain_at_exit;
