//! The edge registry: every edge that reported to this manager, fed by their heartbeats
//! (`POST /internal/v1/edges`, an [`EdgeReport`] every `edge.heartbeat_ms`; in `marquee serve`
//! the in-process edge reports the same way without HTTP). [`Manager::edges`](crate::Manager::edges)
//! lists them with their snapshot, log lag and request rate.
//!
//! Invariants:
//! - An edge's id is its log's name for the aggregator: checkpoints are stored under it, so an
//!   edge restarted with the same id resumes where its log was counted.
//! - A registered remote edge is persisted (id and addresses, through the store's named JSON
//!   documents) before its first heartbeat is answered, so a restarted manager collects from
//!   it again at once, before the edge's next heartbeat arrives.
//! - Reports are data from the network: an id or URL that is not well formed is refused with
//!   the field named, never stored. So is a `log_url` whose host is unspecified (`0.0.0.0`,
//!   `::`: an edge listening on every interface that was not told its reachable address):
//!   read from here it would name the manager's own host, and the edge's log would never be
//!   collected while its disk limit deleted it.
//! - One id, one running edge: a report under the id of an edge still heartbeating that names
//!   another `log_url`, or comes from a process that an earlier report under the id already
//!   replaced, is refused ([`ReportError::IdInUse`], 409) and leaves the registry as it was.
//!   Two edges sharing an id (a cloned VM image, a copied `DATA/edge/edge.id`, a copy-pasted
//!   `edge.id`) would otherwise swap the log source on every heartbeat, share one set of read
//!   positions and acknowledge away each other's unread segments. "Still heartbeating" is
//!   heard within three of its own heartbeat intervals (at least [`MIN_PRESENCE`], at most
//!   `silent_after`, which is also the window before its interval is known): a duplicate
//!   beats as steadily as the edge it copies, while an edge that crashed and came back at
//!   another address (a new port, a rescheduled container) is accepted a few heartbeats later
//!   rather than `silent_after`.
//! - The highest snapshot version the edges report is kept
//!   ([`highest_snapshot_version`](EdgeRegistry::highest_snapshot_version)): edges install only
//!   newer versions, so the manager publishes above it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use marquee_metrics::{Counter, Def, Labelled, Registry};
use marquee_model::Clock;
use marquee_pacing::{EdgeId, EdgeReport};
use serde::{Deserialize, Serialize};

use crate::aggregator::SourceLag;

/// The name the in-process edge of `marquee serve` reports under (its log source's name).
pub const IN_PROCESS_ID: &str = EdgeReport::IN_PROCESS_ID;

/// The name the registered edges are stored under in the store's named JSON documents.
pub(crate) const STATE_NAME: &str = "edge-registry";

/// The shortest time an edge is taken as still running after its last heartbeat, whatever its
/// interval: two heartbeats that arrived close together must not make a duplicate look gone.
const MIN_PRESENCE: Duration = Duration::from_secs(1);

/// How often a refused duplicate is logged per id: the other edge retries every heartbeat, and
/// one error a minute says it as clearly as one a second.
const CONFLICT_LOG_EVERY: Duration = Duration::from_secs(60);

/// One edge as the manager sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeStatus {
    /// Stable across the edge's restarts; its log's checkpoints are stored under it.
    pub id: String,
    /// Where browsers and exchanges reach the edge.
    pub address: String,
    /// Where the manager reads its log; `None` for the in-process edge of `marquee serve`.
    pub log_url: Option<String>,
    /// The snapshot the edge serves (`None`: none yet, or not heard from since the manager
    /// started).
    pub snapshot_version: Option<u64>,
    /// How long ago the snapshot it serves was built, by the manager's clock.
    pub snapshot_age: Option<Duration>,
    /// Whether that is the snapshot the manager publishes now.
    pub snapshot_current: bool,
    /// How far behind the edge's log aggregation is, as of the last run that reached it.
    pub log_lag: Option<SourceLag>,
    /// Requests a second between its last two heartbeats.
    pub request_rate: f64,
    /// When its last heartbeat arrived (`None`: registered before the manager's restart and
    /// not heard from since).
    pub last_seen: Option<Timestamp>,
    /// Heard from within the registry's `silent_after`.
    pub live: bool,
}

/// Why a report was refused; names the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReportError {
    #[error("`id` {0:?} must be 1 to 64 letters, digits, `-`, `_` or `.`, and not `local`")]
    Id(String),
    #[error("`{field}` {value:?} must be an http:// or https:// URL")]
    Url { field: &'static str, value: String },
    #[error(
        "`log_url` {0:?} has an unspecified host (0.0.0.0 or ::, the edge's listen address), \
         where the manager cannot read the edge's log: set `edge.log_url` \
         (MARQUEE_EDGE__LOG_URL) to the address the manager reaches the edge at, \
         e.g. http://10.0.0.7:8080"
    )]
    UnspecifiedLogHost(String),
    /// Another live edge reports under this id (409).
    #[error(
        "edge id {id:?} is in use by a live edge {conflict}: two edges share one id (a cloned \
         VM image, a copied DATA/edge/edge.id or a copy-pasted edge.id) and would corrupt each \
         other's log checkpoints, so this one is refused. Give each edge its own id (remove \
         DATA/edge/edge.id to have one generated, or set edge.id) or stop the other one; an \
         edge that moved is accepted once its old address has been silent for {silent_secs} s"
    )]
    IdInUse {
        id: String,
        conflict: IdConflict,
        silent_secs: u64,
    },
}

/// How a report showed that two edges share an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdConflict {
    /// The live edge's log is elsewhere.
    LogUrl { live: String, reported: String },
    /// A process that another one under the id replaced still reports, at the same log URL.
    Process { log_url: String },
}

impl IdConflict {
    /// The metric label.
    fn reason(&self) -> &'static str {
        match self {
            IdConflict::LogUrl { .. } => "log_url",
            IdConflict::Process { .. } => "process",
        }
    }
}

impl std::fmt::Display for IdConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdConflict::LogUrl { live, reported } => {
                write!(f, "whose log is at {live}, not at {reported}")
            }
            IdConflict::Process { log_url } => write!(
                f,
                "in another process with the same log URL {log_url} (both report in turn)"
            ),
        }
    }
}

/// An edge the manager collects from, as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Known {
    pub id: String,
    pub public_url: String,
    pub log_url: String,
}

#[derive(Debug)]
struct Entry {
    public_url: String,
    log_url: Option<String>,
    last: Option<Heard>,
    request_rate: f64,
    /// The process the last one replaced (an edge restart): one that reports again while its
    /// successor is live is a second edge under the id.
    replaced: Option<EdgeId>,
    /// Between the last two heartbeats of the current process, by the manager's clock.
    interval: Option<Duration>,
    /// When a refused duplicate of this id was last logged.
    conflict_logged: Option<Timestamp>,
}

impl Entry {
    fn new(public_url: String, log_url: Option<String>) -> Entry {
        Entry {
            public_url,
            log_url,
            last: None,
            request_rate: 0.0,
            replaced: None,
            interval: None,
            conflict_logged: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Heard {
    report: EdgeReport,
    at: Timestamp,
}

/// What a heartbeat changed, for the manager to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing the aggregator or the store needs to know.
    None,
    /// A new remote edge, or one whose log moved: collect from there, persist the list.
    Collect(Known),
}

const ID_CONFLICTS: Def = Def::new(
    "marquee_registry_id_conflicts",
    "Edge heartbeats refused because another live edge reports under the same id.",
);

/// The edges heard from; see the module docs.
#[derive(Debug)]
pub struct EdgeRegistry {
    clock: Arc<dyn Clock>,
    silent_after: Duration,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Reports refused because another live edge has the id, by [`IdConflict::reason`].
    conflicts_log_url: Counter,
    conflicts_process: Counter,
}

impl EdgeRegistry {
    /// `silent_after`: how long without a heartbeat before an edge is listed as not live.
    pub fn new(clock: Arc<dyn Clock>, silent_after: Duration) -> EdgeRegistry {
        EdgeRegistry {
            clock,
            silent_after,
            entries: Mutex::new(BTreeMap::new()),
            conflicts_log_url: Counter::default(),
            conflicts_process: Counter::default(),
        }
    }

    /// Adds edges known from before a restart, not heard from yet.
    pub(crate) fn restore(&self, known: &[Known]) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        for k in known {
            entries
                .entry(k.id.clone())
                .or_insert_with(|| Entry::new(k.public_url.clone(), Some(k.log_url.clone())));
        }
    }

    /// Drops a remote edge; the in-process one stays. Whether it was listed.
    pub(crate) fn remove(&self, id: &str) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        if entries.get(id).is_none_or(|e| e.log_url.is_none()) {
            return false;
        }
        entries.remove(id).is_some()
    }

    /// The remote edges, as persisted.
    pub(crate) fn known(&self) -> Vec<Known> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        entries
            .iter()
            .filter_map(|(id, e)| {
                Some(Known {
                    id: id.clone(),
                    public_url: e.public_url.clone(),
                    log_url: e.log_url.clone()?,
                })
            })
            .collect()
    }

    /// Takes a heartbeat. `in_process` is the edge of `marquee serve` (id [`IN_PROCESS_ID`],
    /// its log read in process); every other report must name a remote edge.
    pub(crate) fn heartbeat(
        &self,
        report: EdgeReport,
        in_process: bool,
    ) -> Result<Change, ReportError> {
        if in_process {
            if report.id != IN_PROCESS_ID {
                return Err(ReportError::Id(report.id));
            }
        } else {
            validate(&report)?;
        }
        let now = self.clock.now();
        let Ok(mut entries) = self.entries.lock() else {
            return Ok(Change::None);
        };
        let log_url = (!in_process).then(|| report.log_url.clone());
        if let Some(url) = &log_url
            && let Some(entry) = entries.get_mut(&report.id)
            && let Some(conflict) = self.conflict(entry, url, &report, now)
        {
            return Err(self.refuse(entry, report.id, conflict, now));
        }
        let entry = entries
            .entry(report.id.clone())
            .or_insert_with(|| Entry::new(report.public_url.clone(), None));
        let change = match &log_url {
            Some(url) if entry.log_url.as_ref() != Some(url) => Change::Collect(Known {
                id: report.id.clone(),
                public_url: report.public_url.clone(),
                log_url: url.clone(),
            }),
            _ => Change::None,
        };
        entry.request_rate = entry
            .last
            .as_ref()
            .map_or(0.0, |previous| rate(&previous.report, &report));
        if let Some(previous) = &entry.last {
            if previous.report.pacing_edge == report.pacing_edge {
                entry.interval = Some(since(previous.at, now));
            } else {
                entry.replaced = Some(previous.report.pacing_edge);
                entry.interval = None;
            }
        }
        entry.public_url.clone_from(&report.public_url);
        entry.log_url = log_url;
        entry.last = Some(Heard { report, at: now });
        Ok(change)
    }

    /// Whether `report` (for a remote edge whose log is at `log_url`) comes from a second edge
    /// under the id of `entry`, whose edge still heartbeats (see the module docs).
    fn conflict(
        &self,
        entry: &Entry,
        log_url: &str,
        report: &EdgeReport,
        now: Timestamp,
    ) -> Option<IdConflict> {
        let last = entry.last.as_ref()?;
        let presence = entry.interval.map_or(self.silent_after, |interval| {
            interval
                .saturating_mul(3)
                .max(MIN_PRESENCE)
                .min(self.silent_after)
        });
        if since(last.at, now) > presence {
            return None;
        }
        match &entry.log_url {
            Some(live) if live != log_url => Some(IdConflict::LogUrl {
                live: live.clone(),
                reported: log_url.to_owned(),
            }),
            _ if entry.replaced == Some(report.pacing_edge)
                && last.report.pacing_edge != report.pacing_edge =>
            {
                Some(IdConflict::Process {
                    log_url: log_url.to_owned(),
                })
            }
            _ => None,
        }
    }

    /// Counts a refused duplicate and logs it (once per [`CONFLICT_LOG_EVERY`] per id).
    fn refuse(
        &self,
        entry: &mut Entry,
        id: String,
        conflict: IdConflict,
        now: Timestamp,
    ) -> ReportError {
        match conflict {
            IdConflict::LogUrl { .. } => &self.conflicts_log_url,
            IdConflict::Process { .. } => &self.conflicts_process,
        }
        .inc();
        let reason = conflict.reason();
        let error = ReportError::IdInUse {
            id,
            conflict,
            silent_secs: self.silent_after.as_secs(),
        };
        if entry
            .conflict_logged
            .is_none_or(|logged| since(logged, now) >= CONFLICT_LOG_EVERY)
        {
            entry.conflict_logged = Some(now);
            tracing::error!(
                reason,
                %error,
                "refused a heartbeat: two edges report under one id"
            );
        }
        error
    }

    /// The highest snapshot version an edge last reported serving, if any reported one.
    pub fn highest_snapshot_version(&self) -> Option<u64> {
        let Ok(entries) = self.entries.lock() else {
            return None;
        };
        entries
            .values()
            .filter_map(|e| e.last.as_ref()?.report.snapshot_version)
            .max()
    }

    /// Registers the edge registry's families into `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let conflicts = Labelled::new([
            ([("reason", "log_url")], self.conflicts_log_url.clone()),
            ([("reason", "process")], self.conflicts_process.clone()),
        ]);
        ID_CONFLICTS.register(registry, conflicts);
    }

    /// Every edge, by id, with its log lag from `lag` and compared with the `latest` snapshot
    /// version the manager publishes.
    pub fn list(
        &self,
        latest: Option<u64>,
        lag: impl Fn(&str) -> Option<SourceLag>,
    ) -> Vec<EdgeStatus> {
        let now = self.clock.now();
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        entries
            .iter()
            .map(|(id, entry)| {
                let report = entry.last.as_ref().map(|h| &h.report);
                let snapshot_version = report.and_then(|r| r.snapshot_version);
                let last_seen = entry.last.as_ref().map(|h| h.at);
                EdgeStatus {
                    id: id.clone(),
                    address: entry.public_url.clone(),
                    log_url: entry.log_url.clone(),
                    snapshot_version,
                    snapshot_age: report
                        .and_then(|r| r.snapshot_built_at)
                        .map(|built| since(built, now)),
                    snapshot_current: snapshot_version.is_some() && snapshot_version == latest,
                    log_lag: lag(id),
                    request_rate: entry.request_rate,
                    last_seen,
                    live: last_seen.is_some_and(|seen| since(seen, now) <= self.silent_after),
                }
            })
            .collect()
    }
}

/// Time from `then` to `now`, zero if `then` is later (clock skew).
fn since(then: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

/// Requests a second between two reports of one process; 0 after a restart (the counter
/// went back) or for reports sent at the same instant.
fn rate(previous: &EdgeReport, report: &EdgeReport) -> f64 {
    if previous.pacing_edge != report.pacing_edge {
        return 0.0;
    }
    let elapsed = since(previous.sent_at, report.sent_at).as_secs_f64();
    let served = report
        .requests_total
        .saturating_sub(previous.requests_total);
    if elapsed <= 0.0 {
        return 0.0;
    }
    served as f64 / elapsed
}

fn validate(report: &EdgeReport) -> Result<(), ReportError> {
    if !EdgeReport::valid_id(&report.id) {
        return Err(ReportError::Id(report.id.clone()));
    }
    for (field, value, https_allowed) in [
        ("public_url", &report.public_url, true),
        ("log_url", &report.log_url, false),
    ] {
        let rest = value.strip_prefix("http://").or_else(|| {
            https_allowed
                .then(|| value.strip_prefix("https://"))
                .flatten()
        });
        let well_formed = rest.is_some_and(|rest| {
            !rest.is_empty() && value.len() <= 2_048 && value.parse::<hyper::Uri>().is_ok()
        });
        if !well_formed {
            return Err(ReportError::Url {
                field,
                value: value.clone(),
            });
        }
    }
    if unspecified_host(&report.log_url) {
        return Err(ReportError::UnspecifiedLogHost(report.log_url.clone()));
    }
    Ok(())
}

/// Whether a well-formed URL's host is an unspecified address (`0.0.0.0`, `::`), which
/// means "every interface" to a listener and this machine to a client.
fn unspecified_host(url: &str) -> bool {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or("");
    // An IPv6 host keeps its brackets in the URI.
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
}

#[cfg(test)]
mod tests {
    use marquee_model::ManualClock;
    use marquee_pacing::EdgeId;

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_780_000_000 + second).unwrap()
    }

    fn report(id: &str, process: u64, sent: i64, requests: u64) -> EdgeReport {
        EdgeReport {
            id: id.into(),
            public_url: format!("http://{id}.example:8080"),
            log_url: format!("http://{id}.internal:8080"),
            pacing_edge: EdgeId(process),
            snapshot_version: Some(7),
            snapshot_built_at: Some(at(-30)),
            requests_total: requests,
            sent_at: at(sent),
        }
    }

    fn registry(now: i64) -> (EdgeRegistry, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(at(now)));
        (
            EdgeRegistry::new(clock.clone(), Duration::from_secs(5)),
            clock,
        )
    }

    #[test]
    fn a_new_edge_is_collected_once_and_again_when_its_log_moves() {
        let (registry, clock) = registry(0);
        let first = registry.heartbeat(report("e1", 1, 0, 0), false).unwrap();
        assert_eq!(
            first,
            Change::Collect(Known {
                id: "e1".into(),
                public_url: "http://e1.example:8080".into(),
                log_url: "http://e1.internal:8080".into(),
            })
        );
        assert_eq!(
            registry.heartbeat(report("e1", 1, 1, 10), false).unwrap(),
            Change::None
        );
        // Moved: its old address silent for longer than `silent_after`.
        clock.advance(jiff::SignedDuration::from_secs(6));
        let mut moved = report("e1", 2, 7, 0);
        moved.log_url = "http://10.0.0.9:9000".into();
        assert!(matches!(
            registry.heartbeat(moved, false).unwrap(),
            Change::Collect(k) if k.log_url == "http://10.0.0.9:9000"
        ));
        assert_eq!(registry.known().len(), 1);
    }

    #[test]
    fn status_has_rate_age_lag_and_liveness() {
        let (registry, clock) = registry(0);
        registry.heartbeat(report("e1", 1, 0, 100), false).unwrap();
        registry.heartbeat(report("e1", 1, 2, 700), false).unwrap();
        let lag = SourceLag {
            backlog_bytes: 690,
            behind_secs: 0,
        };
        let listed = registry.list(Some(7), |id| (id == "e1").then_some(lag));
        assert_eq!(listed.len(), 1);
        let e1 = &listed[0];
        assert_eq!(e1.request_rate, 300.0);
        assert_eq!(e1.snapshot_age, Some(Duration::from_secs(30)));
        assert!(e1.snapshot_current && e1.live);
        assert_eq!(e1.log_lag, Some(lag));
        assert_eq!(e1.last_seen, Some(at(0)));
        clock.advance(jiff::SignedDuration::from_secs(6));
        let later = registry.list(Some(8), |_| None);
        assert!(!later[0].live && !later[0].snapshot_current);
    }

    #[test]
    fn a_restarted_edge_has_no_rate_until_its_second_heartbeat() {
        let (registry, _) = registry(0);
        registry
            .heartbeat(report("e1", 1, 0, 5_000), false)
            .unwrap();
        registry.heartbeat(report("e1", 2, 1, 40), false).unwrap();
        assert_eq!(registry.list(None, |_| None)[0].request_rate, 0.0);
    }

    #[test]
    fn restored_edges_are_listed_unheard_and_keep_their_log() {
        let (registry, _) = registry(0);
        registry.restore(&[Known {
            id: "e2".into(),
            public_url: "http://e2:1".into(),
            log_url: "http://e2:2".into(),
        }]);
        let listed = registry.list(None, |_| None);
        assert_eq!(listed[0].last_seen, None);
        assert!(!listed[0].live);
        assert_eq!(listed[0].log_url.as_deref(), Some("http://e2:2"));
        let mut same = report("e2", 1, 0, 0);
        same.log_url = "http://e2:2".into();
        assert_eq!(registry.heartbeat(same, false).unwrap(), Change::None);
    }

    #[test]
    fn malformed_reports_are_refused_naming_the_field() {
        let (registry, _) = registry(0);
        for bad_id in ["", "local", "a b", "x/../y", &"x".repeat(65)] {
            assert_eq!(
                registry.heartbeat(report(bad_id, 1, 0, 0), false),
                Err(ReportError::Id(bad_id.to_owned()))
            );
        }
        let mut bad_log = report("e1", 1, 0, 0);
        bad_log.log_url = "https://e1:8080".into();
        assert!(matches!(
            registry.heartbeat(bad_log, false),
            Err(ReportError::Url {
                field: "log_url",
                ..
            })
        ));
        let mut bad_public = report("e1", 1, 0, 0);
        bad_public.public_url = "ftp://e1".into();
        assert!(matches!(
            registry.heartbeat(bad_public, false),
            Err(ReportError::Url {
                field: "public_url",
                ..
            })
        ));
        assert!(registry.list(None, |_| None).is_empty());
    }

    #[test]
    fn a_log_url_on_an_unspecified_host_is_refused_saying_what_to_set() {
        let (registry, _) = registry(0);
        for unspecified in ["http://0.0.0.0:8080", "http://[::]:8080", "http://0.0.0.0"] {
            let mut listen_address = report("e1", 1, 0, 0);
            listen_address.log_url = unspecified.into();
            let refused = registry.heartbeat(listen_address, false);
            assert_eq!(
                refused,
                Err(ReportError::UnspecifiedLogHost(unspecified.into()))
            );
            let message = refused.unwrap_err().to_string();
            assert!(message.contains("MARQUEE_EDGE__LOG_URL"), "{message}");
        }
        assert!(registry.known().is_empty());
        // Reachable hosts, names and loopback included, are taken.
        for (id, reachable) in [
            ("e1", "http://10.0.0.7:8080"),
            ("e2", "http://[fd00::7]:8080"),
            ("e3", "http://127.0.0.1:1"),
        ] {
            let mut good = report(id, 1, 0, 0);
            good.log_url = reachable.into();
            assert!(registry.heartbeat(good, false).is_ok(), "{reachable}");
        }
    }

    #[test]
    fn the_in_process_edge_is_listed_without_a_log_url() {
        let (registry, _) = registry(0);
        assert_eq!(
            registry
                .heartbeat(report(IN_PROCESS_ID, 1, 0, 0), true)
                .unwrap(),
            Change::None
        );
        let listed = registry.list(Some(7), |_| None);
        assert_eq!(listed[0].id, IN_PROCESS_ID);
        assert_eq!(listed[0].log_url, None);
        assert!(registry.known().is_empty());
        assert!(!registry.remove(IN_PROCESS_ID));
    }

    #[test]
    fn a_second_edge_under_a_live_id_is_refused_until_the_first_went_silent() {
        let (registry, clock) = registry(0);
        registry.heartbeat(report("e1", 1, 0, 0), false).unwrap();
        let mut clone = report("e1", 2, 1, 0);
        clone.log_url = "http://10.0.0.9:8080".into();
        let refused = registry.heartbeat(clone.clone(), false);
        assert_eq!(
            refused,
            Err(ReportError::IdInUse {
                id: "e1".into(),
                conflict: IdConflict::LogUrl {
                    live: "http://e1.internal:8080".into(),
                    reported: "http://10.0.0.9:8080".into(),
                },
                silent_secs: 5,
            })
        );
        let message = refused.unwrap_err().to_string();
        assert!(
            message.contains("edge.id") && message.contains("10.0.0.9"),
            "{message}"
        );
        // The registry is as the first edge left it, which keeps reporting.
        let listed = registry.list(None, |_| None);
        assert_eq!(
            listed[0].log_url.as_deref(),
            Some("http://e1.internal:8080")
        );
        assert_eq!(
            registry.heartbeat(report("e1", 1, 2, 5), false).unwrap(),
            Change::None
        );
        assert_eq!(registry.conflicts_log_url.get(), 1);
        // Silent for longer than `silent_after`: the edge moved, and its new address is taken.
        clock.advance(jiff::SignedDuration::from_secs(6));
        assert!(matches!(
            registry.heartbeat(clone, false).unwrap(),
            Change::Collect(k) if k.log_url == "http://10.0.0.9:8080"
        ));
    }

    #[test]
    fn an_edge_back_at_another_address_is_taken_once_it_missed_three_heartbeats() {
        let (registry, clock) = registry(0);
        let second = jiff::SignedDuration::from_secs(1);
        registry.heartbeat(report("e1", 1, 0, 0), false).unwrap();
        clock.advance(second);
        registry.heartbeat(report("e1", 1, 1, 0), false).unwrap();
        // Killed, and started again at a new port: the old one is not yet late.
        let mut back = report("e1", 2, 3, 0);
        back.log_url = "http://e1.internal:9090".into();
        clock.advance(second * 2);
        assert!(registry.heartbeat(back.clone(), false).is_err());
        // More than three of its one-second heartbeats missed: it is gone, before
        // `silent_after` (5 s).
        clock.advance(second * 2);
        assert!(matches!(
            registry.heartbeat(back, false).unwrap(),
            Change::Collect(k) if k.log_url == "http://e1.internal:9090"
        ));
    }

    #[test]
    fn two_processes_reporting_in_turn_at_one_address_are_told_apart_from_a_restart() {
        let (registry, clock) = registry(0);
        registry.heartbeat(report("e1", 1, 0, 0), false).unwrap();
        // A restart: a new process, the same address; the old one is never heard again.
        registry.heartbeat(report("e1", 2, 1, 0), false).unwrap();
        registry.heartbeat(report("e1", 2, 2, 0), false).unwrap();
        // The replaced process reports again while its successor is live: a second edge.
        assert!(matches!(
            registry.heartbeat(report("e1", 1, 2, 0), false),
            Err(ReportError::IdInUse {
                conflict: IdConflict::Process { .. },
                ..
            })
        ));
        assert_eq!(registry.conflicts_process.get(), 1);
        assert_eq!(
            registry.heartbeat(report("e1", 2, 3, 0), false).unwrap(),
            Change::None
        );
        clock.advance(jiff::SignedDuration::from_secs(6));
        assert!(registry.heartbeat(report("e1", 1, 9, 0), false).is_ok());
    }

    #[test]
    fn the_highest_snapshot_version_reported_is_kept() {
        let (registry, _) = registry(0);
        assert_eq!(registry.highest_snapshot_version(), None);
        let mut ahead = report("e1", 1, 0, 0);
        ahead.snapshot_version = Some(40);
        registry.heartbeat(ahead, false).unwrap();
        registry.heartbeat(report("e2", 2, 0, 0), false).unwrap();
        assert_eq!(registry.highest_snapshot_version(), Some(40));
    }

    #[test]
    fn a_removed_edge_is_gone_until_it_reports_again() {
        let (registry, _) = registry(0);
        registry.heartbeat(report("e1", 1, 0, 0), false).unwrap();
        assert!(registry.remove("e1"));
        assert!(!registry.remove("e1"));
        assert!(registry.list(None, |_| None).is_empty() && registry.known().is_empty());
        assert!(matches!(
            registry.heartbeat(report("e1", 1, 1, 0), false).unwrap(),
            Change::Collect(_)
        ));
    }
}
