//! Integration tests of pacing, on the simulator in `sim`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod budget_scenarios;
mod sim;
mod simulation;
