//! What the edge's tests share: an edge on a temporary directory.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use marquee_edge::{Edge, EdgeConfig, Fallback, Limits};
use marquee_eventlog::EventLog;
use marquee_tracking::KeyRing;

/// An edge with its event log in `dir/events` and its state in `dir/edge`, answering with
/// `limits`; callers add a gateway, metrics access or shared state as they need.
pub fn edge(dir: &Path, limits: Limits) -> Edge {
    let log = EventLog::open(dir.join("events"), marquee_eventlog::Config::default()).unwrap();
    let keys = KeyRing::new(1, [(1u8, &[9u8; 32][..])]).unwrap();
    Edge::new(
        EdgeConfig {
            public_url: "http://127.0.0.1".into(),
            token_lifetime: Duration::from_secs(600),
            fallback: Fallback::Empty,
            cookies: false,
            country_header: None,
            data_dir: dir.join("edge"),
            limits,
        },
        Arc::new(log),
        keys,
    )
}
