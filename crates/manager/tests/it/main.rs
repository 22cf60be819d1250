//! Integration tests of the manager: aggregation, edges, live statistics, metrics, pacing and
//! versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod aggregation;
mod edges;
mod forecast;
mod forecasts;
mod live;
mod metrics;
mod pacing;
mod support;
mod versions;
