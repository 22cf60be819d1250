//! Integration tests of the stores: SQLite, PostgreSQL, and the copy between them.

mod common;
mod copy;
mod postgres;
mod sqlite;
