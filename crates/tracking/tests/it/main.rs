//! Integration tests of the tracking tokens and the replay guard.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod clock_jumps;
mod garbage;
mod replay;
mod token;
