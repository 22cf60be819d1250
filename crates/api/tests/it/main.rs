//! Integration tests of the management API's router.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod common;
mod forecasts;
mod report_builder;
mod report_names;
mod reports;
