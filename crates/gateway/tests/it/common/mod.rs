//! Mock bidders for the gateway's tests: in-process servers on loopback (HTTP/1.1 and h2c on
//! the same port, or HTTPS with the ALPN protocols given) that answer one banner bid per imp as
//! told, and record what they receive.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod tls;

use std::convert::Infallible;
use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use marquee_gateway::{Auctioned, BidderSpec, Gateway, GatewayConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// What a mock bidder answers.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Decimal price of every bid.
    pub price: String,
    /// `cur` of the answer (none: USD implied).
    pub currency: Option<String>,
    pub deal: Option<String>,
    /// Wait this long before answering.
    pub delay: Duration,
    /// 200 answers bids, 204 none, anything else is an error.
    pub status: u16,
    /// Leave `adm` out (markup by `nurl`).
    pub no_adm: bool,
    /// Answer this body instead of bids.
    pub body: Option<String>,
    /// Bid this size.
    pub size: (u32, u32),
    /// Put the notice and billing URLs under this base (`http://host:port`) instead of the
    /// mock's own address.
    pub notice_base: Option<String>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            price: "1".into(),
            currency: None,
            deal: None,
            delay: Duration::ZERO,
            status: 200,
            no_adm: false,
            body: None,
            size: (300, 250),
            notice_base: None,
        }
    }
}

#[derive(Debug, Default)]
pub struct Record {
    /// Request bodies received (decompressed) with their headers of interest.
    pub requests: Vec<(serde_json::Value, Option<String>, Option<String>)>,
    /// Notices received: path and query.
    pub notices: Vec<String>,
    /// The HTTP version of every request received, bids and notices.
    pub versions: Vec<Version>,
    /// TLS handshakes that failed (an HTTPS mock only).
    pub handshake_failures: usize,
}

#[derive(Debug, Clone)]
pub struct MockBidder {
    pub name: String,
    pub address: SocketAddr,
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub record: Arc<Mutex<Record>>,
    /// Serves HTTPS (else cleartext).
    pub tls: bool,
}

impl MockBidder {
    /// A cleartext mock: HTTP/1.1, and h2c with prior knowledge.
    pub async fn start(name: &str, behaviour: Behaviour) -> MockBidder {
        MockBidder::serve(name, behaviour, None).await
    }

    /// An HTTPS mock: `acceptor`'s certificate and ALPN protocols, then HTTP/1.1 or HTTP/2 as
    /// negotiated.
    pub async fn start_tls(name: &str, behaviour: Behaviour, acceptor: TlsAcceptor) -> MockBidder {
        MockBidder::serve(name, behaviour, Some(acceptor)).await
    }

    async fn serve(name: &str, behaviour: Behaviour, tls: Option<TlsAcceptor>) -> MockBidder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mock = MockBidder {
            name: name.to_owned(),
            address,
            behaviour: Arc::new(Mutex::new(behaviour)),
            record: Arc::new(Mutex::new(Record::default())),
            tls: tls.is_some(),
        };
        let served = mock.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let mock = served.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => connection(mock, stream).await,
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(stream) => connection(mock, stream).await,
                            Err(_) => mock.record.lock().unwrap().handshake_failures += 1,
                        },
                    }
                });
            }
        });
        mock
    }

    /// `http://ADDR` or `https://ADDR`.
    pub fn base(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.address)
    }

    pub fn spec(&self) -> BidderSpec {
        BidderSpec::new(&self.name, format!("{}/bid", self.base()))
    }

    pub fn versions(&self) -> Vec<Version> {
        self.record.lock().unwrap().versions.clone()
    }

    pub fn handshake_failures(&self) -> usize {
        self.record.lock().unwrap().handshake_failures
    }

    pub fn set(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.behaviour.lock().unwrap());
    }

    pub fn requests(&self) -> usize {
        self.record.lock().unwrap().requests.len()
    }

    pub fn last_request(&self) -> serde_json::Value {
        self.record
            .lock()
            .unwrap()
            .requests
            .last()
            .unwrap()
            .0
            .clone()
    }

    pub fn notices(&self) -> Vec<String> {
        self.record.lock().unwrap().notices.clone()
    }

    /// Waits (up to 10 s) until `count` notices arrived; they are sent after the answer.
    pub async fn wait_notices(&self, count: usize) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let notices = self.notices();
            if notices.len() >= count || Instant::now() > until {
                return notices;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Serves one connection, HTTP/1.1 or HTTP/2 as the client's first bytes say.
async fn connection(mock: MockBidder, io: impl AsyncRead + AsyncWrite + Unpin + Send + 'static) {
    let service = service_fn(move |request| answer(mock.clone(), request));
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), service)
        .await;
}

async fn answer(
    mock: MockBidder,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    mock.record.lock().unwrap().versions.push(request.version());
    if request.method() == Method::GET {
        // Path and query only: an HTTP/2 request's URI is the whole URL.
        let target = request
            .uri()
            .path_and_query()
            .map_or_else(String::new, ToString::to_string);
        mock.record.lock().unwrap().notices.push(target);
        return Ok(Response::new(Full::new(Bytes::new())));
    }
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (encoding, version) = (header("content-encoding"), header("x-openrtb-version"));
    let bytes = request.into_body().collect().await.unwrap().to_bytes();
    let json = if encoding.as_deref() == Some("gzip") {
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut text)
            .unwrap();
        text
    } else {
        bytes.to_vec()
    };
    let body: serde_json::Value = serde_json::from_slice(&json).unwrap();
    mock.record
        .lock()
        .unwrap()
        .requests
        .push((body.clone(), encoding, version));
    let behaviour = mock.behaviour.lock().unwrap().clone();
    tokio::time::sleep(behaviour.delay).await;
    let status = StatusCode::from_u16(behaviour.status).unwrap();
    let text = match (&behaviour.body, status) {
        (Some(text), _) => text.clone(),
        (None, StatusCode::OK) => bids(&mock, &behaviour, &body),
        _ => String::new(),
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    Ok(response)
}

fn bids(mock: &MockBidder, behaviour: &Behaviour, request: &serde_json::Value) -> String {
    let base = behaviour.notice_base.clone().unwrap_or_else(|| mock.base());
    let bids: Vec<serde_json::Value> = request["imp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|imp| {
            let imp_id = imp["id"].as_str().unwrap();
            let mut bid = serde_json::json!({
                "id": format!("{}-{imp_id}", mock.name),
                "impid": imp_id,
                "price": "PRICE",
                "nurl": format!("{base}/win?imp=${{AUCTION_IMP_ID}}&p=${{AUCTION_PRICE}}&c=${{AUCTION_CURRENCY}}"),
                "lurl": format!("{base}/loss?imp=${{AUCTION_IMP_ID}}&r=${{AUCTION_LOSS}}&p=${{AUCTION_PRICE}}&m=${{AUCTION_MIN_TO_WIN}}"),
                "burl": format!("{base}/bill?p=${{AUCTION_PRICE}}"),
                "adomain": [format!("{}.test", mock.name)],
                "crid": "c1",
                "w": behaviour.size.0,
                "h": behaviour.size.1,
                "mtype": 1,
            });
            if !behaviour.no_adm {
                bid["adm"] = format!("<div>{} at ${{AUCTION_PRICE}}</div>", mock.name).into();
            }
            if let Some(deal) = &behaviour.deal {
                bid["dealid"] = deal.clone().into();
            }
            bid
        })
        .collect();
    let mut response = serde_json::json!({
        "id": request["id"],
        "seatbid": [{"seat": mock.name, "bid": bids}],
    });
    if let Some(currency) = &behaviour.currency {
        response["cur"] = currency.clone().into();
    }
    // Prices go out as the decimal text given, not through a float.
    response.to_string().replace("\"PRICE\"", &behaviour.price)
}

/// A request with one 300×250 banner imp per id, the given floor (USD) and `cur`.
pub fn request(imps: &[&str], floor: &str, cur: &[&str]) -> String {
    let imps: Vec<serde_json::Value> = imps
        .iter()
        .map(|id| {
            serde_json::json!({
                "id": id,
                "banner": {"format": [{"w": 300, "h": 250}]},
                "bidfloor": "FLOOR",
            })
        })
        .collect();
    serde_json::json!({
        "id": "auction-1",
        "imp": imps,
        "site": {"domain": "news.test", "page": "https://news.test/a"},
        "regs": {"gdpr": 1},
        "user": {"consent": "CPXXXX"},
        "cur": cur,
        "tmax": 500,
    })
    .to_string()
    .replace("\"FLOOR\"", floor)
}

pub fn gateway(bidders: &[&MockBidder], change: impl FnOnce(&mut GatewayConfig)) -> Gateway {
    let mut config = GatewayConfig {
        bidders: bidders.iter().map(|b| b.spec()).collect(),
        ..GatewayConfig::default()
    };
    change(&mut config);
    Gateway::new(config).unwrap()
}

/// The gateway's metrics as a scrape reads them.
/// Why a gateway with the one bidder `spec` cannot be built (its configuration error's text).
pub fn config_error(spec: marquee_gateway::BidderSpec) -> String {
    let config = GatewayConfig {
        bidders: vec![spec],
        ..GatewayConfig::default()
    };
    Gateway::new(config).unwrap_err().to_string()
}

pub fn metrics(gateway: &Gateway) -> String {
    let mut registry = marquee_metrics::Registry::default();
    gateway.register_metrics(&mut registry);
    marquee_metrics::encode(&registry, marquee_metrics::Format::Text)
}

/// A deadline far enough for debug builds on a busy machine.
pub fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(3)
}

/// One auction of `body` (which must parse) within [`deadline`], without our own line items.
pub async fn run(gateway: &Gateway, body: &str) -> Auctioned {
    gateway
        .auction(body.as_bytes(), "", |_| deadline(), None)
        .await
        .unwrap()
}

/// The winning bids of an answer: (seat, imp id, price micros, adm).
pub fn winners(answer: &str) -> Vec<(String, String, i64, Option<String>)> {
    let response = marquee_openrtb::BidResponse::parse(answer.as_bytes()).unwrap();
    let mut winners: Vec<_> = response
        .bids()
        .map(|(seat, bid)| {
            (
                seat.unwrap_or("").to_owned(),
                bid.impid.to_string(),
                bid.price_micros,
                bid.adm.as_deref().map(str::to_owned),
            )
        })
        .collect();
    winners.sort();
    winners
}
