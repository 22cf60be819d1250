//! The hello-world reference: the 100% of ratio runs (`docs/benchmark-method.md`). Bare hyper 1
//! HTTP/1.1 with a `service_fn`, the stack the edge is built on, doing no work: `GET` answers
//! a fixed body of N bytes, `POST` reads the whole request body and answers a fixed JSON of M
//! bytes. Anything a candidate does beyond that is what a ratio measures.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::BenchError;

/// The shortest JSON answer: `{}` (padded with spaces when more bytes are asked for but fewer
/// than the padded object needs).
const MIN_POST_BYTES: usize = 2;

/// A bound reference server; [`ReferenceServer::serve`] runs it.
#[derive(Debug)]
pub struct ReferenceServer {
    listener: TcpListener,
    bodies: Arc<Bodies>,
}

#[derive(Debug)]
struct Bodies {
    get: Bytes,
    post: Bytes,
}

impl ReferenceServer {
    /// Binds `listen` (port 0 picks a free port) with answers of the given sizes.
    pub async fn bind(
        listen: SocketAddr,
        get_bytes: usize,
        post_bytes: usize,
    ) -> Result<Self, BenchError> {
        if post_bytes < MIN_POST_BYTES {
            return Err(BenchError::Usage(format!(
                "--post-bytes must be at least {MIN_POST_BYTES}: the answer is JSON"
            )));
        }
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| BenchError::Listen {
                addr: listen,
                source,
            })?;
        Ok(ReferenceServer {
            listener,
            bodies: Arc::new(Bodies {
                get: get_body(get_bytes),
                post: post_body(post_bytes),
            }),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, BenchError> {
        let addr = self
            .listener
            .local_addr()
            .map_err(|source| BenchError::Listen {
                addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                source,
            })?;
        Ok(addr)
    }

    /// Serves until the task is dropped or the process ends.
    pub async fn serve(self) {
        loop {
            let stream = accept(&self.listener).await;
            let bodies = Arc::clone(&self.bodies);
            tokio::spawn(async move {
                let service = service_fn(move |request| answer(request, Arc::clone(&bodies)));
                // A client that goes away mid-request is not the server's problem.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// The next connection, with NODELAY set (without it small answers wait for Nagle; failing to
/// set it only costs latency). An accept error (out of file descriptors and the like) is
/// waited out rather than spun on. The mock bidder's server accepts the same way.
pub(crate) async fn accept(listener: &TcpListener) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return stream;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn answer(
    request: Request<Incoming>,
    bodies: Arc<Bodies>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (body, content_type) = match *request.method() {
        Method::GET => (bodies.get.clone(), "text/html; charset=utf-8"),
        Method::POST => {
            let mut incoming = request.into_body();
            while let Some(frame) = incoming.frame().await {
                if frame.is_err() {
                    // The connection is broken; hyper drops whatever is answered.
                    break;
                }
            }
            (bodies.post.clone(), "application/json")
        }
        _ => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            return Ok(response);
        }
    };
    let mut response = Response::new(Full::new(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

/// `n` bytes of HTML-ish filler (a comment, then text), like rendered ad code.
fn get_body(n: usize) -> Bytes {
    let pattern = b"<!-- marquee reference answer -->";
    let filler = b"0123456789abcdefghijklmnopqrstuvwxyz ";
    let mut body: Vec<u8> = pattern.iter().copied().take(n).collect();
    body.extend(filler.iter().copied().cycle().take(n - body.len()));
    Bytes::from(body)
}

/// A JSON object of exactly `n` bytes (`n >= 2`): a padded string field when it fits, else
/// `{}` followed by whitespace, which JSON allows.
fn post_body(n: usize) -> Bytes {
    let head = r#"{"id":"marquee-reference","pad":""#;
    let tail = r#""}"#;
    let fixed = head.len() + tail.len();
    let mut body = Vec::with_capacity(n);
    if n >= fixed {
        body.extend_from_slice(head.as_bytes());
        body.resize(n - tail.len(), b'x');
        body.extend_from_slice(tail.as_bytes());
    } else {
        body.extend_from_slice(b"{}");
        body.resize(n, b' ');
    }
    Bytes::from(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_exact_sizes_and_posts_are_json() {
        for n in [0, 1, 10, 33, 34, 5000] {
            assert_eq!(get_body(n).len(), n);
        }
        for n in [2, 5, 36, 37, 600, 4096] {
            let body = post_body(n);
            assert_eq!(body.len(), n);
            serde_json::from_slice::<serde_json::Value>(&body).unwrap();
        }
    }
}
