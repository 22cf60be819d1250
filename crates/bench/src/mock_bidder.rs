//! `marquee bench mock-bidder`: a stand-in for an external OpenRTB bidder, for gateway
//! benchmarks. It reads each request's `id` and imps and answers one banner bid per imp at a
//! fixed price or one drawn from a range, after a configurable delay; at configured rates it
//! answers no bid (204), fails (500) or never answers (the caller times out). The answer JSON
//! is written directly: this crate knows no Marquee type.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;
use tokio::net::TcpListener;

use crate::BenchError;
use crate::cli::parse_duration;

#[derive(Debug, Clone, Args)]
pub struct MockBidderArgs {
    /// Address to listen on (HTTP/1.1 and h2c); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8091", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Price of every bid: a decimal ("1.5") or a range drawn per bid ("0.5-2.5").
    #[arg(long, default_value = "1", value_name = "PRICE")]
    pub price: String,
    /// Wait this long before answering (e.g. 5ms).
    #[arg(long, default_value = "0ms", value_name = "DURATION", value_parser = parse_duration)]
    pub delay: Duration,
    /// Share of requests never answered (0 to 1): the caller times out.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub timeout_rate: f64,
    /// Share of requests answered 500.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub error_rate: f64,
    /// Share of requests answered 204 (no bid).
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub no_bid_rate: f64,
    /// `seatbid.seat` of the answer.
    #[arg(long, default_value = "mock", value_name = "SEAT")]
    pub seat: String,
    /// `cur` of the answer (none: USD implied).
    #[arg(long, value_name = "CODE")]
    pub currency: Option<String>,
    /// Bid on this deal (`dealid`).
    #[arg(long, value_name = "ID")]
    pub deal: Option<String>,
    /// Put win, billing and loss notice URLs under this base in every bid (e.g.
    /// http://127.0.0.1:8091, answered 200 by this server).
    #[arg(long, value_name = "URL")]
    pub notice_base: Option<String>,
}

/// How a bid's price is chosen, in micros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Price {
    Fixed(i64),
    Range(i64, i64),
}

#[derive(Debug)]
struct Settings {
    args: MockBidderArgs,
    price: Price,
}

/// A bound mock bidder; [`MockBidder::serve`] runs it.
#[derive(Debug)]
pub struct MockBidder {
    listener: TcpListener,
    settings: Arc<Settings>,
}

impl MockBidder {
    pub async fn bind(args: MockBidderArgs) -> Result<MockBidder, BenchError> {
        let price = parse_price(&args.price).ok_or_else(|| {
            BenchError::Usage(format!(
                "--price {:?}: give a decimal such as 1.5 or a range such as 0.5-2.5",
                args.price
            ))
        })?;
        for (flag, rate) in [
            ("--timeout-rate", args.timeout_rate),
            ("--error-rate", args.error_rate),
            ("--no-bid-rate", args.no_bid_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(BenchError::Usage(format!(
                    "{flag} {rate}: a share between 0 and 1"
                )));
            }
        }
        let listener =
            TcpListener::bind(args.listen)
                .await
                .map_err(|source| BenchError::Listen {
                    addr: args.listen,
                    source,
                })?;
        Ok(MockBidder {
            listener,
            settings: Arc::new(Settings { args, price }),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, BenchError> {
        self.listener
            .local_addr()
            .map_err(|source| BenchError::Listen {
                addr: self.settings.args.listen,
                source,
            })
    }

    /// Serves until the task is dropped or the process ends.
    pub async fn serve(self) {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        for connection in 0u64.. {
            let stream = crate::reference::accept(&self.listener).await;
            let settings = Arc::clone(&self.settings);
            tokio::spawn(async move {
                // Draws need no quality: a generator per connection, seeded apart (a mutex
                // nobody else takes; the service must be `Fn`).
                let rng = Mutex::new(SmallRng::seed_from_u64(
                    start ^ connection.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ));
                let service = service_fn(move |request| {
                    let mut rng = rng.lock().unwrap_or_else(PoisonError::into_inner);
                    let roll: f64 = rng.random();
                    let price = match settings.price {
                        Price::Fixed(micros) => micros,
                        Price::Range(low, high) => rng.random_range(low..=high),
                    };
                    drop(rng);
                    answer(Arc::clone(&settings), request, roll, price)
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

#[derive(Deserialize)]
struct MockRequest {
    id: String,
    #[serde(default)]
    imp: Vec<MockImp>,
}

#[derive(Deserialize)]
struct MockImp {
    id: String,
    banner: Option<MockBanner>,
}

#[derive(Deserialize)]
struct MockBanner {
    w: Option<u32>,
    h: Option<u32>,
    #[serde(default)]
    format: Vec<MockFormat>,
}

#[derive(Deserialize)]
struct MockFormat {
    w: u32,
    h: u32,
}

fn status(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

/// `roll` (uniform in 0..1) picks the behaviour: never answer, fail, no bid, or bid.
async fn answer(
    settings: Arc<Settings>,
    request: Request<Incoming>,
    roll: f64,
    price: i64,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() == Method::GET {
        // A notice.
        return Ok(status(StatusCode::OK));
    }
    let body = match Limited::new(request.into_body(), 1 << 20).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    let args = &settings.args;
    if !args.delay.is_zero() {
        tokio::time::sleep(args.delay).await;
    }
    let mut threshold = args.timeout_rate;
    if roll < threshold {
        std::future::pending::<()>().await;
    }
    threshold += args.error_rate;
    if roll < threshold {
        return Ok(status(StatusCode::INTERNAL_SERVER_ERROR));
    }
    threshold += args.no_bid_rate;
    if roll < threshold {
        return Ok(status(StatusCode::NO_CONTENT));
    }
    let Ok(parsed) = serde_json::from_slice::<MockRequest>(&body) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let mut response = Response::new(Full::new(Bytes::from(bids(args, &parsed, price))));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

/// One banner bid per imp that offers a banner, at `price` micros.
fn bids(args: &MockBidderArgs, request: &MockRequest, price: i64) -> String {
    let quote = |text: &str| serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
    let mut out = String::with_capacity(512 * request.imp.len().max(1));
    let _ = write!(
        out,
        "{{\"id\":{},\"seatbid\":[{{\"bid\":[",
        quote(&request.id)
    );
    let mut first = true;
    for (i, imp) in request.imp.iter().enumerate() {
        let Some(banner) = &imp.banner else {
            continue;
        };
        let size = banner
            .format
            .first()
            .map(|f| (f.w, f.h))
            .or(banner.w.zip(banner.h))
            .unwrap_or((300, 250));
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(
            out,
            "{{\"id\":\"b{i}\",\"impid\":{},\"price\":{},\"adm\":\"<div>mock ad</div>\",\
             \"adomain\":[\"mock.test\"],\"crid\":\"mock-1\",\"w\":{},\"h\":{},\"mtype\":1",
            quote(&imp.id),
            format_micros(price),
            size.0,
            size.1
        );
        if let Some(deal) = &args.deal {
            let _ = write!(out, ",\"dealid\":{}", quote(deal));
        }
        if let Some(base) = &args.notice_base {
            let base = base.trim_end_matches('/');
            let _ = write!(
                out,
                ",\"nurl\":{},\"burl\":{},\"lurl\":{}",
                quote(&format!("{base}/win?p=${{AUCTION_PRICE}}")),
                quote(&format!("{base}/bill?p=${{AUCTION_PRICE}}")),
                quote(&format!("{base}/loss?r=${{AUCTION_LOSS}}")),
            );
        }
        out.push('}');
    }
    let _ = write!(out, "],\"seat\":{}}}]", quote(&args.seat));
    if let Some(currency) = &args.currency {
        let _ = write!(out, ",\"cur\":{}", quote(currency));
    }
    out.push('}');
    out
}

/// `"1.25"` → 1,250,000 micros; at most six decimals, not negative.
fn parse_micros(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > 6
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction: i64 = format!("{fraction:0<6}").parse().ok()?;
    whole.checked_mul(1_000_000)?.checked_add(fraction)
}

fn format_micros(micros: i64) -> String {
    let fraction = format!("{:06}", micros % 1_000_000);
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        format!("{}", micros / 1_000_000)
    } else {
        format!("{}.{fraction}", micros / 1_000_000)
    }
}

fn parse_price(text: &str) -> Option<Price> {
    let price = match text.split_once('-') {
        Some((low, high)) => {
            let (low, high) = (parse_micros(low.trim())?, parse_micros(high.trim())?);
            (low <= high).then_some(Price::Range(low, high))?
        }
        None => Price::Fixed(parse_micros(text.trim())?),
    };
    let positive = match price {
        Price::Fixed(p) => p > 0,
        Price::Range(low, _) => low > 0,
    };
    positive.then_some(price)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_and_print_exactly() {
        assert_eq!(parse_price("1.5"), Some(Price::Fixed(1_500_000)));
        assert_eq!(
            parse_price("0.5-2.25"),
            Some(Price::Range(500_000, 2_250_000))
        );
        for bad in ["", "-1", "0", "2-1", "1.1234567", "x"] {
            assert_eq!(parse_price(bad), None, "{bad}");
        }
        assert_eq!(format_micros(2_500_000), "2.5");
        assert_eq!(format_micros(3_000_000), "3");
        assert_eq!(format_micros(100), "0.0001");
    }

    #[test]
    fn answers_one_bid_per_banner_imp_with_the_request_id() {
        let args = MockBidderArgs {
            listen: "127.0.0.1:0"
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))),
            price: "1".into(),
            delay: Duration::ZERO,
            timeout_rate: 0.0,
            error_rate: 0.0,
            no_bid_rate: 0.0,
            seat: "s".into(),
            currency: Some("EUR".into()),
            deal: Some("D1".into()),
            notice_base: None,
        };
        let request: MockRequest = serde_json::from_str(
            r#"{"id":"a\"1","imp":[{"id":"1","banner":{"format":[{"w":728,"h":90}]}},{"id":"2","video":{}}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let text = bids(&args, &request, 1_250_000);
        let value: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(value["id"], "a\"1");
        assert_eq!(value["cur"], "EUR");
        let bids = value["seatbid"][0]["bid"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(bids.len(), 1, "{text}");
        assert_eq!(bids[0]["impid"], "1");
        assert_eq!(
            (bids[0]["w"].clone(), bids[0]["h"].clone()),
            (728.into(), 90.into())
        );
        assert_eq!(bids[0]["dealid"], "D1");
        assert!(text.contains("\"price\":1.25,"), "{text}");
    }
}
