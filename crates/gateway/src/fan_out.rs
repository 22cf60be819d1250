//! Sending the request out: which bidders get it (enabled, on this exchange, taking one of its
//! imps, healthy, below their limit of calls in flight), each one's time, and its body.

use std::time::{Duration, Instant};

use bytes::Bytes;
use marquee_openrtb::{BidRequest, Imp};
use tokio::sync::oneshot;

use crate::client::{Answer, BidderClient};
use crate::config::{BidderSpec, Media, OpenRtbVersion};
use crate::outgoing::RawRequest;
use crate::{Chosen, Gateway};

/// A call in flight.
pub(crate) struct Call {
    pub bidder: usize,
    pub sent: Vec<bool>,
    /// How long the auction waits for it.
    pub until: Instant,
    pub answer: oneshot::Receiver<Answer>,
}

/// The bodies written so far in one fan-out: bidders with the same imps, version and tmax share
/// one.
#[derive(Default)]
struct Bodies(Vec<(Vec<bool>, OpenRtbVersion, u64, Bytes)>);

impl Gateway {
    /// Sends the request to every enabled bidder `chosen` that takes it and may be called now.
    pub(crate) fn fan_out(
        &self,
        request: &BidRequest<'_>,
        raw: &RawRequest<'_>,
        chosen: Chosen<'_>,
        now: Instant,
        remaining: Duration,
    ) -> Vec<Call> {
        let mut bodies = Bodies::default();
        let mut calls = Vec::with_capacity(self.bidders.len());
        for (i, bidder) in self.bidders.iter().enumerate() {
            let spec = &bidder.spec;
            let exchange = chosen.exchange;
            if !bidder.enabled()
                || !(spec.exchanges.is_empty() || spec.exchanges.iter().any(|e| e == exchange))
                || !(chosen.bidders.is_empty() || chosen.bidders.contains(&spec.name))
            {
                continue;
            }
            let sent: Vec<bool> = request.imp.iter().map(|imp| takes(spec, imp)).collect();
            if !sent.contains(&true) {
                continue;
            }
            if !bidder.health.allow(now) {
                bidder.stats.skipped_unhealthy.inc();
                continue;
            }
            let Some(place) = bidder.try_enter() else {
                bidder.stats.skipped_at_limit.inc();
                continue;
            };
            let share = remaining * spec.timeout_percent.clamp(1, 100) / 100;
            let tmax_ms = u64::try_from(share.as_millis()).unwrap_or(u64::MAX).max(1);
            let body = self.body_for(&mut bodies, raw, &sent, spec, tmax_ms);
            bidder.stats.requests.inc();
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

    /// The body for a bidder taking the imps `sent` with `tmax_ms`: one written before for the
    /// same imps, version and tmax, or a new one.
    fn body_for(
        &self,
        bodies: &mut Bodies,
        raw: &RawRequest<'_>,
        sent: &[bool],
        spec: &BidderSpec,
        tmax_ms: u64,
    ) -> Bytes {
        let shared = bodies
            .0
            .iter()
            .find(|(imps, version, tmax, _)| {
                *imps == sent && *version == spec.version && *tmax == tmax_ms
            })
            .map(|(.., body)| body.clone());
        if let Some(body) = shared {
            return body;
        }
        let mut out = String::with_capacity(1024);
        let auction = self.config.auction;
        raw.write_for(|i| sent[i], tmax_ms, auction, spec.version, &mut out);
        let body = Bytes::from(out);
        bodies
            .0
            .push((sent.to_vec(), spec.version, tmax_ms, body.clone()));
        body
    }
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
