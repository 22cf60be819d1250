//! Integration tests of the forecast, one module per topic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../benches/support/workload.rs"]
mod workload;

mod allocation;
mod backtest;
