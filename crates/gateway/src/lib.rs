//! Gateway mode: one incoming OpenRTB request fans out to several bidders at once
//! (external ones over kept-alive pools: HTTP/1.1 or h2c, or HTTPS with HTTP/2 where the
//! bidder offers it; and our own line items through the
//! edge's bidder), every bid is checked, the best valid bid per imp wins at a first or second
//! price, the answer leaves before the deadline, and win and loss notices go to each bidder
//! with the auction macros filled.
//!
//! Invariants:
//! - No call is waited for past the deadline less the response margin; a bidder at its limit
//!   of calls in flight is skipped at once, never queued for; a bidder whose health score
//!   throttles it gets one probe per interval.
//! - Every bid in the answer passed `validate_response` against the incoming request twice: in
//!   the bidder's answer, and in ours. Prices are integer micros throughout.
//! - The outcome depends only on the answers received, not on their order (ties: bidder name,
//!   then bid id).
//! - A notice goes only to the bidder endpoint's host or its `notice_hosts`, over http(s), and
//!   to an internal address only when the endpoint is internal too (`notice.rs`).
//!
//! See `crates/gateway/README.md` and `docs/life-of-a-gateway-auction.md`.

mod answer;
mod auction;
mod client;
mod collect;
pub mod config;
mod fan_out;
mod health;
mod macros;
pub mod metrics;
mod notice;
mod notify;
mod outgoing;
mod registry;
mod tls;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use bytes::Bytes;
use marquee_model::Currency;
use marquee_openrtb::{BidRequest, NoBidReason, ParseError};

pub use auction::RateConverter;
pub use client::BidderClient;
pub use config::{AuctionKind, BidderSpec, GatewayConfig, HealthConfig, Media, OpenRtbVersion};
pub use metrics::{BidderStats, GatewayStats};
pub use registry::BidderView;
pub use tls::TlsError;

use crate::auction::{Entry, Outcome, Rules};
use crate::health::Health;
use crate::outgoing::RawRequest;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("gateway bidder {name:?}: {message}")]
    Bidder { name: String, message: String },
    #[error("gateway TLS: {0}")]
    Tls(#[from] TlsError),
}

/// No bidder of that name (management API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no gateway bidder is named {0:?}")]
pub struct UnknownBidder(pub String);

/// Our own line items as a bidder: the edge's bid path on the same request.
pub trait InternalBidder: Sync {
    /// Our bid response for `json` (the incoming request, decoded), or `None` for no bid,
    /// in `currency` (the answer's) when the request allows it: the caller's clearing price,
    /// which bills our bid, is in the answer's currency.
    fn bid(&self, json: &[u8], currency: Currency) -> Option<Bytes>;
}

/// What an auction gives the edge to send.
#[derive(Debug, Default)]
pub struct Auctioned {
    /// The request's id (for a no-bid body).
    pub request_id: String,
    /// The answer (an OpenRTB bid response); `None`: no bid, for `no_bid` reason.
    pub response: Option<String>,
    pub no_bid: Option<NoBidReason>,
    /// Notice URLs for the internal bidder (the edge handles them in process): its losses, and
    /// its wins only when the gateway filled its billing URL (our bid in another currency).
    pub internal_notices: Vec<String>,
    /// Each bid of the answer (its id there) with the name of the bidder that made it: whose
    /// notice policy its billing URL goes through ([`Gateway::bill`]).
    pub bidders: Vec<(String, String)>,
    /// How the auction went for each external bidder called, in call order: for the caller's
    /// reports.
    pub called: Vec<Called>,
}

/// How one auction went for one external bidder it called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Called {
    /// The bidder, for [`Gateway::bidder_name`].
    pub bidder: usize,
    /// It did not answer in time.
    pub timed_out: bool,
    /// The bids of its answer.
    pub bids: u32,
}

/// Whom an auction may call: bidders on `exchange` (the path's name, empty for none), and of
/// those only the ones `bidders` names (all when it is empty).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chosen<'a> {
    pub exchange: &'a str,
    pub bidders: &'a [String],
}

/// The internal bidder's registry entry.
#[derive(Debug)]
struct Internal {
    name: String,
    /// Shared with the `enabled` gauge.
    enabled: Arc<AtomicBool>,
}

/// The gateway: the registry, the pools, the auction rules and the counters.
#[derive(Debug)]
pub struct Gateway {
    config: GatewayConfig,
    bidders: Vec<Arc<BidderClient>>,
    internal: Option<Internal>,
    /// The internal bidder's counters (zero when there is none).
    internal_stats: BidderStats,
    pub stats: GatewayStats,
}

/// Which bidder an entry's answer came from.
#[derive(Debug, Clone, Copy)]
enum Source {
    External(usize),
    Internal,
}

impl Gateway {
    /// Builds the registry and one connection pool per bidder. Call inside a tokio runtime
    /// (the pools' timers).
    pub fn new(mut config: GatewayConfig) -> Result<Gateway, GatewayError> {
        let origin = Instant::now();
        // One TLS configuration for all: the roots are read once.
        let tls = tls::client_config(config.tls_ca_file.as_deref())?;
        let bidders = std::mem::take(&mut config.bidders)
            .into_iter()
            .map(|spec| {
                let health = Health::new(config.health, origin);
                BidderClient::new(spec, health, &tls).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let internal = config.internal_bidder.as_ref().map(|name| Internal {
            name: name.clone(),
            enabled: Arc::new(AtomicBool::new(true)),
        });
        Ok(Gateway {
            config,
            bidders,
            internal,
            internal_stats: BidderStats::default(),
            stats: GatewayStats::default(),
        })
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// The name of external bidder `index` (as [`Called::bidder`] gives it).
    pub fn bidder_name(&self, index: usize) -> Option<&str> {
        self.bidders.get(index).map(|b| b.spec.name.as_str())
    }

    /// Sends a winning bid's billing notice (`burl`, macros filled) once the caller counted its
    /// impression, through the notice policy of the external bidder named `bidder`; false when
    /// there is no such bidder.
    pub fn bill(&self, bidder: &str, url: &str) -> bool {
        let Some(client) = self.bidders.iter().find(|b| b.spec.name == bidder) else {
            return false;
        };
        client.notify(url, self.config.notice_timeout);
        true
    }

    /// Runs one auction for `json` (the decoded request body) from `exchange` (the path's
    /// name, empty for none), answering by `deadline(tmax)` (`tmax` in milliseconds as the
    /// request gives it): fan out, gather the answers, run the auction, answer, count, notify.
    pub async fn auction(
        &self,
        json: &[u8],
        exchange: &str,
        deadline: impl FnOnce(Option<u32>) -> Instant,
        internal: Option<&dyn InternalBidder>,
    ) -> Result<Auctioned, ParseError> {
        self.auction_among(json, exchange, deadline, internal, &[])
            .await
    }

    /// [`Gateway::auction`] among the external bidders named in `bidders` only (all when it
    /// is empty): a publisher's placement may choose its demand.
    pub async fn auction_among(
        &self,
        json: &[u8],
        exchange: &str,
        deadline: impl FnOnce(Option<u32>) -> Instant,
        internal: Option<&dyn InternalBidder>,
        bidders: &[String],
    ) -> Result<Auctioned, ParseError> {
        let request = BidRequest::parse(json)?;
        let deadline = deadline(request.tmax);
        self.stats.auctions.inc();
        let request_id = request.id.to_string();
        let ready = match self.prepare(json, &request, deadline) {
            Ok(ready) => ready,
            Err(reason) => return Ok(Auctioned::no_bid(request_id, reason)),
        };
        let currency = ready.currency;
        let chosen = Chosen { exchange, bidders };
        let calls = self.fan_out(&request, &ready.raw, chosen, ready.now, ready.remaining);
        let (answers, mut called) = self
            .collect(json, &request, currency, internal, calls)
            .await;
        let (entries, sources) = self.entries(&answers);
        let mut outcomes = auction::run(&request, &entries, self.rules(currency));
        // First the answer: it decides which winners are offered, hence won.
        let mut placed = Vec::new();
        let answer = self.answer(
            &request,
            &entries,
            &sources,
            &mut outcomes,
            currency,
            &mut placed,
        );
        self.count_bids(&entries, &sources, &outcomes);
        let internal_notices = self.send_notices(&request, &entries, &sources, &outcomes, currency);
        let mut auctioned = self.auctioned(request_id, answer, internal_notices);
        for (entry, source) in entries.iter().zip(&sources) {
            if let Some(c) = called
                .iter_mut()
                .find(|c| matches!(source, Source::External(i) if *i == c.bidder))
            {
                c.bids = u32::try_from(entry.response.bids().count()).unwrap_or(u32::MAX);
            }
        }
        auctioned.called = called;
        auctioned.bidders = placed;
        Ok(auctioned)
    }

    /// What an auction needs before it fans out: the answer's currency, the request split for
    /// the bidders' bodies, and the time left; or why there is no auction.
    fn prepare<'j>(
        &self,
        json: &'j [u8],
        request: &BidRequest<'_>,
        deadline: Instant,
    ) -> Result<Ready<'j>, NoBidReason> {
        let currency = self
            .answer_currency(request)
            .ok_or(NoBidReason::INVALID_REQUEST)?;
        // The request parsed, so it splits: a failure here would be a bug, answered as one.
        let raw = RawRequest::parse(json).map_err(|_| NoBidReason::TECHNICAL_ERROR)?;
        let now = Instant::now();
        let wait_until = deadline.checked_sub(self.config.response_margin);
        let remaining = wait_until
            .map(|w| w.saturating_duration_since(now))
            .filter(|r| !r.is_zero())
            .ok_or(NoBidReason::INSUFFICIENT_AUCTION_TIME)?;
        Ok(Ready {
            currency,
            raw,
            now,
            remaining,
        })
    }

    fn rules(&self, currency: Currency) -> Rules<'_> {
        Rules {
            kind: self.config.auction,
            deals_first: self.config.deals_first,
            currency,
            rates: &self.config.rates,
        }
    }

    /// Counts each entry's bids, valid bids and wins on its bidder.
    fn count_bids(&self, entries: &[Entry<'_>], sources: &[Source], outcomes: &[Outcome]) {
        for (e, (valid, wins)) in auction::tally(entries.len(), outcomes)
            .into_iter()
            .enumerate()
        {
            let stats = self.stats_of(sources[e]);
            let received = entries[e].response.bids().count() as u64;
            stats.bids.inc_by(valid);
            stats.wins.inc_by(wins);
            stats.invalid_bids.inc_by(received - valid);
        }
    }

    /// The auction's result for the edge: the answer, or no bid when nothing was left to offer.
    fn auctioned(
        &self,
        request_id: String,
        answer: Option<String>,
        internal_notices: Vec<String>,
    ) -> Auctioned {
        if answer.is_some() {
            self.stats.filled.inc();
        }
        Auctioned {
            request_id,
            no_bid: answer.is_none().then_some(NoBidReason::UNKNOWN_ERROR),
            response: answer,
            internal_notices,
            ..Auctioned::default()
        }
    }

    /// The answer's currency: ours when the request allows it, else the first of the
    /// request's that the rates know.
    fn answer_currency(&self, request: &BidRequest<'_>) -> Option<Currency> {
        if request.allows_currency(self.config.currency.as_str()) {
            return Some(self.config.currency);
        }
        request
            .cur
            .iter()
            .filter_map(|c| Currency::try_from(c.as_ref()).ok())
            .find(|&c| self.config.rates.knows(c))
    }

    fn stats_of(&self, source: Source) -> &BidderStats {
        match source {
            Source::External(i) => &self.bidders[i].stats,
            Source::Internal => &self.internal_stats,
        }
    }

    fn name_of(&self, source: Source) -> &str {
        match source {
            Source::External(i) => &self.bidders[i].spec.name,
            Source::Internal => self.internal.as_ref().map_or("internal", |i| &i.name),
        }
    }

    fn permille_of(&self, source: Source) -> u32 {
        match source {
            Source::External(i) => self.bidders[i].spec.price_permille,
            Source::Internal => 1_000,
        }
    }
}

/// What [`Gateway::prepare`] found: an auction can run.
struct Ready<'j> {
    currency: Currency,
    raw: RawRequest<'j>,
    now: Instant,
    remaining: Duration,
}

impl Auctioned {
    fn no_bid(request_id: String, reason: NoBidReason) -> Auctioned {
        Auctioned {
            request_id,
            no_bid: Some(reason),
            ..Auctioned::default()
        }
    }
}
