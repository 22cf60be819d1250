//! One external bidder: its kept-alive connection pool (HTTP/1.1 or h2c in cleartext; over TLS
//! HTTP/2 or HTTP/1.1 as ALPN settles it), the bound on its calls in flight, its health score
//! and counters, and the notices it is sent.
//!
//! A call runs in its own task. The auction waits for it until the bidder's deadline only; the
//! task itself goes on until `late_grace` past that, so that a slow answer is read to its end
//! and its connection stays in the pool instead of being torn down by a cancelled request (an
//! answer in that time is counted as late and ignored). Its place in flight is held until the
//! task ends, so a bidder that has gone slow reaches its limit and is skipped at once.
//!
//! Notices go through a client of their own, whose resolver refuses internal addresses unless
//! the bidder's endpoint is internal (`notice.rs`); the bid calls keep the plain resolver, as the
//! endpoint is the operator's choice. Both take `http://` and `https://` URLs (`tls.rs`); a
//! failed TLS handshake is a transport failure like a refused connection: counted, and logged
//! at most once a minute per bidder with its cause.

use std::io::Write as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue,
};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::oneshot;
use url::Url;

use crate::GatewayError;
use crate::config::BidderSpec;
use crate::health::Health;
use crate::metrics::BidderStats;
use crate::notice::{
    AddressGuard, GuardedResolver, HostPattern, LogLimit, NoticePolicy, NoticeRefusal,
    refused_address,
};
use crate::tls;

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;
type NoticeClient = Client<HttpsConnector<HttpConnector<GuardedResolver>>, Full<Bytes>>;

/// How often a bidder's refused notices, and its failed calls and notices, may be logged
/// (each is counted).
const LOG_INTERVAL: Duration = Duration::from_secs(60);

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
    notice_policy: NoticePolicy,
    notice_guard: Arc<AddressGuard>,
    notice_client: NoticeClient,
    refusal_log: LogLimit,
    call_failure_log: LogLimit,
    notice_failure_log: LogLimit,
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
    pub(crate) fn new(
        spec: BidderSpec,
        health: Health,
        tls: &rustls::ClientConfig,
    ) -> Result<BidderClient, GatewayError> {
        let bad = |message: String| GatewayError::Bidder {
            name: spec.name.clone(),
            message,
        };
        let uri: Uri = spec
            .endpoint
            .parse()
            .map_err(|e| bad(format!("endpoint {:?}: {e}", spec.endpoint)))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(bad(format!(
                    "endpoint {:?} must be an http:// or https:// URL with a host",
                    spec.endpoint
                )));
            }
        };
        if uri.host().is_none() {
            return Err(bad(format!("endpoint {:?} has no host", spec.endpoint)));
        }
        if https && spec.http2 {
            return Err(bad(format!(
                "http2 (h2c, HTTP/2 without TLS) is for http:// endpoints; over https:// \
                 ({:?}) HTTP/2 is used when the bidder offers it",
                spec.endpoint
            )));
        }
        // Read by the parser the notice URLs go through, so that hosts compare alike (case,
        // international names, other spellings of an address).
        let endpoint_host = Url::parse(&spec.endpoint)
            .ok()
            .and_then(|url| url.host().map(|host| host.to_owned()))
            .ok_or_else(|| bad(format!("endpoint {:?} has no host", spec.endpoint)))?;
        let notice_hosts = spec
            .notice_hosts
            .iter()
            .map(|entry| HostPattern::parse(entry))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("notice_hosts: {e}")))?;
        let notice_guard = Arc::new(AddressGuard::new(endpoint_host.clone()));
        let headers = call_headers(&spec).map_err(bad)?;
        let connector = tcp(HttpConnector::new());
        let notice_connector = tcp(HttpConnector::new_with_resolver(GuardedResolver(
            Arc::clone(&notice_guard),
        )));
        let builder = || {
            let mut builder = Client::builder(TokioExecutor::new());
            builder
                .pool_timer(TokioTimer::new())
                .timer(TokioTimer::new())
                .pool_max_idle_per_host(spec.pool_size)
                .pool_idle_timeout(Duration::from_secs(90))
                .http2_only(spec.http2);
            builder
        };
        let client = builder().build(with_tls(tls, connector));
        let notice_client = builder().build(with_tls(tls, notice_connector));
        Ok(BidderClient {
            enabled: AtomicBool::new(spec.enabled),
            notice_policy: NoticePolicy::new(endpoint_host, notice_hosts),
            notice_guard,
            notice_client,
            refusal_log: LogLimit::new(LOG_INTERVAL),
            call_failure_log: LogLimit::new(LOG_INTERVAL),
            notice_failure_log: LogLimit::new(LOG_INTERVAL),
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
                bidder.stats.late.inc();
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
        let response = match self.client.request(request).await {
            Ok(response) => response,
            Err(error) => {
                self.log_failure(Failed::Call, &self.spec.endpoint, &error);
                return Answer::Failed;
            }
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

    /// Sends a notice (`GET url`) when the bidder's notice policy allows it, giving up after
    /// `timeout`; counts it, or its refusal.
    pub(crate) fn notify(self: &Arc<Self>, url: &str, timeout: Duration) {
        let url = match self.notice_policy.check(url) {
            Ok(url) => url,
            Err(refusal) => {
                self.refuse(&refusal);
                return;
            }
        };
        // The connector resolves a name through the guard, but connects to an address written
        // in the URL directly: that one is checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        let Ok(uri) = url.as_str().parse::<Uri>() else {
            self.stats.notice_errors.inc();
            return;
        };
        let bidder = Arc::clone(self);
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, bidder.deliver(uri, literal)).await {
                Ok(Delivery::Sent) => {
                    bidder.stats.notices.inc();
                }
                Ok(Delivery::Refused(ip)) => bidder.refuse(&NoticeRefusal::Address(ip)),
                Ok(Delivery::Failed) | Err(_) => {
                    bidder.stats.notice_errors.inc();
                }
            }
        });
    }

    async fn deliver(&self, uri: Uri, literal: Option<IpAddr>) -> Delivery {
        if let Some(ip) = literal
            && !self.notice_guard.admits(ip).await
        {
            return Delivery::Refused(ip);
        }
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = uri.clone();
        match self.notice_client.request(request).await {
            Ok(response) if response.status().is_success() => {
                // Read the (small) body so the connection goes back to the pool.
                let _ = Limited::new(response.into_body(), 64 * 1024)
                    .collect()
                    .await;
                Delivery::Sent
            }
            Ok(_) => Delivery::Failed,
            Err(error) => refused_address(&error).map_or_else(
                || {
                    // Scheme and host only: the rest is the bidder's (its ids, the price).
                    let origin = format!(
                        "{}://{}",
                        uri.scheme_str().unwrap_or_default(),
                        uri.authority().map_or("", |authority| authority.as_str())
                    );
                    self.log_failure(Failed::Notice, &origin, &error);
                    Delivery::Failed
                },
                Delivery::Refused,
            ),
        }
    }

    /// Counts a refused notice, and logs it unless one was logged within the interval.
    fn refuse(&self, refusal: &NoticeRefusal) {
        self.stats.notices_refused.inc();
        if self.refusal_log.allow(Instant::now()) {
            tracing::warn!(
                bidder = %self.spec.name,
                %refusal,
                refused = self.stats.notices_refused.get(),
                "notice not sent; refusals are counted in \
                 marquee_gateway_bidder_notices_refused_total and logged at most once a minute"
            );
        }
    }

    /// Logs a call or notice that failed before an answer (connection, TLS handshake), unless
    /// one of its kind was logged within the interval; the caller counts it.
    fn log_failure(&self, failed: Failed, url: &str, error: &hyper_util::client::legacy::Error) {
        let (limit, what, counter) = match failed {
            Failed::Call => (&self.call_failure_log, "call", "errors"),
            Failed::Notice => (&self.notice_failure_log, "notice", "notice_errors"),
        };
        if !limit.allow(Instant::now()) {
            return;
        }
        let cause = tls::describe(error);
        let bidder = &self.spec.name;
        if tls::is_tls_failure(error) {
            tracing::warn!(
                %bidder, %url, error = %cause,
                "gateway {what} failed in the TLS handshake: the server's certificate is not \
                 trusted or not valid for its name (a private CA is trusted with \
                 gateway.tls_ca_file); counted in marquee_gateway_bidder_{counter}_total, \
                 logged at most once a minute"
            );
        } else {
            tracing::warn!(
                %bidder, %url, error = %cause,
                "gateway {what} failed before an answer; counted in \
                 marquee_gateway_bidder_{counter}_total, logged at most once a minute"
            );
        }
    }
}

/// What failed, for [`BidderClient::log_failure`].
#[derive(Debug, Clone, Copy)]
enum Failed {
    Call,
    Notice,
}

/// The headers of every call to a bidder: JSON, its OpenRTB version, gzip when it takes it,
/// and its own; a message for what cannot be a header.
fn call_headers(spec: &BidderSpec) -> Result<HeaderMap, String> {
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
            .map_err(|e| format!("header name {name:?}: {e}"))?;
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|e| format!("header {name} value: {e}"))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// A connector that also speaks TLS, for `https://` URLs; ALPN offers HTTP/2 and HTTP/1.1.
fn with_tls<C>(tls: &rustls::ClientConfig, connector: C) -> HttpsConnector<C> {
    HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(connector)
}

/// TCP settings of every connection; `https://` URLs are let through to the TLS layer.
fn tcp<R>(mut connector: HttpConnector<R>) -> HttpConnector<R> {
    connector.enforce_http(false);
    connector.set_nodelay(true);
    connector.set_keepalive(Some(Duration::from_secs(60)));
    connector
}

/// How a notice ended.
enum Delivery {
    Sent,
    /// The only address it could go to is internal and the bidder's endpoint is not.
    Refused(IpAddr),
    /// Transport error, a status other than 2xx.
    Failed,
}

fn gzip(body: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 3 + 64),
        flate2::Compression::fast(),
    );
    encoder.write_all(body).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::SocketAddr;
    use std::sync::Mutex;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;
    use crate::config::HealthConfig;

    /// A server on loopback that records the request line of every request and answers 204.
    async fn listener() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head);
                    record
                        .lock()
                        .unwrap()
                        .push(text.lines().next().unwrap_or("").to_owned());
                    let _ = stream
                        .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        (address, seen)
    }

    fn bidder(endpoint: &str, notice_hosts: &[&str]) -> Arc<BidderClient> {
        let mut spec = BidderSpec::new("b1", endpoint);
        spec.notice_hosts = notice_hosts.iter().map(|h| (*h).to_owned()).collect();
        let health = Health::new(HealthConfig::default(), Instant::now());
        let tls = tls::client_config(None).unwrap();
        Arc::new(BidderClient::new(spec, health, &tls).unwrap())
    }

    /// Waits (up to 10 s) until `count` notices were sent, failed or refused.
    async fn settled(bidder: &BidderClient, count: u64) -> (u64, u64, u64) {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let stats = &bidder.stats;
            let counts = (
                stats.notices.get(),
                stats.notice_errors.get(),
                stats.notices_refused.get(),
            );
            if counts.0 + counts.1 + counts.2 >= count || Instant::now() > until {
                return counts;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A TLS server on loopback whose certificate (for 127.0.0.1) no root vouches for.
    async fn untrusted_tls_server() -> SocketAddr {
        use tokio_rustls::rustls;
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let key =
            rustls::pki_types::PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key.into())
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = acceptor.accept(stream).await;
            }
        });
        address
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_handshake_is_told_apart_from_other_transport_failures() {
        let address = untrusted_tls_server().await;
        let untrusted = bidder(&format!("https://{address}/bid"), &[]);
        let request = || {
            let mut request = Request::new(Full::new(Bytes::new()));
            *request.uri_mut() = untrusted.uri.clone();
            request
        };
        let error = untrusted.client.request(request()).await.unwrap_err();
        assert!(tls::is_tls_failure(&error), "{error:?}");
        let text = tls::describe(&error);
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(matches!(
            untrusted.exchange(Bytes::from_static(b"{}"), 1024).await,
            Answer::Failed
        ));
        // Nothing listens on the discard port: refused, not TLS.
        let refused = bidder("https://127.0.0.1:9/bid", &[]);
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = refused.uri.clone();
        let error = refused.client.request(request).await.unwrap_err();
        assert!(!tls::is_tls_failure(&error), "{error:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bidder_on_a_public_address_cannot_send_notices_to_internal_ones() {
        let (address, seen) = listener().await;
        let port = address.port();
        // 192.0.2.1 (TEST-NET-1) is not internal; it is never called here.
        let bidder = bidder("http://192.0.2.1/bid", &["localhost", "127.0.0.1"]);
        let timeout = Duration::from_secs(5);
        // An address in the URL, and a name that resolves to loopback.
        bidder.notify(&format!("http://127.0.0.1:{port}/win"), timeout);
        bidder.notify(&format!("http://localhost:{port}/loss"), timeout);
        assert_eq!(settled(&bidder, 2).await, (0, 0, 2));
        assert_eq!(*seen.lock().unwrap(), Vec::<String>::new());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bidder_on_an_internal_network_sends_notices_there() {
        let (address, seen) = listener().await;
        let port = address.port();
        // The endpoint's name resolves to loopback: the operator put the bidder there.
        let bidder = bidder("http://localhost:9/bid", &["127.0.0.1"]);
        let timeout = Duration::from_secs(5);
        bidder.notify(&format!("http://127.0.0.1:{port}/win"), timeout);
        bidder.notify(&format!("http://localhost:{port}/loss"), timeout);
        assert_eq!(settled(&bidder, 2).await, (2, 0, 0));
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        assert_eq!(seen, ["GET /loss HTTP/1.1", "GET /win HTTP/1.1"]);
    }
}
