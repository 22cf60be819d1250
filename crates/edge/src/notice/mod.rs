//! Win, billing and loss notices, `GET /openrtb2/win|bill|loss`: the query read → the token
//! verified against the auction the exchange echoes (`token.rs`) → the clearing price read
//! (`price.rs`) → counted once per kind → logged; a billing notice is settled (spent, capped,
//! charged) only once the log has it.

mod price;
mod token;

use std::borrow::Cow;
use std::sync::Arc;

use hyper::Response;
use jiff::Timestamp;
use marquee_eventlog::{Event, EventKind};

pub use token::{
    CONVERTED_TOKEN_LEN, NoticeClaims, NoticeError, TOKEN_LEN, digest, exchange_digest, sign_into,
    verify,
};

use crate::http::{self, Body};
use crate::{Edge, Loaded, events, shared, track};

/// Which notice a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    Win,
    Billing,
    Loss,
}

/// Why a notice was not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NotCounted {
    /// Refused: a missing, malformed, forged or expired token, another auction, a price that
    /// does not read.
    #[error("{0}")]
    Invalid(&'static str),
    #[error("test request")]
    Test,
    #[error("repeat")]
    Repeat,
    #[error("not logged")]
    NotLogged,
}

/// `GET /openrtb2/win|bill|loss`: counts the notice once if its token holds, then answers a
/// pixel either way (exchanges and browsers get the same answer for a refused notice).
pub(crate) async fn notice(edge: &Arc<Edge>, kind: NoticeKind, query: &str) -> Response<Body> {
    if let Err(why) = count_notice(edge, kind, query).await {
        let counters = &edge.bidder.counters;
        let counter = match why {
            NotCounted::Invalid(_) => Some(&counters.invalid_notices),
            NotCounted::Test => Some(&counters.test_notices),
            NotCounted::Repeat => Some(&counters.repeated_notices),
            NotCounted::NotLogged => None,
        };
        if let Some(counter) = counter {
            counter.inc();
        }
        tracing::debug!(?kind, %why, "notice not counted");
    }
    http::pixel()
}

/// The query parameters of a notice.
#[derive(Default)]
struct Params<'q> {
    token: Option<Cow<'q, str>>,
    price: Option<Cow<'q, str>>,
    loss: Option<Cow<'q, str>>,
    auction: Option<Cow<'q, str>>,
    imp: Option<Cow<'q, str>>,
}

impl<'q> Params<'q> {
    fn parse(query: &'q str) -> Params<'q> {
        let mut params = Params::default();
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match key.as_ref() {
                "t" => params.token = Some(value),
                "p" => params.price = Some(value),
                "r" => params.loss = Some(value),
                "auction" => params.auction = Some(value),
                "imp" => params.imp = Some(value),
                _ => {}
            }
        }
        params
    }
}

async fn count_notice(edge: &Arc<Edge>, kind: NoticeKind, query: &str) -> Result<(), NotCounted> {
    let now = edge.now();
    let params = Params::parse(query);
    let claims = verified(edge, &params, now)?;
    let clearing = price::clearing(edge, kind, params.price.as_deref(), &claims)?;
    if claims.test {
        return Err(NotCounted::Test);
    }
    let seen = edge.bidder.replay_guard(kind);
    let (nonce, expires_at, second) = (claims.nonce, claims.expires_at(), now.as_second());
    if !seen.first_time(nonce, expires_at, second) {
        return Err(NotCounted::Repeat);
    }
    let loaded = edge.holder.current();
    let event = Event {
        event_id: u128::from(claims.nonce),
        ..events::bidder(
            EventKind::Win,
            now,
            claims.line_item,
            claims.creative,
            claims.user,
        )
    };
    let logged = match kind {
        NoticeKind::Win => {
            let amount = price::in_line_item_currency(edge, loaded.as_deref(), &claims, clearing);
            events::log(
                edge,
                Event {
                    amount_micros: amount,
                    ..event
                },
            )
        }
        NoticeKind::Billing => {
            let amount = price::in_line_item_currency(edge, loaded.as_deref(), &claims, clearing);
            bill(edge, loaded, &claims, event, amount, now).await;
            return Ok(());
        }
        NoticeKind::Loss => {
            let reason = params.loss.as_deref().and_then(|r| r.parse::<u64>().ok());
            let creative = reason.unwrap_or(0);
            events::log(
                edge,
                Event {
                    kind: EventKind::Loss,
                    creative,
                    ..event
                },
            )
        }
    };
    if !logged {
        // Not in the log: the exchange's retry should count.
        seen.forget(nonce, expires_at, second);
        return Err(NotCounted::NotLogged);
    }
    match kind {
        NoticeKind::Win => &edge.bidder.counters.wins,
        NoticeKind::Billing => &edge.bidder.counters.billings,
        NoticeKind::Loss => &edge.bidder.counters.losses,
    }
    .inc();
    Ok(())
}

/// The claims of the notice's token, if it verifies and names the auction and imp the exchange
/// echoes through the macros (when it did).
fn verified(edge: &Edge, params: &Params<'_>, now: Timestamp) -> Result<NoticeClaims, NotCounted> {
    let token = params
        .token
        .as_deref()
        .ok_or(NotCounted::Invalid("no token"))?;
    let claims = verify(&edge.keys, token, now.as_second())
        .map_err(|_| NotCounted::Invalid("token refused"))?;
    let echoed = |value: &Option<Cow<'_, str>>| {
        value
            .as_deref()
            .filter(|v| !v.is_empty() && !v.starts_with("${"))
            .map(str::to_owned)
    };
    if let (Some(auction), Some(imp)) = (echoed(&params.auction), echoed(&params.imp))
        && digest(&[&auction, &imp]) != claims.auction
    {
        return Err(NotCounted::Invalid("notice for another auction or imp"));
    }
    Ok(claims)
}

/// A billing notice's event committed, and settled once the log has it (in strict mode, once
/// the fsync that covers it is done), even if the exchange hangs up meanwhile: counted,
/// capped and charged `amount`. A notice the log refused or lost is forgotten, so that the
/// exchange's retry counts.
async fn bill(
    edge: &Arc<Edge>,
    loaded: Option<Arc<Loaded>>,
    claims: &NoticeClaims,
    event: Event,
    amount: i64,
    now: Timestamp,
) {
    let event = Event {
        kind: EventKind::Billing,
        amount_micros: amount,
        ..event
    };
    let (nonce, expires_at, second) = (claims.nonce, claims.expires_at(), now.as_second());
    let (user, line_item) = (claims.user, claims.line_item);
    track::commit_and_settle(edge, &event, move |edge, logged| {
        let bidder = &edge.bidder;
        if let Err(error) = logged {
            bidder
                .replay_guard(NoticeKind::Billing)
                .forget(nonce, expires_at, second);
            edge.counters.log_errors.inc();
            tracing::error!(%error, "billing event not logged");
            return;
        }
        if let Some(loaded) = &loaded {
            track::record_delivery(edge, loaded, user, line_item, now);
            shared::count_delivery(edge, loaded, user, line_item);
            let on = marquee_pacing::Billable::Impression;
            let charged = edge.pacing.bill(loaded, line_item, on, Some(amount));
            shared::charge(edge, line_item, charged);
        }
        bidder.counters.billings.inc();
    })
    .await;
}
