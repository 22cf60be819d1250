//! Integration tests of the geo database: lookups, its cache, reloads, corrupt files, the writer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anonymize;
mod cache;
mod corrupt;
mod demo;
mod lookup;
mod reload;
mod support;
mod writer;
