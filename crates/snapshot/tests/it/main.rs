//! Integration tests of the public API: compile rules, the file format, the snapshot directory.

mod compile;
mod dir;
mod fixture;
mod format;
