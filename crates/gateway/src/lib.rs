//! Gateway mode: one incoming OpenRTB request fans out to several bidders at once
//! (external ones over kept-alive HTTP/1.1 or h2c pools, and our own line items through the
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

mod auction;
mod client;
pub mod config;
mod health;
pub mod metrics;
mod notice;
mod outgoing;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use marquee_model::Currency;
use marquee_openrtb::{
    AuctionMacros, Bid, BidRequest, BidResponse, Imp, LossReason, NoBidReason, ParseError, Rule,
    SeatBid, Violation, format_micros, validate_response,
};
use serde::Serialize;
use tokio::sync::oneshot;

pub use auction::RateConverter;
pub use client::BidderClient;
pub use config::{AuctionKind, BidderSpec, GatewayConfig, HealthConfig, Media, OpenRtbVersion};
pub use metrics::{BidderStats, GatewayStats};

use crate::auction::{Entry, Outcome, Rules};
use crate::client::Answer;
use crate::health::Health;
use crate::outgoing::RawRequest;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("gateway bidder {name:?}: {message}")]
    Bidder { name: String, message: String },
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
}

/// The internal bidder's registry entry.
#[derive(Debug)]
struct Internal {
    name: String,
    enabled: AtomicBool,
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
        let bidders = std::mem::take(&mut config.bidders)
            .into_iter()
            .map(|spec| {
                let health = Health::new(config.health, origin);
                BidderClient::new(spec, health).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let internal = config.internal_bidder.as_ref().map(|name| Internal {
            name: name.clone(),
            enabled: AtomicBool::new(true),
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

    /// Runs one auction for `json` (the decoded request body) from `exchange` (the path's
    /// name, empty for none), answering by `deadline(tmax)` (`tmax` in milliseconds as the
    /// request gives it).
    pub async fn auction(
        &self,
        json: &[u8],
        exchange: &str,
        deadline: impl FnOnce(Option<u32>) -> Instant,
        internal: Option<&dyn InternalBidder>,
    ) -> Result<Auctioned, ParseError> {
        let request = BidRequest::parse(json)?;
        let deadline = deadline(request.tmax);
        BidderStats::bump(&self.stats.auctions);
        let request_id = request.id.to_string();
        let no_bid = |reason| {
            Ok(Auctioned {
                request_id: request_id.clone(),
                no_bid: Some(reason),
                ..Auctioned::default()
            })
        };
        let Some(currency) = self.answer_currency(&request) else {
            return no_bid(NoBidReason::INVALID_REQUEST);
        };
        // The request parsed, so it splits: a failure here would be a bug, answered as one.
        let Ok(raw) = RawRequest::parse(json) else {
            return no_bid(NoBidReason::TECHNICAL_ERROR);
        };
        let now = Instant::now();
        let wait_until = deadline.checked_sub(self.config.response_margin);
        let Some(remaining) = wait_until
            .map(|w| w.saturating_duration_since(now))
            .filter(|r| !r.is_zero())
        else {
            return no_bid(NoBidReason::INSUFFICIENT_AUCTION_TIME);
        };

        let calls = self.fan_out(&request, &raw, exchange, now, remaining);
        let mut answers: Vec<(Source, Vec<bool>, Bytes)> = Vec::with_capacity(calls.len() + 1);
        let internal_enabled = self
            .internal
            .as_ref()
            .is_some_and(|i| i.enabled.load(Ordering::Relaxed));
        if let Some(bidder) = internal.filter(|_| internal_enabled) {
            BidderStats::bump(&self.internal_stats.requests);
            match bidder.bid(json, currency) {
                Some(body) => answers.push((Source::Internal, vec![true; request.imp.len()], body)),
                None => BidderStats::bump(&self.internal_stats.no_bids),
            }
        }
        for call in calls {
            let bidder = &self.bidders[call.bidder];
            let stats = &bidder.stats;
            let waited =
                tokio::time::timeout_at(tokio::time::Instant::from_std(call.until), call.answer)
                    .await;
            match waited {
                Ok(Ok(Answer::Body(body))) => {
                    bidder.health.record_success();
                    answers.push((Source::External(call.bidder), call.sent, body));
                }
                Ok(Ok(Answer::NoBid)) => {
                    bidder.health.record_success();
                    BidderStats::bump(&stats.no_bids);
                }
                Ok(Ok(Answer::Failed)) | Ok(Err(_)) => {
                    bidder.health.record_failure();
                    BidderStats::bump(&stats.errors);
                }
                Err(_) => {
                    bidder.health.record_failure();
                    BidderStats::bump(&stats.timeouts);
                }
            }
        }

        let mut entries = Vec::with_capacity(answers.len());
        let mut sources = Vec::with_capacity(answers.len());
        for (source, sent, body) in &answers {
            let stats = self.stats_of(*source);
            match BidResponse::parse(body) {
                Ok(response) if response.seatbid.iter().all(|s| s.bid.is_empty()) => {
                    BidderStats::bump(&stats.no_bids);
                }
                Ok(response) => {
                    entries.push(Entry {
                        name: self.name_of(*source),
                        price_permille: self.permille_of(*source),
                        response,
                        sent: sent.clone(),
                    });
                    sources.push(*source);
                }
                Err(_) => {
                    if let Source::External(i) = source {
                        self.bidders[*i].health.record_failure();
                    }
                    BidderStats::bump(&stats.errors);
                }
            }
        }
        let rules = Rules {
            kind: self.config.auction,
            deals_first: self.config.deals_first,
            currency,
            rates: &self.config.rates,
        };
        let mut outcomes = auction::run(&request, &entries, rules);
        // First the answer: it decides which winners are offered, hence won.
        let answer = self.answer(&request, &entries, &sources, &mut outcomes, currency);
        for (e, (valid, wins)) in auction::tally(entries.len(), &outcomes)
            .into_iter()
            .enumerate()
        {
            let stats = self.stats_of(sources[e]);
            let received = entries[e].response.bids().count() as u64;
            BidderStats::add(&stats.bids, valid);
            BidderStats::add(&stats.wins, wins);
            BidderStats::add(&stats.invalid_bids, received - valid);
        }
        let internal_notices = self.send_notices(&request, &entries, &sources, &outcomes, currency);
        match answer {
            Some(response) => {
                BidderStats::bump(&self.stats.filled);
                Ok(Auctioned {
                    request_id,
                    response: Some(response),
                    no_bid: None,
                    internal_notices,
                })
            }
            None => Ok(Auctioned {
                request_id,
                response: None,
                no_bid: Some(NoBidReason::UNKNOWN_ERROR),
                internal_notices,
            }),
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

    /// Sends the request to every enabled bidder that takes it and may be called now.
    fn fan_out(
        &self,
        request: &BidRequest<'_>,
        raw: &RawRequest<'_>,
        exchange: &str,
        now: Instant,
        remaining: Duration,
    ) -> Vec<Call> {
        // Bidders with the same imps, version and tmax share one body.
        let mut bodies: Vec<(Vec<bool>, OpenRtbVersion, u64, Bytes)> = Vec::new();
        let mut calls = Vec::with_capacity(self.bidders.len());
        for (i, bidder) in self.bidders.iter().enumerate() {
            let spec = &bidder.spec;
            if !bidder.enabled()
                || !(spec.exchanges.is_empty() || spec.exchanges.iter().any(|e| e == exchange))
            {
                continue;
            }
            let sent: Vec<bool> = request.imp.iter().map(|imp| takes(spec, imp)).collect();
            if !sent.contains(&true) {
                continue;
            }
            if !bidder.health.allow(now) {
                BidderStats::bump(&bidder.stats.skipped_unhealthy);
                continue;
            }
            let Some(place) = bidder.try_enter() else {
                BidderStats::bump(&bidder.stats.skipped_at_limit);
                continue;
            };
            let share = remaining * spec.timeout_percent.clamp(1, 100) / 100;
            let tmax_ms = u64::try_from(share.as_millis()).unwrap_or(u64::MAX).max(1);
            let shared = bodies
                .iter()
                .find(|(imps, version, tmax, _)| {
                    *imps == sent && *version == spec.version && *tmax == tmax_ms
                })
                .map(|(.., body)| body.clone());
            let body = match shared {
                Some(body) => body,
                None => {
                    let mut out = String::with_capacity(1024);
                    let auction = self.config.auction;
                    raw.write_for(|i| sent[i], tmax_ms, auction, spec.version, &mut out);
                    let body = Bytes::from(out);
                    bodies.push((sent.clone(), spec.version, tmax_ms, body.clone()));
                    body
                }
            };
            BidderStats::bump(&bidder.stats.requests);
            let until = now + share;
            let answer = BidderClient::call(
                place,
                body,
                until + self.config.late_grace,
                self.config.max_response_bytes,
            );
            calls.push(Call {
                bidder: i,
                sent,
                until,
                answer,
            });
        }
        calls
    }

    /// The answer: each winning bid at its clearing price in `currency`, its markup and
    /// billing URL with the macros filled (but the internal bidder's billing and win notice
    /// URLs, see [`billed_by_caller`]), its other members as the bidder wrote them (`ext`
    /// included), grouped by seat; checked once more as a whole. The winners that
    /// check drops (all of them when the answer fails as a whole) become `Dropped` in
    /// `outcomes`: they are not offered, so they must not hear they won.
    fn answer(
        &self,
        request: &BidRequest<'_>,
        entries: &[Entry<'_>],
        sources: &[Source],
        outcomes: &mut [Outcome],
        currency: Currency,
    ) -> Option<String> {
        let mut seatbid: Vec<SeatBid<'_>> = Vec::new();
        // Each bid placed in the answer: its id there, its seat, its outcome.
        let mut placed: Vec<(String, &str, usize)> = Vec::new();
        for (o, outcome) in outcomes.iter().enumerate() {
            let auction::Result::Won {
                clearing,
                price_to_bidder,
            } = outcome.result
            else {
                continue;
            };
            let entry = &entries[outcome.entry];
            let Some((seat, bid)) = entry.response.bids().nth(outcome.bid) else {
                continue;
            };
            let price = format_micros(price_to_bidder);
            let macros = macros(request, entry, bid, seat, Some(&price));
            let fill = |template: &Option<Cow<'_, str>>| -> Option<Cow<'static, str>> {
                let template = template.as_deref().filter(|t| !t.is_empty())?;
                let mut out = String::with_capacity(template.len() + 16);
                marquee_openrtb::expand_macros(template, &macros, &mut out);
                Some(Cow::Owned(out))
            };
            let adm = fill(&bid.adm);
            let by_caller = billed_by_caller(sources[outcome.entry], entry, currency);
            // Our own win notice is the caller's to send, as our billing notice is; an external
            // bidder's goes to the caller only without markup (the caller fetches it from
            // there), the gateway sending it otherwise.
            let nurl = if by_caller {
                bid.nurl.clone().filter(|n| !n.is_empty())
            } else if adm.is_none() {
                fill(&bid.nurl)
            } else {
                None
            };
            let mut id = bid.id.to_string();
            if placed.iter().any(|(placed_id, ..)| *placed_id == id) {
                id = format!("{}:{id}", entry.name);
            }
            let seat_name = seat.unwrap_or(entry.name);
            placed.push((id.clone(), seat_name, o));
            let burl = if by_caller {
                bid.burl.clone().filter(|b| !b.is_empty())
            } else {
                fill(&bid.burl)
            };
            let out = Bid {
                id: Cow::Owned(id),
                price_micros: clearing,
                adm,
                nurl,
                burl,
                lurl: None,
                ..bid.clone()
            };
            match seatbid
                .iter_mut()
                .find(|s| s.seat.as_deref() == Some(seat_name))
            {
                Some(seat) => seat.bid.push(out),
                None => seatbid.push(SeatBid {
                    bid: vec![out],
                    seat: Some(Cow::Borrowed(seat_name)),
                }),
            }
        }
        if seatbid.is_empty() {
            return None;
        }
        let mut response = BidResponse {
            id: Cow::Borrowed(request.id.as_ref()),
            seatbid,
            bidid: None,
            cur: Some(Cow::Borrowed(currency.as_str())),
            nbr: None,
        };
        let converter = RateConverter(&self.config.rates);
        let Err(violations) = validate_response(request, &response, &converter) else {
            return Some(response.to_json());
        };
        let mut dropped: Vec<&str> = Vec::new();
        for (id, seat, o) in &placed {
            if let Some(reason) = dropped_for(&violations, id, seat) {
                outcomes[*o].result = auction::Result::Dropped { reason };
                dropped.push(id);
            }
        }
        BidderStats::add(&self.stats.dropped_winners, dropped.len() as u64);
        if violations.iter().any(|v| v.bid_id.is_none()) {
            return None;
        }
        for seat in &mut response.seatbid {
            seat.bid.retain(|bid| !dropped.contains(&bid.id.as_ref()));
        }
        response.seatbid.retain(|s| !s.bid.is_empty());
        (!response.seatbid.is_empty()).then(|| response.to_json())
    }

    /// Forwards the win notice of every winner in the answer that sent markup (but those the
    /// caller sends, [`billed_by_caller`]) and the loss notice of every other bid (a dropped
    /// winner included), macros filled, each only where its bidder's notice policy allows
    /// (`BidderClient::notify`); the internal bidder's are returned for the edge.
    fn send_notices(
        &self,
        request: &BidRequest<'_>,
        entries: &[Entry<'_>],
        sources: &[Source],
        outcomes: &[Outcome],
        currency: Currency,
    ) -> Vec<String> {
        let mut internal = Vec::new();
        for outcome in outcomes {
            let entry = &entries[outcome.entry];
            let Some((seat, bid)) = entry.response.bids().nth(outcome.bid) else {
                continue;
            };
            let (template, price, loss, min_to_win) = match &outcome.result {
                auction::Result::Won {
                    price_to_bidder, ..
                } => {
                    if bid.adm.as_deref().unwrap_or("").is_empty()
                        || billed_by_caller(sources[outcome.entry], entry, currency)
                    {
                        continue;
                    }
                    (&bid.nurl, Some(*price_to_bidder), None, None)
                }
                auction::Result::Lost {
                    reason,
                    price,
                    min_to_win,
                } => (&bid.lurl, *price, Some(*reason), *min_to_win),
                auction::Result::Dropped { reason } => (&bid.lurl, None, Some(*reason), None),
            };
            let Some(template) = template.as_deref().filter(|t| !t.is_empty()) else {
                continue;
            };
            let price = price.map(format_micros);
            let loss = loss.map(|r: LossReason| r.0.to_string());
            let min_to_win = min_to_win.map(format_micros);
            let values = AuctionMacros {
                loss: loss.as_deref(),
                // A loss without a winner has no prices to tell: the macros become empty.
                price: Some(price.as_deref().unwrap_or("")),
                min_to_win: Some(min_to_win.as_deref().unwrap_or("")),
                ..macros(request, entry, bid, seat, None)
            };
            let mut url = String::with_capacity(template.len() + 32);
            marquee_openrtb::expand_macros(template, &values, &mut url);
            match sources[outcome.entry] {
                Source::External(i) => self.bidders[i].notify(&url, self.config.notice_timeout),
                Source::Internal => internal.push(url),
            }
        }
        internal
    }
}

/// A call in flight.
struct Call {
    bidder: usize,
    sent: Vec<bool>,
    /// How long the auction waits for it.
    until: Instant,
    answer: oneshot::Receiver<Answer>,
}

/// Whether a bidder takes an imp: it offers one of the bidder's media types.
fn takes(spec: &BidderSpec, imp: &Imp<'_>) -> bool {
    spec.media.is_empty()
        || spec.media.iter().any(|media| match media {
            Media::Banner => imp.banner.is_some(),
            Media::Video => imp.video.is_some(),
            Media::Audio => imp.audio.is_some(),
            Media::Native => imp.native.is_some(),
        })
}

/// Whether a winner's billing and win notice URLs go to the caller with their auction macros
/// as the bidder wrote them, for the caller to fill and send as it does any bidder's (the
/// gateway then sends no win notice): only our own line items', when they bid in the answer's
/// currency.
///
/// An external bidder is billed at the gateway's price in its own terms (its currency, before
/// its adjustment), which only the gateway knows, so the gateway fills its `burl`. Our own line
/// items are billed by the caller directly: the operator pays the caller's clearing price, and
/// the edge's notice handler reads it as on `/openrtb2/bid` — for an exchange with price keys
/// only encrypted with them, so that nobody holding the URL can bill it. A price filled here
/// would be plain (refused there), and handing out a billable encrypted price to whoever asks
/// for an auction would undo that rule. The win notice follows the same rule: filled here, its
/// plain price was refused on such an exchange and our win never logged. The caller's price is
/// in the answer's currency, so a bid in another currency (the exchange's currency differs
/// from `gateway.currency`) keeps the gateway's filling: read in the bid's currency, the
/// caller's would be wrong.
fn billed_by_caller(source: Source, entry: &Entry<'_>, currency: Currency) -> bool {
    matches!(source, Source::Internal) && entry.response.currency() == currency.as_str()
}

/// Why the final check drops a bid of the answer, if it does: its own failed rule, or one on
/// its seat (`bseat` naming the bidder, whose name is the seat of a bid without one); when the
/// answer fails as a whole for another reason, 1 (internal error): the bid did nothing wrong.
fn dropped_for(violations: &[Violation], id: &str, seat: &str) -> Option<LossReason> {
    let own = violations.iter().find(|v| {
        v.bid_id.as_deref() == Some(id)
            || matches!(&v.rule, Rule::SeatNotAllowed { seat: blocked } if blocked == seat)
    });
    match own {
        Some(violation) => Some(violation.rule.loss_reason()),
        None if violations.iter().any(|v| v.bid_id.is_none()) => Some(LossReason::INTERNAL_ERROR),
        None => None,
    }
}

/// The macro values every notice and markup of a bid shares.
fn macros<'v>(
    request: &'v BidRequest<'_>,
    entry: &'v Entry<'_>,
    bid: &'v Bid<'_>,
    seat: Option<&'v str>,
    price: Option<&'v str>,
) -> AuctionMacros<'v> {
    AuctionMacros {
        auction_id: Some(&request.id),
        bid_id: entry.response.bidid.as_deref(),
        imp_id: Some(&bid.impid),
        seat_id: Some(seat.unwrap_or(entry.name)),
        ad_id: bid.adid.as_deref(),
        price,
        currency: Some(entry.response.currency()),
        mbr: None,
        loss: None,
        min_to_win: None,
    }
}
