//! The registry as the management API and the metrics see it: every bidder's state and
//! counters, and switching one on or off.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use marquee_metrics::Registry;
use serde::Serialize;

use crate::metrics::{self, BidderStats, ReadState};
use crate::{Gateway, UnknownBidder, health};

/// One bidder as the management API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct BidderView {
    pub name: String,
    /// `internal` for our own line items.
    pub endpoint: String,
    pub openrtb: &'static str,
    pub http2: bool,
    pub enabled: bool,
    pub health: u32,
    pub throttled: bool,
    pub in_flight: usize,
    pub max_in_flight: usize,
    pub requests: u64,
    pub bids: u64,
    pub wins: u64,
    pub timeouts: u64,
    pub errors: u64,
    pub skipped_at_limit: u64,
}

impl Gateway {
    /// Every bidder with its state and counters, the internal one first.
    pub fn bidders(&self) -> Vec<BidderView> {
        let view = |name: &str, endpoint: &str, stats: &BidderStats| BidderView {
            name: name.to_owned(),
            endpoint: endpoint.to_owned(),
            openrtb: "2.6",
            http2: false,
            enabled: true,
            health: health::MAX_SCORE,
            throttled: false,
            in_flight: 0,
            max_in_flight: 0,
            requests: stats.requests.get(),
            bids: stats.bids.get(),
            wins: stats.wins.get(),
            timeouts: stats.timeouts.get(),
            errors: stats.errors.get(),
            skipped_at_limit: stats.skipped_at_limit.get(),
        };
        let internal = self.internal.iter().map(|i| BidderView {
            enabled: i.enabled.load(Ordering::Relaxed),
            ..view(&i.name, "internal", &self.internal_stats)
        });
        let external = self.bidders.iter().map(|b| BidderView {
            openrtb: b.spec.version.header(),
            http2: b.spec.http2,
            enabled: b.enabled(),
            health: b.health.score(),
            throttled: b.health.throttled(),
            in_flight: b.in_flight(),
            max_in_flight: b.spec.max_in_flight,
            ..view(&b.spec.name, &b.spec.endpoint, &b.stats)
        });
        internal.chain(external).collect()
    }

    /// Switches a bidder on or off (until the next start: the configuration is the lasting
    /// source).
    pub fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), UnknownBidder> {
        if let Some(internal) = self.internal.as_ref().filter(|i| i.name == name) {
            internal.enabled.store(enabled, Ordering::Relaxed);
            return Ok(());
        }
        let bidder = self
            .bidders
            .iter()
            .find(|b| b.spec.name == name)
            .ok_or_else(|| UnknownBidder(name.to_owned()))?;
        bidder.enabled.store(enabled, Ordering::Relaxed);
        Ok(())
    }

    /// A bidder's counters by name (tests, dashboards).
    pub fn bidder_stats(&self, name: &str) -> Option<&BidderStats> {
        if self.internal.as_ref().is_some_and(|i| i.name == name) {
            return Some(&self.internal_stats);
        }
        self.bidders
            .iter()
            .find(|b| b.spec.name == name)
            .map(|b| &b.stats)
    }

    /// Registers the `marquee_gateway_*` families into `registry` (once per registry).
    pub fn register_metrics(&self, registry: &mut Registry) {
        let internal = self.internal.iter().map(|i| {
            let enabled = Arc::clone(&i.enabled);
            let read: Arc<ReadState> = Arc::new(move || {
                let on = enabled.load(Ordering::Relaxed);
                (i64::from(health::MAX_SCORE), 0, on)
            });
            (i.name.clone(), &self.internal_stats, read)
        });
        let external = self.bidders.iter().map(|b| {
            let bidder = Arc::clone(b);
            let read: Arc<ReadState> = Arc::new(move || {
                let in_flight = i64::try_from(bidder.in_flight()).unwrap_or(i64::MAX);
                let health = i64::from(bidder.health.score());
                (health, in_flight, bidder.enabled())
            });
            (b.spec.name.clone(), &b.stats, read)
        });
        let bidders: Vec<_> = internal.chain(external).collect();
        metrics::register(registry, &self.stats, &bidders);
    }
}
