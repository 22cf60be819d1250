//! Integration tests of the stores: SQLite, PostgreSQL, and the copy between them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod copy;
mod postgres;
mod sqlite;
