//! The registry as the management API and the metrics see it: every bidder's state and
//! counters, and switching one on or off.

use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::metrics::{self, BidderStats};
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
        let get = BidderStats::get;
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
            requests: get(&stats.requests),
            bids: get(&stats.bids),
            wins: get(&stats.wins),
            timeouts: get(&stats.timeouts),
            errors: get(&stats.errors),
            skipped_at_limit: get(&stats.skipped_at_limit),
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

    /// Appends the gateway's Prometheus metrics.
    pub fn render_metrics(&self, out: &mut String) {
        let internal = self.internal.iter().map(|i| {
            let enabled = i.enabled.load(Ordering::Relaxed);
            let stats = &self.internal_stats;
            (i.name.as_str(), stats, health::MAX_SCORE, 0, enabled)
        });
        let external = self.bidders.iter().map(|b| {
            (
                b.spec.name.as_str(),
                &b.stats,
                b.health.score(),
                b.in_flight(),
                b.enabled(),
            )
        });
        metrics::render(out, &self.stats, internal.chain(external));
    }
}
