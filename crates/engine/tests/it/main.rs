//! Integration tests of the decision engine: bids, selection, and the index against a naive scan.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bid;
mod common;
mod index_vs_naive;
mod select;
