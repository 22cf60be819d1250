//! Integration tests of the OpenRTB types, readers, validation and crypto.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crypto;
mod fast_fields;
mod fast_parse;
mod leniency;
mod native;
mod never_panics;
mod request;
mod samples;
mod validate;
