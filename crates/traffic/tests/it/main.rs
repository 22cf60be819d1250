//! Integration tests of the traffic filters: crawler and network lists, rate limits, and
//! lists reloaded as their files change.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod crawlers;
mod networks;
mod rate;
mod watched;

// Stays in `tests/support/`, as the bench (`benches/filters.rs`) includes its User-Agents by
// path too.
#[path = "../support/mod.rs"]
mod support;
