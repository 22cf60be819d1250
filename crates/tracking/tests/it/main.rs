//! Integration tests of the tracking tokens and the replay guard.

mod clock_jumps;
mod garbage;
mod replay;
mod token;
