//! Traffic quality: the general invalid traffic (GIVT) screen every counted event passes
//! before it is counted, capped, charged or paced, and every bid request before the bidder
//! decides. Invalid events are still logged, with their reason, so that reports show them;
//! they are never billed. See `docs/traffic-quality.md`.
//!
//! The screen runs in a fixed order, first match wins: `HEAD` (crawler), prefetch, a known
//! crawler's user agent (or none at all), a data-centre address, then the per-client rates.
//! The lists are compiled once into matchers (`marquee-traffic`) and swapped whole when their
//! files change; the rates are counted per minute in sharded, bounded counters.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use marquee_eventlog::InvalidReason;
use marquee_metrics::{Counter, Def, Labelled, Registry};
use marquee_tracking::TokenKind;
use marquee_traffic::{CrawlerList, ListError, NetworkList, RateLimiter, Reload, Watched};

use crate::client::Client;

/// The screen's rules. A limit of 0 switches its rule off.
#[derive(Debug, Clone)]
pub struct QualityRules {
    /// Counted events (impressions, clicks, conversions) one user key may make per minute.
    pub events_per_user_per_minute: u32,
    /// Counted events one address prefix (/24 for IPv4, /48 for IPv6) may make per minute.
    pub events_per_prefix_per_minute: u32,
    /// Image-tag impressions one address prefix may make per minute: each fresh cache buster
    /// is a new impression, so a client cycling them is a flood.
    pub image_tags_per_prefix_per_minute: u32,
    /// A click sooner than this after its impression (or decision) is no person's.
    pub min_click_delay: Duration,
    /// How long an image tag's click may follow its image.
    pub image_click_window: Duration,
    /// A signed click whose impression this edge did not count is invalid
    /// (`click_without_impression`). Off by default: a beacon blocked in the browser, or
    /// counted by another edge without shared state, would make a person's click invalid.
    pub clicks_need_impression: bool,
    /// Proxies whose forwarded client address is believed (`X-Forwarded-For`, `Forwarded`).
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for QualityRules {
    /// The configuration's defaults (`[traffic]`), except the click delay: none here, so that
    /// an edge built in code (tests, embedders) counts clicks made at once; `marquee` sets the
    /// configured one (1 s by default).
    fn default() -> Self {
        QualityRules {
            events_per_user_per_minute: 120,
            events_per_prefix_per_minute: 1_200,
            image_tags_per_prefix_per_minute: 30,
            min_click_delay: Duration::ZERO,
            image_click_window: Duration::from_secs(3_600),
            clicks_need_impression: false,
            trusted_proxies: Vec::new(),
        }
    }
}

/// The event kinds the screen counts invalid ones of, with their metric labels.
const SCREENED: [(TokenKind, &str); 3] = [
    (TokenKind::Impression, "impression"),
    (TokenKind::Click, "click"),
    (TokenKind::Conversion, "conversion"),
];

const REASONS: usize = InvalidReason::ALL.len();

/// Counts of the screen, exported as metrics.
#[derive(Debug, Default)]
pub struct QualityCounters {
    /// Invalid events by kind and reason (index `reason code - 1`).
    invalid: [[Counter; REASONS]; 3],
    /// Bid requests answered no-bid as crawler or data-centre traffic.
    pub(crate) bids_from_crawlers: Counter,
    pub(crate) bids_from_datacenters: Counter,
    /// List reloads that failed (the last good list kept).
    pub(crate) list_reload_failures: Counter,
}

impl QualityCounters {
    #[cfg(test)]
    pub(crate) fn invalid(&self, kind: TokenKind, reason: InvalidReason) -> u64 {
        self.slot(kind, reason).map_or(0, Counter::get)
    }

    fn slot(&self, kind: TokenKind, reason: InvalidReason) -> Option<&Counter> {
        // Token kinds are 1 to 3 on the wire.
        let by_kind = self.invalid.get((kind as usize).checked_sub(1)?)?;
        by_kind.get(usize::from(reason.code()).checked_sub(1)?)
    }
}

/// The traffic-quality screen of one edge.
#[derive(Debug)]
pub struct Quality {
    pub rules: QualityRules,
    crawlers: Watched<CrawlerList>,
    datacenters: Watched<NetworkList>,
    per_user: RateLimiter,
    per_prefix: RateLimiter,
    images_per_prefix: RateLimiter,
    pub(crate) counters: QualityCounters,
}

impl Default for Quality {
    /// The shipped lists and the default rules.
    fn default() -> Self {
        Quality::new(
            QualityRules::default(),
            Watched::new(CrawlerList::builtin(), None),
            Watched::new(NetworkList::builtin(), None),
        )
    }
}

/// Clients one rate limiter remembers per minute: beyond it the oldest are forgotten.
const RATE_KEYS_PER_MINUTE: usize = 1 << 18;

impl Quality {
    pub fn new(
        rules: QualityRules,
        crawlers: Watched<CrawlerList>,
        datacenters: Watched<NetworkList>,
    ) -> Quality {
        Quality {
            rules,
            crawlers,
            datacenters,
            per_user: RateLimiter::new(RATE_KEYS_PER_MINUTE),
            per_prefix: RateLimiter::new(RATE_KEYS_PER_MINUTE),
            images_per_prefix: RateLimiter::new(RATE_KEYS_PER_MINUTE),
            counters: QualityCounters::default(),
        }
    }

    /// The screen with lists from files (`None`: the shipped list); a file that cannot be read
    /// or parsed fails with its name and line.
    pub fn open(
        rules: QualityRules,
        crawlers: Option<PathBuf>,
        datacenters: Option<PathBuf>,
    ) -> Result<Quality, ListError> {
        let crawlers = match crawlers {
            Some(path) => Watched::open(&path)?,
            None => Watched::new(CrawlerList::builtin(), None),
        };
        let datacenters = match datacenters {
            Some(path) => Watched::open(&path)?,
            None => Watched::new(NetworkList::builtin(), None),
        };
        Ok(Quality::new(rules, crawlers, datacenters))
    }

    /// Why an event of `client` (with `user`, a user key or 0) is invalid, if it is; a valid
    /// one is counted against the client's rates.
    pub(crate) fn screen(
        &self,
        client: &Client<'_>,
        user: u64,
        now_secs: i64,
    ) -> Option<InvalidReason> {
        self.screen_at(client, client.ip(), user, now_secs)
    }

    /// [`screen`](Self::screen) for an image-tag impression, which also counts against the
    /// client's image-tag rate (fresh cache busters from one client).
    pub(crate) fn screen_image(
        &self,
        client: &Client<'_>,
        user: u64,
        now_secs: i64,
    ) -> Option<InvalidReason> {
        let ip = client.ip();
        let reason = self.screen_at(client, ip, user, now_secs);
        if reason.is_some() {
            return reason;
        }
        let limit = self.rules.image_tags_per_prefix_per_minute;
        match ip.filter(is_client_address) {
            Some(ip)
                if limit > 0
                    && self.images_per_prefix.over(
                        marquee_traffic::prefix_key(ip),
                        limit,
                        now_secs,
                    ) =>
            {
                Some(InvalidReason::Rate)
            }
            _ => None,
        }
    }

    /// The screen of a client whose address is `ip`.
    fn screen_at(
        &self,
        client: &Client<'_>,
        ip: Option<IpAddr>,
        user: u64,
        now_secs: i64,
    ) -> Option<InvalidReason> {
        if client.head() {
            return Some(InvalidReason::Crawler);
        }
        if client.prefetch() {
            return Some(InvalidReason::Prefetch);
        }
        // A missing user agent is not judged by itself: proxies and server-side callers strip
        // it, and the lists name the scripts that do send one.
        if self.crawlers.current().is_crawler(client.user_agent()) {
            return Some(InvalidReason::Crawler);
        }
        if let Some(ip) = ip
            && self.datacenters.current().contains(ip)
        {
            return Some(InvalidReason::Datacenter);
        }
        let over = |limiter: &RateLimiter, key: u64, limit: u32| {
            limit > 0 && limiter.over(key, limit, now_secs)
        };
        if user != 0 && over(&self.per_user, user, self.rules.events_per_user_per_minute) {
            return Some(InvalidReason::Rate);
        }
        if let Some(ip) = ip.filter(is_client_address)
            && over(
                &self.per_prefix,
                marquee_traffic::prefix_key(ip),
                self.rules.events_per_prefix_per_minute,
            )
        {
            return Some(InvalidReason::Rate);
        }
        None
    }

    /// Why a bid request's device is invalid traffic, if it is: a known crawler's user agent
    /// or a data-centre address (an absent user agent is not judged: apps' requests may
    /// carry none).
    pub(crate) fn screen_bid(
        &self,
        user_agent: &[u8],
        ip: Option<IpAddr>,
    ) -> Option<InvalidReason> {
        if !user_agent.is_empty() && self.crawlers.current().is_crawler(user_agent) {
            self.counters.bids_from_crawlers.inc();
            return Some(InvalidReason::Crawler);
        }
        if let Some(ip) = ip
            && self.datacenters.current().contains(ip)
        {
            self.counters.bids_from_datacenters.inc();
            return Some(InvalidReason::Datacenter);
        }
        None
    }

    /// Whether a click made `elapsed` after its impression came too soon.
    pub(crate) fn too_fast(&self, elapsed: Duration) -> bool {
        elapsed < self.rules.min_click_delay
    }

    /// Counts one invalid event.
    pub(crate) fn count(&self, kind: TokenKind, reason: InvalidReason) {
        if let Some(counter) = self.counters.slot(kind, reason) {
            counter.inc();
        }
    }

    /// Reloads the list files that changed on disk; a file that fails keeps the last good
    /// list, and says so in the log and `marquee_traffic_list_reload_failures_total`.
    pub fn reload_lists(&self) {
        let outcomes = [
            ("crawlers", self.crawlers.reload_if_changed()),
            ("datacenters", self.datacenters.reload_if_changed()),
        ];
        for (list, outcome) in outcomes {
            match outcome {
                Reload::Unchanged => {}
                Reload::Reloaded { entries } => {
                    tracing::info!(list, entries, "traffic-quality list reloaded");
                }
                Reload::Failed(error) => {
                    self.counters.list_reload_failures.inc();
                    tracing::error!(list, %error, "traffic-quality list not reloaded; the last good one stays");
                }
            }
        }
    }
}

/// Whether an address can be a client on the public web: loopback, private and link-local
/// addresses are proxies in front of the edge (not named in `edge.trusted_proxies`), whose one
/// prefix carries every client: counting a rate per prefix there would refuse them all.
fn is_client_address(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !(v4.is_loopback() || v4.is_private() || v4.is_link_local()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_client_address(&IpAddr::V4(v4)),
            None => !(v6.is_loopback() || v6.is_unique_local() || v6.is_unicast_link_local()),
        },
    }
}

/// Reloads the list files that changed, every `every`, until `stop`.
pub async fn reload_lists_every(
    edge: std::sync::Arc<crate::Edge>,
    every: Duration,
    stop: impl Future<Output = ()>,
) {
    let mut schedule = crate::periodic::Schedule::new(every, stop);
    // The first tick is at once: the lists were just loaded.
    if !schedule.next().await {
        return;
    }
    while schedule.next().await {
        let edge = std::sync::Arc::clone(&edge);
        let _ = tokio::task::spawn_blocking(move || edge.quality.reload_lists()).await;
    }
}

const INVALID_EVENTS: Def = Def::new(
    "marquee_invalid_events",
    "Events judged invalid traffic (logged with their reason, never counted, charged, capped or paced), by kind and reason.",
);
const INVALID_BID_REQUESTS: Def = Def::new(
    "marquee_bidder_invalid_requests",
    "Bid requests answered no-bid as invalid traffic, by reason.",
);
const LIST_RELOAD_FAILURES: Def = Def::new(
    "marquee_traffic_list_reload_failures",
    "Crawler or data-centre list files that changed but could not be read or parsed (the last good list stays).",
);

/// The screen's families: invalid events by kind and reason, bid requests refused, reloads
/// that failed.
pub(crate) fn register_metrics(registry: &mut Registry, counters: &QualityCounters) {
    let invalid = SCREENED.iter().flat_map(|&(kind, label)| {
        InvalidReason::ALL.iter().filter_map(move |&reason| {
            let count = counters.slot(kind, reason)?.clone();
            Some(([("kind", label), ("reason", reason.label())], count))
        })
    });
    INVALID_EVENTS.register(registry, Labelled::new(invalid));
    let bids = Labelled::new([
        ([("reason", "crawler")], counters.bids_from_crawlers.clone()),
        (
            [("reason", "datacenter")],
            counters.bids_from_datacenters.clone(),
        ),
    ]);
    INVALID_BID_REQUESTS.register(registry, bids);
    LIST_RELOAD_FAILURES.register(registry, counters.list_reload_failures.clone());
}
