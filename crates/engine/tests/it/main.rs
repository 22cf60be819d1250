//! Integration tests of the decision engine: bids, selection, and the index against a naive scan.

mod bid;
mod common;
mod index_vs_naive;
mod select;
