//! Integration tests of device detection: the corpus of real User-Agents, current devices,
//! client hints, and arbitrary input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod arbitrary_input;
mod corpus;
mod current_devices;
mod hints;

// Reading `tests/corpus.tsv`; stays beside it, as the bench (`benches/detect.rs`) includes it
// by path too.
#[path = "../support/corpus.rs"]
mod corpus_cases;
