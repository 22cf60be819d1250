//! `marquee-bench`: the project's measuring instruments.
//!
//! - [`load`]: the load generator behind `marquee bench run`. Open loop at a fixed rate (latency
//!   measured from each request's intended send time, so a stalled server cannot hide its queue)
//!   or closed loop over N connections; keep-alive or a fresh connection per request; bounded by
//!   duration or by an exact request count. Percentiles come from an HDR histogram.
//! - [`client`]: the lean HTTP/1.1 client connection it drives (prepared request bytes,
//!   answers parsed in place).
//! - [`workload`] and [`session`]: what is sent: a fixed request, OpenRTB requests from files
//!   with fresh ids per request, or user sessions walked from a Markov chain: ad requests, then
//!   the signed impression beacons and clicks their answers carry, over one or several edges.
//! - [`reference`]: `marquee bench reference`, the hello-world server on the same HTTP stack
//!   (hyper 1) that is the 100% of every ratio run (`docs/benchmark-method.md`).
//! - [`mock_bidder`]: `marquee bench mock-bidder`, a stand-in external bidder for gateway
//!   benchmarks (fixed or random bids after a delay, no bids, errors, time-outs at given rates).
//! - [`report`] and [`svg`]: the final table, JSON and hand-made SVG charts.
//!
//! The crate depends on no other Marquee crate: it measures servers from the outside.

pub mod cli;
pub mod client;
pub mod load;
pub mod mock_bidder;
pub mod reference;
pub mod report;
pub mod session;
pub mod svg;
pub mod target;
pub mod workload;

pub use cli::{BenchCommand, ReferenceArgs, RunArgs, run};

use std::net::IpAddr;
use std::path::PathBuf;

/// Everything that can stop a bench command. Failed requests during a run are not errors of
/// this kind: they are counted in the report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error(
        "refusing to send load to {ip}: not a loopback address; pass --allow-remote {ip} if \
         you really mean to load that machine"
    )]
    NotLoopback { ip: IpAddr },
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error("session model: {0}")]
    Session(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("load generator: {0}")]
    Runtime(String),
}
