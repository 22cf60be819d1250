//! The manager: owns the store, compiles a snapshot whenever the store's change counter moves,
//! publishes it to a directory and over HTTP, serves the management API, and collects and
//! aggregates the edges' event logs ([`Aggregator`], reading [`LogSource`]s).
//!
//! Invariants:
//! - A snapshot is compiled only when the change counter differs from the one the published
//!   snapshot was compiled at (after a start, the adopted version's catalog part), when a live
//!   statistic rendered into ad code changed ([`live`]), or when an edge reports serving a
//!   version above the published one, at most once per refresh; the published version is the
//!   counter the catalog was read at × 2³² plus the live-statistics revision, raised to one
//!   above the highest version published or reported by an edge when it would not be above it
//!   (edges install only newer versions), so versions never go back, across restarts too.
//! - Publishing is atomic on disk (the snapshot crate renames into place) and in memory (a
//!   `watch` channel swaps an `Arc`), so readers see the old or the new snapshot, never a mix.
//! - Every event logged counts exactly once: an aggregation run commits its aggregates with
//!   the log positions they came from in one transaction, with a constant number of
//!   statements, moving each position only from where the run started reading (so a run in
//!   flight on a manager that was taken over cannot count bytes twice), and edges delete only
//!   segments committed past (see [`aggregator`]).
//! - Edges report by heartbeat ([`edges`]); a remote edge's log is collected under its id from
//!   its first heartbeat on, and after a restart from the persisted registry at once.

pub mod aggregator;
pub mod demo;
pub mod edges;
pub mod forecast;
pub mod forecasts;
mod http;
pub mod live;
pub mod pacing;
pub mod sources;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use marquee_api::GeoAvailability;
use marquee_metrics::{Format, Registry};
use marquee_model::{Clock, MetricsAccess};
use marquee_snapshot::{DirError, Header, LoadError, Snapshot, SnapshotDir};
use marquee_store::{Store, StoreError};
use tokio::sync::{Mutex, watch};

pub use aggregator::{AggregationOptions, Aggregator, RunReport, RunSummary, SourceLag};
pub use edges::{EdgeRegistry, EdgeStatus, ReportError};
pub use http::{router, router_with};
pub use live::{LiveOptions, LiveStatus};
pub use pacing::{Pacing, PacingError, PacingOptions, RoundReport};
pub use sources::{HttpLogSource, LocalLogSource, LogSource};

/// The latest published snapshot, ready to serve.
#[derive(Debug)]
pub struct Published {
    pub header: Header,
    pub etag: String,
    pub bytes: Bytes,
}

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub snapshot_dir: std::path::PathBuf,
    /// How many snapshot files to keep on disk.
    pub keep: usize,
    /// How often to check the change counter.
    pub compile_interval: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("snapshot directory: {0}")]
    Dir(#[from] DirError),
    #[error("snapshot: {0}")]
    Load(#[from] LoadError),
    #[error("snapshot task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("edge registry: {0}")]
    Registry(#[from] serde_json::Error),
}

/// Why an edge's heartbeat was not taken.
#[derive(Debug, thiserror::Error)]
pub enum EdgeReportError {
    /// The report is malformed (400).
    #[error(transparent)]
    Report(#[from] ReportError),
    /// Remote edges are not accepted: no shared secret (403).
    #[error("remote edges are off: set aggregation.token on the manager and the edges")]
    Off,
    /// The registry could not be persisted (500; the edge retries).
    #[error(transparent)]
    Store(#[from] ManagerError),
}

/// How long without a heartbeat before an edge is listed as not live (five default
/// heartbeats).
const EDGE_SILENT_AFTER: Duration = Duration::from_secs(5);

/// What one refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Nothing new to publish: the counter is the published version's and no live value
    /// changed (or the recompiled bytes equal the published ones). `version` is the published one.
    Unchanged { version: u64 },
    /// A new snapshot was compiled and published.
    Published { version: u64, bytes: usize },
}

#[derive(Debug)]
pub struct Manager {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    dir: SnapshotDir,
    compile_interval: Duration,
    latest: watch::Sender<Option<Arc<Published>>>,
    /// The event aggregation, once attached; its metrics are served at `/metrics`.
    aggregator: OnceLock<Arc<Aggregator>>,
    /// Pacing and budget leases, once attached: `/metrics` and `/internal/v1/sync`.
    pacing: OnceLock<Arc<Pacing>>,
    /// The forecasting service, once attached: the API's and the dashboard's forecasts.
    forecasts: OnceLock<Arc<forecasts::ForecastService>>,
    live_options: LiveOptions,
    /// Live statistics and the catalog they compile from; held through a refresh, so that
    /// refreshes never overlap.
    live: Mutex<live::LiveState>,
    /// Every edge that reported, remote or in process.
    edges: EdgeRegistry,
    /// The shared secret remote edges register with and their logs are read with; unset:
    /// remote edges are refused.
    remote_secret: OnceLock<String>,
    /// Who may read `/metrics`; unset: loopback peers only.
    metrics_access: OnceLock<MetricsAccess>,
    /// Where the edges learn a request's location; unset: nowhere.
    geo: OnceLock<GeoAvailability>,
    /// The families `/metrics` serves: the edge registry's from the start, the aggregator's
    /// and pacing's once attached. Locked to register and to encode, never to record.
    metrics: std::sync::Mutex<Registry>,
}

impl Manager {
    /// Opens the manager and adopts the newest valid snapshot already on disk, so a restart
    /// without changes compiles nothing.
    pub async fn open(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        options: ManagerOptions,
    ) -> Result<Arc<Manager>, ManagerError> {
        Self::open_with_live(store, clock, options, LiveOptions::default()).await
    }

    /// The same with the re-render intervals of live statistics.
    pub async fn open_with_live(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        options: ManagerOptions,
        live_options: LiveOptions,
    ) -> Result<Arc<Manager>, ManagerError> {
        let dir = SnapshotDir::new(options.snapshot_dir).with_keep(options.keep);
        let on_disk = tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || read_latest(&dir)
        })
        .await??;
        let (latest, _) = watch::channel(on_disk);
        let edges = EdgeRegistry::new(Arc::clone(&clock), EDGE_SILENT_AFTER);
        let mut metrics = Registry::default();
        edges.register_metrics(&mut metrics);
        Ok(Arc::new(Manager {
            store,
            edges,
            metrics: std::sync::Mutex::new(metrics),
            remote_secret: OnceLock::new(),
            metrics_access: OnceLock::new(),
            geo: OnceLock::new(),
            clock,
            dir,
            compile_interval: options.compile_interval,
            latest,
            aggregator: OnceLock::new(),
            pacing: OnceLock::new(),
            forecasts: OnceLock::new(),
            live_options,
            live: Mutex::new(live::LiveState::default()),
        }))
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The clock the manager runs by (the API's reports read "now" from it too).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Attaches the event aggregation (once), so that `/metrics` reports it.
    pub fn attach_aggregator(&self, aggregator: Arc<Aggregator>) {
        match self.aggregator.set(aggregator) {
            Ok(()) => self.register_metrics(|registry| {
                if let Some(aggregator) = self.aggregator.get() {
                    aggregator.register_metrics(registry);
                }
            }),
            Err(_) => tracing::warn!("an aggregator is already attached; keeping the first"),
        }
    }

    pub fn aggregator(&self) -> Option<&Arc<Aggregator>> {
        self.aggregator.get()
    }

    /// Attaches pacing (once), so that `/metrics` and `/internal/v1/sync` serve it.
    pub fn attach_pacing(&self, pacing: Arc<Pacing>) {
        match self.pacing.set(pacing) {
            Ok(()) => self.register_metrics(|registry| {
                if let Some(pacing) = self.pacing.get() {
                    pacing.register_metrics(registry);
                }
            }),
            Err(_) => tracing::warn!("pacing is already attached; keeping the first"),
        }
    }

    /// Attaches the forecasting service (once): the router made after this serves the
    /// forecast endpoints, and the dashboard shows forecasts.
    pub fn attach_forecasts(&self, service: Arc<forecasts::ForecastService>) {
        if self.forecasts.set(service).is_err() {
            tracing::warn!("a forecasting service is already attached; keeping the first");
        }
    }

    pub fn forecasts(&self) -> Option<&Arc<forecasts::ForecastService>> {
        self.forecasts.get()
    }

    /// Keeps the attached forecasting service's forecaster current (see
    /// [`ForecastService::run`](forecasts::ForecastService::run)) until `shutdown`; returns
    /// at once without one.
    pub async fn run_forecast_loop(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        if let Some(service) = self.forecasts().cloned() {
            service.run(self, shutdown).await;
        }
    }

    fn register_metrics(&self, register: impl FnOnce(&mut Registry)) {
        // A panic while registering cannot leave the registry half-changed in a way that
        // matters: families are only appended.
        let mut registry = self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        register(&mut registry);
    }

    /// The manager's metrics as `/metrics` serves them: aggregation, pacing and leases, the
    /// edge registry.
    pub async fn encode_metrics(&self, format: Format) -> String {
        if let Some(pacing) = self.pacing() {
            pacing.publish_metrics().await;
        }
        let registry = self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        marquee_metrics::encode(&registry, format)
    }

    pub fn pacing(&self) -> Option<&Arc<Pacing>> {
        self.pacing.get()
    }

    /// Accepts remote edges from now on (their heartbeats must carry `secret`) and collects
    /// from those registered before a restart at once. Attach the aggregator first.
    pub async fn accept_remote_edges(&self, secret: String) -> Result<(), ManagerError> {
        let known: Vec<edges::Known> = match self.store.pacing_state(edges::STATE_NAME).await? {
            Some(body) => serde_json::from_str(&body)?,
            None => Vec::new(),
        };
        self.edges.restore(&known);
        for edge in &known {
            self.collect_from(edge, &secret);
        }
        if self.remote_secret.set(secret).is_err() {
            tracing::warn!("remote edges are already accepted; keeping the first secret");
        }
        Ok(())
    }

    /// Serves `/metrics` to the callers `access` allows from now on (set once, before serving;
    /// until then, and by default, loopback peers only).
    pub fn set_metrics_access(&self, access: MetricsAccess) {
        if self.metrics_access.set(access).is_err() {
            tracing::warn!("metrics access is already set; keeping the first");
        }
    }

    /// Who may read `/metrics`.
    pub fn metrics_access(&self) -> &MetricsAccess {
        static LOOPBACK_ONLY: MetricsAccess = MetricsAccess::loopback_only();
        self.metrics_access.get().unwrap_or(&LOOPBACK_ONLY)
    }

    /// Says where the edges learn a request's location (set once, before the router is made;
    /// until then, and by default, nowhere): the API's answers and the dashboard warn about
    /// line items whose geo targeting cannot match ad requests.
    pub fn set_geo_availability(&self, geo: GeoAvailability) {
        if self.geo.set(geo).is_err() {
            tracing::warn!("geo availability is already set; keeping the first");
        }
    }

    /// Where the edges learn a request's location.
    pub fn geo_availability(&self) -> GeoAvailability {
        self.geo.get().copied().unwrap_or_default()
    }

    /// The shared secret of remote edges, once [`accept_remote_edges`](Self::accept_remote_edges)
    /// ran.
    pub fn remote_secret(&self) -> Option<&str> {
        self.remote_secret.get().map(String::as_str)
    }

    /// Takes an edge's heartbeat (`in_process`: the edge of `marquee serve`, id `local`). A new
    /// remote edge, or one whose log moved, is persisted and then collected from.
    pub async fn report_edge(
        &self,
        report: marquee_pacing::EdgeReport,
        in_process: bool,
    ) -> Result<(), EdgeReportError> {
        let secret = match (in_process, self.remote_secret.get()) {
            (true, _) => None,
            (false, Some(secret)) => Some(secret),
            (false, None) => return Err(EdgeReportError::Off),
        };
        let edges::Change::Collect(known) = self.edges.heartbeat(report, in_process)? else {
            return Ok(());
        };
        self.persist_edges().await?;
        if let Some(secret) = secret {
            tracing::info!(edge = %known.id, log = %known.log_url, "edge registered");
            self.collect_from(&known, secret);
        }
        Ok(())
    }

    /// Forgets a remote edge gone for good: no longer listed, its log no longer read (its
    /// checkpoints stay stored, so an edge reporting under the id again resumes). Whether it
    /// was listed. A running edge registers again with its next heartbeat.
    pub async fn forget_edge(&self, id: &str) -> Result<bool, ManagerError> {
        if !self.edges.remove(id) {
            return Ok(false);
        }
        self.persist_edges().await?;
        if let Some(aggregator) = self.aggregator() {
            aggregator.remove_source(id);
        }
        tracing::info!(edge = %id, "edge removed from the registry");
        Ok(true)
    }

    async fn persist_edges(&self) -> Result<(), ManagerError> {
        let body = serde_json::to_string(&self.edges.known())?;
        self.store
            .save_pacing_state(edges::STATE_NAME, body)
            .await?;
        Ok(())
    }

    fn collect_from(&self, edge: &edges::Known, secret: &str) {
        let Some(aggregator) = self.aggregator() else {
            tracing::warn!(edge = %edge.id, "no aggregator attached; the edge's log is not collected");
            return;
        };
        aggregator.set_source(Arc::new(HttpLogSource::new(
            edge.id.clone(),
            &edge.log_url,
            secret,
        )));
    }

    /// Every edge that reported (or was registered before a restart), by id: address,
    /// snapshot, log lag, request rate, last heartbeat.
    pub fn edges(&self) -> Vec<EdgeStatus> {
        let latest = self.latest().map(|p| p.header.version);
        let aggregator = self.aggregator();
        self.edges
            .list(latest, |id| aggregator.and_then(|a| a.source_lag(id)))
    }

    /// The latest published snapshot, if any.
    pub fn latest(&self) -> Option<Arc<Published>> {
        self.latest.borrow().clone()
    }

    /// Notified on every publish; in-process edges follow it.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Published>>> {
        self.latest.subscribe()
    }

    /// Compiles and publishes a snapshot if the store changed since the last one, if a live
    /// statistic due for a render changed (see [`live`]), or if an edge serves a version above
    /// the published one.
    ///
    /// The version is never at or below one already published or served: an edge refuses
    /// every snapshot not newer than its own, so a version that went back (the database
    /// restored from a backup takes the change counter back; a lost snapshot directory
    /// restarts the live revision) would keep every change and pause from the edges, and each
    /// poll would download the whole snapshot to refuse it. So when the natural version
    /// (`counter × 2³² + revision`) is not above the published one and the highest an edge
    /// reports, the snapshot is published one above the higher of them, with a warning once.
    pub async fn refresh(&self) -> Result<Refresh, ManagerError> {
        let mut live = self.live.lock().await;
        let counter = self.store.change_counter().await?;
        let latest = self.latest();
        let published = latest.as_ref().map(|p| p.header.version);
        // Unknown after a start: the adopted snapshot's version tells, unless it was raised
        // (then one compile, published only if the bytes differ).
        let counter_known = live.compiled_counter().is_some();
        let compiled_counter = live
            .compiled_counter()
            .or(published.map(live::catalog_version));
        let catalog_moved = compiled_counter != Some(counter);
        // An edge serving a version above ours (the directory was lost, or the edge got it from
        // before a database restore) refuses ours: publish above it.
        let edge_ahead = self
            .edges
            .highest_snapshot_version()
            .filter(|&reported| published.is_none_or(|published| reported > published));
        let catalog = match live.catalog() {
            Some(catalog) if !catalog_moved => Arc::clone(catalog),
            _ => {
                let catalog = Arc::new(self.store.catalog().await?);
                live.set_catalog(Arc::clone(&catalog));
                catalog
            }
        };
        let now = self.clock.now();
        let values_changed = live
            .render_due(&*self.store, &self.live_options, now)
            .await?;
        let natural = match published {
            Some(published) if !catalog_moved => {
                // 2³² revisions are 136 years of renders a second; past them values wait for
                // the next catalog change rather than overflow into the counter.
                let revisions_left = live::revision(published) < u32::MAX;
                if edge_ahead.is_none() && !(values_changed && revisions_left) {
                    return Ok(Refresh::Unchanged { version: published });
                }
                published.saturating_add(1)
            }
            _ => live::version(counter, 0),
        };
        let floor = published.max(edge_ahead);
        let version = match floor {
            Some(floor) if natural <= floor => floor.saturating_add(1),
            _ => natural,
        };
        if live.note_raised(version != natural) {
            tracing::warn!(
                natural,
                version,
                published,
                edge_reports = edge_ahead,
                change_counter = counter,
                "the snapshot version would not be above one already published or served \
                 (the database restored from a backup, or the snapshot directory lost): \
                 publishing above it, since edges install only newer versions"
            );
        }
        let values = live.values().clone();
        live.count_compile();
        // A compile that produced the bytes already published is not published again: a live
        // re-render with the same values (the first after a restart), or the first compile
        // after a start that adopted a raised version. Unless an edge is ahead of them.
        let unchanged_payload = (edge_ahead.is_none() && (!catalog_moved || !counter_known))
            .then(|| latest.map(|p| p.bytes.slice(marquee_snapshot::HEADER_LEN..)))
            .flatten();
        let dir = self.dir.clone();
        // Compiling 100,000 line items takes a while: keep it off the async workers.
        let compiled = tokio::task::spawn_blocking(move || {
            let (mut snapshot, stats) = marquee_snapshot::compile_live(&catalog, now, &values);
            snapshot.version = version;
            let (header, bytes) = snapshot.encode_with_header();
            if unchanged_payload
                .is_some_and(|old| bytes.get(marquee_snapshot::HEADER_LEN..) == Some(&old[..]))
            {
                return Ok(None);
            }
            dir.publish(&bytes, &header)?;
            Ok::<_, DirError>(Some((published_from(header, bytes), stats)))
        })
        .await??;
        live.mark_published(counter);
        let Some((published, stats)) = compiled else {
            return Ok(Refresh::Unchanged {
                version: published.unwrap_or(version),
            });
        };
        let version = published.header.version;
        let bytes = published.bytes.len();
        tracing::info!(
            version,
            change_counter = counter,
            live_revision = live::revision(version),
            bytes,
            dropped = stats.total(),
            ?stats,
            "published snapshot"
        );
        self.latest.send_replace(Some(Arc::new(published)));
        Ok(Refresh::Published { version, bytes })
    }

    /// How many snapshots have been compiled since the manager opened (published or not).
    pub async fn compiles(&self) -> u64 {
        self.live.lock().await.compiles()
    }

    /// The live-statistics state of a creative, once it has been rendered.
    pub async fn live_status(&self, creative: u64) -> Option<LiveStatus> {
        self.live.lock().await.status(creative)
    }

    /// Refreshes every `compile_interval` until `shutdown` resolves. Errors are logged and
    /// retried on the next tick; the last good snapshot keeps being served.
    pub async fn run_compile_loop(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        let mut tick = tokio::time::interval(self.compile_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = tick.tick() => {
                    if let Err(error) = self.refresh().await {
                        tracing::error!(%error, "snapshot refresh failed; serving the last good one");
                    }
                }
            }
        }
    }
}

fn published_from(header: Header, bytes: Vec<u8>) -> Published {
    Published {
        etag: header.etag(),
        header,
        bytes: Bytes::from(bytes),
    }
}

/// The newest snapshot on disk that decodes cleanly; a corrupt one is logged and ignored so
/// that the next refresh replaces it.
fn read_latest(dir: &SnapshotDir) -> Result<Option<Arc<Published>>, DirError> {
    let Some((path, _)) = dir.latest()? else {
        return Ok(None);
    };
    let bytes = std::fs::read(&path).map_err(|source| DirError::Io {
        action: "read",
        path: path.clone(),
        source,
    })?;
    match Snapshot::decode(&bytes).and_then(|_| Header::parse(&bytes)) {
        Ok(header) => Ok(Some(Arc::new(published_from(header, bytes)))),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "ignoring unusable snapshot on disk");
            Ok(None)
        }
    }
}
