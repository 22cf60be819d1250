//! Integration tests of the edge's server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bid_log;
mod body_timeout;
mod common;
mod gateway;
mod h2c;
mod metrics_access;
mod overload;
mod pacing;
mod poll;
mod sampling;
mod unified;
