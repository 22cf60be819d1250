//! Integration tests of the dashboard router.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod dashboard;
mod report_desk;
mod sign_in_token;
