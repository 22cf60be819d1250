//! The edge: answers ad requests and tracking calls from the snapshot in memory, and appends
//! every event to the local log. On its hot path it does no I/O but its socket and the log
//! append (and, with `[redis]`, Redis round trips within the request's deadline, never while the
//! engine decides), takes no lock shared across cores (the snapshot is read through an atomic pointer,
//! working memory is per thread), and fills prepared ad code instead of rendering templates.
//!
//! Invariants:
//! - A request is answered from one snapshot from start to end, even when a swap happens in
//!   between; a bad snapshot never replaces a good one.
//! - A tracking call is counted only if its token verifies (key, MAC, expiry, kind) and its
//!   decision was not counted before; the browser gets the same answer either way.
//! - A click goes only to the landing URL of the creative its signed token names.
//! - An ad or bid request that cannot start now (`max_in_flight` in progress, or the workers
//!   behind by more than `max_queue_delay` or three quarters of the request's deadline, whichever
//!   is longer, and the request outside the share that still starts)
//!   is answered at once with the fallback or a 204, never queued; one past its deadline is
//!   abandoned with the fallback.

mod ad;
pub mod bid;
mod client;
mod device_cache;
mod events;
mod gateway;
pub mod geo;
pub mod holder;
mod http;
mod idle_body;
mod image_tag;
pub mod log_service;
pub mod metrics;
pub mod notice;
pub mod overload;
pub mod pacing;
pub mod periodic;
pub mod poll;
mod profiles;
pub mod quality;
pub mod query;
pub mod remote;
mod render;
pub mod sampling;
mod server;
mod shared;
pub mod sync;
mod track;
mod visitor;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use marquee_engine::LocalCaps;
use marquee_eventlog::EventLog;
use marquee_metrics::{Counter, Registry};
use marquee_model::{Clock, SystemClock};
use marquee_tracking::{KeyRing, ReplayConfig, ReplayGuard};

pub use bid::{BidderConfig, Exchange};
pub use holder::{Holder, InstallError, Loaded};
pub use metrics::{Endpoint, Metrics, Outcome};
pub use overload::{Admitted, Gate, Limits};
pub use quality::{Quality, QualityRules};
pub use server::{Shutdown, serve, serve_here};

/// What the edge answers when no line item may serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// An empty answer (an empty document, no ad in JSON, a transparent pixel).
    Empty,
    /// Send the browser to another ad server's tag.
    Passback(String),
}

#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Base URL under which browsers reach this edge, for tracking URLs: `https://ads.example.com`.
    pub public_url: String,
    /// How long tracking tokens stay valid.
    pub token_lifetime: Duration,
    pub fallback: Fallback,
    /// Whether the edge may set a first-party user id cookie (still only with consent).
    pub cookies: bool,
    /// A request header carrying the client's country (ISO 3166-1 alpha-2), set by a CDN or
    /// load balancer in front.
    pub country_header: Option<String>,
    /// Where the last good snapshot is kept.
    pub data_dir: PathBuf,
    /// Overload protection, deadlines and request limits.
    pub limits: Limits,
}

/// Counts the edge keeps; exported as metrics (the handles are registered, so a count is one
/// relaxed atomic addition).
#[derive(Debug, Default)]
pub struct EdgeCounters {
    pub ad_requests: Counter,
    pub decisions: Counter,
    pub fallbacks: Counter,
    pub bad_requests: Counter,
    pub impressions: Counter,
    pub clicks: Counter,
    pub conversions: Counter,
    /// Tracking calls whose token was malformed, forged, altered, expired or of another kind.
    pub invalid_tokens: Counter,
    /// Tracking calls for a decision already counted.
    pub repeats: Counter,
    /// Events the log refused (disk full, I/O error).
    pub log_errors: Counter,
    /// Ad requests answered with the fallback at once because `max_in_flight` were in progress
    /// or the workers were behind.
    pub shed: Counter,
    /// Ad requests abandoned at their deadline.
    pub late: Counter,
    /// Ad decisions not served because Redis found one of their frequency caps full (another
    /// edge filled it).
    pub shared_cap_refusals: Counter,
}

/// Image-tag impressions one edge remembers for their clicks (about 100 bytes each).
const IMAGES_REMEMBERED: usize = 1 << 20;

/// One edge: its snapshot, its log, its keys and its counters.
#[derive(Debug)]
pub struct Edge {
    pub config: EdgeConfig,
    pub holder: Arc<Holder>,
    pub log: Arc<EventLog>,
    pub(crate) keys: KeyRing,
    pub(crate) caps: LocalCaps,
    pub counters: EdgeCounters,
    /// Requests by endpoint and outcome, latencies.
    pub metrics: Metrics,
    /// Every family `/metrics` serves, of the parts the edge has now (see [`Edge::registered`]).
    registry: Registry,
    /// The bound on ad requests in progress.
    pub gate: Arc<Gate>,
    /// The OpenRTB bidder: settings, user matches, notice dedupe, counters.
    pub bidder: bid::Bidder,
    /// Set to serve the log to a remote manager at `/log/…` (see [`log_service`]).
    pub log_access: Option<log_service::LogAccess>,
    /// Pacing controls and budget leases (see [`pacing`]).
    pub pacing: Arc<pacing::EdgePacing>,
    /// Gateway mode (`/openrtb2/auction`), when bidders are configured.
    pub gateway: Option<marquee_gateway::Gateway>,
    /// Caps and budget counters shared with other edges through Redis (`[redis]`); `None`
    /// keeps them in this process only.
    pub shared: Option<marquee_sharedstate::SharedState>,
    /// User profiles held in this process (the embedded default; with `[redis]` they live in
    /// Redis). See `profiles.rs`.
    pub(crate) profiles: marquee_sharedstate::MemoryProfiles,
    /// Who may read `/metrics` (loopback peers only unless a token is set).
    pub(crate) metrics_access: marquee_model::MetricsAccess,
    /// The invalid-traffic screen of events and bid requests (see [`quality`]).
    pub(crate) quality: Quality,
    /// Where visitors are, by their address (`[geo]`, or the demo's database); `None` leaves
    /// the country header as the only source of location (see `visitor.rs`).
    pub geo: Option<Arc<marquee_geo::GeoSource>>,
    /// The image-tag impressions served within the click window (see `image_tag.rs`).
    images: image_tag::ServedImages,
    /// How the replay guards (here and the bidder's) are sized.
    replay: ReplayConfig,
    /// The replay guards of tracking tokens (see `track/`).
    tracking_seen: track::TrackingSeen,
    /// Which ad requests are kept for forecasting (see [`sampling`]); `None` keeps none.
    pub(crate) sampling: Option<sampling::Sampling>,
    /// The time requests are decided, tokens issued and verified, and events stamped at: the
    /// system's, or a test's simulated time (see [`Edge::with_clock`]).
    clock: Arc<dyn Clock>,
}

impl Edge {
    /// A place for one more ad request, or `None` when `max_in_flight` are in progress, or when
    /// the workers are behind by more than `max_queue_delay` (or three quarters of the ad
    /// deadline, if longer) and this request is not in the share that still starts. The server
    /// takes one per ad request; tests may hold one to saturate the edge.
    pub fn try_admit(&self) -> Option<Admitted<'_>> {
        self.gate.try_enter(self.config.limits.deadline)
    }

    /// [`Edge::try_admit`] for an OpenRTB request (bid or gateway auction) from `exchange`: its
    /// queue may take up to three quarters of the exchange's default answer time (less the
    /// network margin) before requests are shed.
    pub fn try_admit_bid(&self, exchange: &bid::Exchange) -> Option<Admitted<'_>> {
        self.gate.try_enter(
            exchange
                .default_tmax
                .saturating_sub(exchange.latency_margin),
        )
    }

    /// Installs a snapshot and keeps a copy on disk for the next start. Slow for large
    /// snapshots (it builds the index): call it off the async workers.
    pub fn accept_snapshot(&self, bytes: &[u8]) -> Result<u64, InstallError> {
        let version = self.holder.install(bytes)?;
        if let Some(loaded) = self.holder.current() {
            self.pacing.attach(&loaded);
        }
        if let Err(error) = holder::save_local_copy(&self.config.data_dir, bytes) {
            tracing::warn!(%error, "cannot keep a local copy of the snapshot");
        }
        Ok(version)
    }

    /// The bidder's settings (exchanges, currency rates); the defaults otherwise.
    pub fn with_bidder(mut self, config: BidderConfig) -> Edge {
        self.bidder = bid::Bidder::with_replay(config, self.replay);
        self.registered()
    }

    /// Sizes every replay guard (impressions, clicks, conversions; the bidder's wins, billing
    /// and losses) for `per_minute` new tokens of one kind expiring in the same minute
    /// (`tracking.replay_capacity_per_minute`; at least 1). Beyond it a guard forgets early and
    /// counts it in [`ReplayGuard::overflows`], exported as
    /// `marquee_tracking_replay_overflows_total`: repeats of forgotten nonces are counted (and
    /// charged to budget leases) again on this edge, and only the manager dedupes them.
    pub fn with_replay_capacity(mut self, per_minute: u64) -> Edge {
        let capacity = usize::try_from(per_minute)
            .ok()
            .and_then(std::num::NonZeroUsize::new)
            .unwrap_or(std::num::NonZeroUsize::MIN);
        self.replay = ReplayConfig {
            bucket_capacity: capacity,
            ..self.replay
        };
        self.tracking_seen = track::TrackingSeen::new(self.replay);
        self.bidder.set_replay(self.replay);
        self.registered()
    }

    /// The replay guard of a tracking kind.
    pub(crate) fn replay_guard(&self, kind: marquee_tracking::TokenKind) -> &ReplayGuard {
        self.tracking_seen.of(kind)
    }

    /// Every replay guard with its kind, as labelled in metrics.
    pub(crate) fn replay_guards(&self) -> [(&'static str, &Arc<ReplayGuard>); 6] {
        let [impression, click, conversion] = self.tracking_seen.labelled();
        let [win, billing, loss] = self.bidder.replay_guards();
        [impression, click, conversion, win, billing, loss]
    }

    /// The lifetime of the tokens this edge signs, in seconds as they carry it.
    #[inline]
    pub(crate) fn token_lifetime_secs(&self) -> u32 {
        u32::try_from(self.config.token_lifetime.as_secs()).unwrap_or(u32::MAX)
    }

    /// Shares caps and budget counters with other edges through Redis.
    pub fn with_shared_state(mut self, shared: marquee_sharedstate::SharedState) -> Edge {
        self.shared = Some(shared);
        self.registered()
    }

    /// Screens events and bid requests with `quality`'s lists and rules (the default: the
    /// shipped lists and default rules).
    pub fn with_quality(mut self, quality: Quality) -> Edge {
        self.quality = quality;
        self.registered()
    }

    /// Locates visitors with `geo`'s databases.
    pub fn with_geo(mut self, geo: Arc<marquee_geo::GeoSource>) -> Edge {
        self.geo = Some(geo);
        self.registered()
    }

    /// Serves the event log at `/log/…` to callers with `access`'s token.
    pub fn with_log_access(mut self, access: log_service::LogAccess) -> Edge {
        self.log_access = Some(access);
        self
    }

    /// Keeps the sample of ad requests `sampling` asks for (the default: none).
    pub fn with_sampling(mut self, sampling: Option<sampling::Sampling>) -> Edge {
        self.sampling = sampling;
        self
    }

    /// Reads the time of requests from `clock` instead of the system's: a test drives the
    /// edge through simulated days with a [`marquee_model::ManualClock`]. Pacing leases keep
    /// the system's time.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Edge {
        self.clock = clock;
        self
    }

    /// The time of a request (see [`Edge::with_clock`]).
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Runs gateway auctions (`/openrtb2/auction`) with `gateway`'s bidders.
    pub fn with_gateway(mut self, gateway: marquee_gateway::Gateway) -> Edge {
        self.gateway = Some(gateway);
        self.registered()
    }

    /// Serves `/metrics` to the callers `access` allows (the default: loopback peers only).
    pub fn with_metrics_access(mut self, access: marquee_model::MetricsAccess) -> Edge {
        self.metrics_access = access;
        self
    }

    /// The edge with its registry holding the families of the parts it has now. Every builder
    /// that adds or replaces a part ends here: prometheus-client cannot unregister a family, and
    /// a replaced part (the bidder, the screen, the replay guards) must not stay registered.
    /// Building a registry only clones handles; it happens before serving.
    fn registered(mut self) -> Edge {
        self.registry = metrics::registry(&self);
        self
    }

    pub fn new(config: EdgeConfig, log: Arc<EventLog>, keys: KeyRing) -> Edge {
        Edge {
            shared: None,
            metrics_access: marquee_model::MetricsAccess::default(),
            quality: Quality::default(),
            geo: None,
            images: image_tag::ServedImages::new(IMAGES_REMEMBERED),
            profiles: profiles::load(&config.data_dir),
            bidder: bid::Bidder::new(BidderConfig::default()),
            gate: Arc::new(Gate::new(&config.limits)),
            log_access: None,
            gateway: None,
            pacing: Arc::new(pacing::EdgePacing::new(config.token_lifetime)),
            metrics: Metrics::default(),
            registry: Registry::default(),
            config,
            holder: Arc::default(),
            log,
            keys,
            caps: LocalCaps::default(),
            counters: EdgeCounters::default(),
            replay: ReplayConfig::default(),
            tracking_seen: track::TrackingSeen::new(ReplayConfig::default()),
            sampling: None,
            clock: Arc::new(SystemClock),
        }
        .registered()
    }
}
