//! Integration tests of the gateway: auctions and notices against mock bidders.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auction;
mod common;
mod https;
mod notices;
