//! Integration tests of the event log, each in its own temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod append;
mod common;
mod count;
mod disk_full;
mod prop;
mod reader;
mod recovery;
mod roll;
mod strict;
