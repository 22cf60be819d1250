//! Integration tests of pacing, on the simulator in `sim`.

mod budget_scenarios;
mod sim;
mod simulation;
