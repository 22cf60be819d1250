//! Integration tests of the public API: compile rules, the file format, the snapshot directory.

// A failed expectation in a test is a test failure; panicking is how it reports.
#![allow(clippy::expect_used)]

mod compile;
mod dir;
mod fixture;
mod format;
