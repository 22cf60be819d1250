//! One external bidder: its kept-alive connection pool (HTTP/1.1 or h2c), the bound on its
//! calls in flight, its health score and counters.
//!
//! A call runs in its own task. The auction waits for it until the bidder's deadline only; the
//! task itself goes on until `late_grace` past that, so that a slow answer is read to its end
//! and its connection stays in the pool instead of being torn down by a cancelled request (an
//! answer in that time is counted as late and ignored). Its place in flight is held until the
//! task ends, so a bidder that has gone slow reaches its limit and is skipped at once.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue,
};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::oneshot;

use crate::GatewayError;
use crate::config::BidderSpec;
use crate::health::Health;
use crate::metrics::BidderStats;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// How a call ended, as the auction sees it.
#[derive(Debug)]
pub(crate) enum Answer {
    /// An answer body (decompressed) to parse.
    Body(Bytes),
    /// 204, or an empty 200.
    NoBid,
    /// Transport error, a status other than 200/204, an unreadable or too large body.
    Failed,
}

#[derive(Debug)]
pub struct BidderClient {
    pub spec: BidderSpec,
    uri: Uri,
    headers: HeaderMap,
    client: HttpClient,
    pub(crate) enabled: AtomicBool,
    in_flight: AtomicUsize,
    pub(crate) health: Health,
    pub stats: BidderStats,
}

/// A place among a bidder's calls in flight; freed when dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<BidderClient>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BidderClient {
    pub(crate) fn new(spec: BidderSpec, health: Health) -> Result<BidderClient, GatewayError> {
        let bad = |message: String| GatewayError::Bidder {
            name: spec.name.clone(),
            message,
        };
        let uri: Uri = spec
            .endpoint
            .parse()
            .map_err(|e| bad(format!("endpoint {:?}: {e}", spec.endpoint)))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(bad(format!(
                "endpoint {:?} must be an http:// URL with a host",
                spec.endpoint
            )));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            HeaderName::from_static("x-openrtb-version"),
            HeaderValue::from_static(spec.version.header()),
        );
        if spec.gzip {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        }
        for (name, value) in &spec.headers {
            let name = HeaderName::try_from(name.as_str())
                .map_err(|e| bad(format!("header name {name:?}: {e}")))?;
            let value = HeaderValue::try_from(value.as_str())
                .map_err(|e| bad(format!("header {name} value: {e}")))?;
            headers.insert(name, value);
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_keepalive(Some(Duration::from_secs(60)));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_max_idle_per_host(spec.pool_size)
            .pool_idle_timeout(Duration::from_secs(90))
            .http2_only(spec.http2)
            .build(connector);
        Ok(BidderClient {
            enabled: AtomicBool::new(spec.enabled),
            spec,
            uri,
            headers,
            client,
            in_flight: AtomicUsize::new(0),
            health,
            stats: BidderStats::default(),
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// A place for one more call, or `None` at the limit (the bidder is skipped, not waited
    /// for).
    pub(crate) fn try_enter(self: &Arc<Self>) -> Option<InFlight> {
        let before = self.in_flight.fetch_add(1, Ordering::Relaxed);
        if before >= self.spec.max_in_flight {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(InFlight(Arc::clone(self)))
    }

    /// Sends `body` in a task of its own; the answer comes through the receiver. The task
    /// gives up at `give_up`; an answer nobody waits for any more is counted as late.
    pub(crate) fn call(
        place: InFlight,
        body: Bytes,
        give_up: Instant,
        max_response_bytes: usize,
    ) -> oneshot::Receiver<Answer> {
        let (sender, receiver) = oneshot::channel();
        tokio::spawn(async move {
            let bidder = &place.0;
            let started = Instant::now();
            let exchange = bidder.exchange(body, max_response_bytes);
            let answer =
                match tokio::time::timeout_at(tokio::time::Instant::from_std(give_up), exchange)
                    .await
                {
                    Ok(answer) => {
                        bidder.stats.observe(started.elapsed());
                        answer
                    }
                    Err(_) => Answer::Failed,
                };
            let answered = !matches!(answer, Answer::Failed);
            if sender.send(answer).is_err() && answered {
                BidderStats::bump(&bidder.stats.late);
            }
            drop(place);
        });
        receiver
    }

    async fn exchange(&self, body: Bytes, max_response_bytes: usize) -> Answer {
        let body = if self.spec.gzip {
            match gzip(&body) {
                Some(compressed) => compressed,
                None => return Answer::Failed,
            }
        } else {
            body
        };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        let Ok(response) = self.client.request(request).await else {
            return Answer::Failed;
        };
        match response.status() {
            StatusCode::NO_CONTENT => return Answer::NoBid,
            StatusCode::OK => {}
            _ => return Answer::Failed,
        }
        let encoding = response
            .headers()
            .get(CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let Ok(collected) = Limited::new(response.into_body(), max_response_bytes)
            .collect()
            .await
        else {
            return Answer::Failed;
        };
        let bytes = collected.to_bytes();
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Answer::NoBid;
        }
        match marquee_openrtb::decode_body(&bytes, encoding.as_deref(), max_response_bytes) {
            Ok(std::borrow::Cow::Borrowed(_)) => Answer::Body(bytes),
            Ok(std::borrow::Cow::Owned(json)) => Answer::Body(Bytes::from(json)),
            Err(_) => Answer::Failed,
        }
    }

    /// Sends a notice (`GET url`), giving up after `timeout`; counts it.
    pub(crate) fn notify(self: &Arc<Self>, url: String, timeout: Duration) {
        let bidder = Arc::clone(self);
        tokio::spawn(async move {
            let Ok(uri) = url.parse::<Uri>() else {
                BidderStats::bump(&bidder.stats.notice_errors);
                return;
            };
            let mut request = Request::new(Full::new(Bytes::new()));
            *request.uri_mut() = uri;
            let sent = tokio::time::timeout(timeout, bidder.client.request(request)).await;
            match sent {
                Ok(Ok(response)) if response.status().is_success() => {
                    BidderStats::bump(&bidder.stats.notices);
                    // Read the (small) body so the connection goes back to the pool.
                    let _ = Limited::new(response.into_body(), 64 * 1024)
                        .collect()
                        .await;
                }
                _ => BidderStats::bump(&bidder.stats.notice_errors),
            }
        });
    }
}

fn gzip(body: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 3 + 64),
        flate2::Compression::fast(),
    );
    encoder.write_all(body).ok()?;
    encoder.finish().ok().map(Bytes::from)
}
