//! Gathering the answers: our own line items' bid, each external call waited for until its
//! time, and every answer parsed into an auction entry.

use bytes::Bytes;
use marquee_model::Currency;
use marquee_openrtb::{BidRequest, BidResponse};

use crate::auction::Entry;
use crate::client::Answer;
use crate::fan_out::Call;
use crate::{Called, Gateway, InternalBidder, Source};

/// An answer body, where it came from and the imps (by index) it was sent.
pub(crate) struct Received {
    source: Source,
    sent: Vec<bool>,
    body: Bytes,
}

/// How waiting for a call ended: its answer body (none for a no-bid or an error), or its time
/// ran out.
enum Waited {
    Answer(Option<Received>),
    TimedOut,
}

impl Gateway {
    /// The answers to `json`: the internal bidder's first (asked now, while `calls` run), then
    /// the external calls' in their order; and each call's bidder, with whether it ran out of
    /// time (its bids are counted once the answers are parsed).
    pub(crate) async fn collect(
        &self,
        json: &[u8],
        request: &BidRequest<'_>,
        currency: Currency,
        internal: Option<&dyn InternalBidder>,
        calls: Vec<Call>,
    ) -> (Vec<Received>, Vec<Called>) {
        let mut answers = Vec::with_capacity(calls.len() + 1);
        answers.extend(self.ask_internal(json, request, currency, internal));
        let mut called = Vec::with_capacity(calls.len());
        for call in calls {
            let bidder = call.bidder;
            let timed_out = match self.wait_for(call).await {
                Waited::Answer(answer) => {
                    answers.extend(answer);
                    false
                }
                Waited::TimedOut => true,
            };
            called.push(Called {
                bidder,
                timed_out,
                bids: 0,
            });
        }
        (answers, called)
    }

    /// Our own line items' answer, when there is an internal bidder and it is enabled.
    fn ask_internal(
        &self,
        json: &[u8],
        request: &BidRequest<'_>,
        currency: Currency,
        internal: Option<&dyn InternalBidder>,
    ) -> Option<Received> {
        let enabled = self
            .internal
            .as_ref()
            .is_some_and(|i| i.enabled.load(std::sync::atomic::Ordering::Relaxed));
        let bidder = internal.filter(|_| enabled)?;
        self.internal_stats.requests.inc();
        let answer = bidder.bid(json, currency).map(|body| Received {
            source: Source::Internal,
            sent: vec![true; request.imp.len()],
            body,
        });
        if answer.is_none() {
            self.internal_stats.no_bids.inc();
        }
        answer
    }

    /// A call's answer body, waited for until its time; its bidder's health and counters
    /// updated with how it ended.
    async fn wait_for(&self, call: Call) -> Waited {
        let bidder = &self.bidders[call.bidder];
        let stats = &bidder.stats;
        let until = tokio::time::Instant::from_std(call.until);
        match tokio::time::timeout_at(until, call.answer).await {
            Ok(Ok(Answer::Body(body))) => {
                bidder.health.record_success();
                return Waited::Answer(Some(Received {
                    source: Source::External(call.bidder),
                    sent: call.sent,
                    body,
                }));
            }
            Ok(Ok(Answer::NoBid)) => {
                bidder.health.record_success();
                stats.no_bids.inc();
            }
            Ok(Ok(Answer::Failed)) | Ok(Err(_)) => {
                bidder.health.record_failure();
                stats.errors.inc();
            }
            Err(_) => {
                bidder.health.record_failure();
                stats.timeouts.inc();
                return Waited::TimedOut;
            }
        }
        Waited::Answer(None)
    }

    /// The answers with bids, parsed into auction entries, with the bidder of each; an empty
    /// answer counts as a no-bid, one that does not parse as an error.
    pub(crate) fn entries<'r>(&'r self, answers: &'r [Received]) -> (Vec<Entry<'r>>, Vec<Source>) {
        let mut entries = Vec::with_capacity(answers.len());
        let mut sources = Vec::with_capacity(answers.len());
        for Received { source, sent, body } in answers {
            let stats = self.stats_of(*source);
            match BidResponse::parse(body) {
                Ok(response) if response.seatbid.iter().all(|s| s.bid.is_empty()) => {
                    stats.no_bids.inc();
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
                    stats.errors.inc();
                }
            }
        }
        (entries, sources)
    }
}
