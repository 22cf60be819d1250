//! Integration tests of the edge's server.

mod body_timeout;
mod gateway;
mod metrics_access;
mod overload;
mod pacing;
mod poll;
