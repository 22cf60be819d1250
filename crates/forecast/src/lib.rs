//! Inventory forecasting: "if I book this line item, will it deliver, and what does it take
//! from the line items already booked?", answered from a uniform sample of ad requests.
//!
//! - [`SampleRecord`]: one sampled ad request (placement, the attributes the engine's
//!   targeting reads, the minute, a salted user hash) and its versioned binary encoding.
//! - [`Sample`]: records and their sample rate, identical attribute vectors kept once.
//! - [`Sampler`]: an edge thread's decision which requests to keep (by salted user hash, a
//!   daily byte budget).
//! - [`TrafficModel::fit`]: per placement and hour of the week, expected requests with a
//!   recency-weighted trend; outlier days (holidays) left out.
//! - [`Forecaster`]: representatives of the sample through the engine's targeting index
//!   ([`marquee_engine::Engine::matching`]) once per snapshot, then per question
//!   [`Forecaster::availability`] (matching, available, contending line items, the chance of
//!   meeting the goal) and [`Forecaster::delivery`] (on track, at risk, shortfall).
//! - [`backtest`]: forecast from the days before a split, measured against the days after.
//!
//! Pure: no I/O, no clock; time is a parameter. The model, its assumptions and limits are in
//! `docs/forecasting.md`.

mod allocation;
mod backtest;
mod forecast;
mod profiles;
mod record;
mod sample;
mod sampler;
mod traffic;

/// The benchmark's synthetic publisher, for tests that need the crate's insides (it names the
/// crate as its users do).
#[cfg(test)]
extern crate self as marquee_forecast;
#[cfg(test)]
#[path = "../benches/support/workload.rs"]
mod workload;

pub use backtest::{Backtest, LineItemError, backtest};
pub use forecast::{
    Availability, Contender, Day, DeliveryForecast, ForecastError, Forecaster, MAX_REPRESENTATIVES,
    Status,
};
pub use record::{
    DecodeError, MAX_KEY_VALUES, MAX_SEGMENTS, MAX_SIZES, MAX_TEXT, MAX_URL, SampleRecord, VERSION,
    connection_code, device_code,
};
pub use sample::{Sample, SampleError};
pub use sampler::Sampler;
pub use traffic::{HALF_LIFE_DAYS, MAX_DAYS, MAX_HORIZON_DAYS, MAX_SLOPE, TrafficModel};
