//! End-to-end tests of the `marquee` binary, one module per area; `common` starts servers and
//! talks to them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod aggregation_crash;
mod bid;
mod browser;
mod budgets;
mod common;
mod crash;
mod dashboard;
mod disk_full;
mod edge;
mod forecast_accuracy;
mod gateway;
mod hostile;
mod live;
mod metrics_access;
mod migrate;
mod multinode;
mod one_manager;
mod overload;
mod pacing;
mod postgres_restart;
mod profiles;
mod readme_tour;
mod redis_restart;
mod reports;
mod revoke;
mod security;
mod serve;
mod shared_caps;
mod swap;
mod traffic_quality;
