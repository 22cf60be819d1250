//! A lean HTTP/1.1 client connection for the load generator: it writes request bytes prepared by
//! the workload in one call and parses the answer in place with `httparse`, allocating nothing
//! per request. hyper's client connection, tried first, drove the reference at about 75% of
//! what `wrk` reached on the same core (its request/response objects, header maps and the
//! channel to its connection task cost more than the server's work), so the server was not
//! CPU-bound and ratios were pulled toward 1. This client measured 0.97–1.03 of `wrk`'s rate
//! on the same core (`docs/benchmarks.md`).
//!
//! It understands what a load generator needs: status, `Content-Length`, chunked bodies,
//! bodies delimited by close, bodiless statuses, `Connection: close` and HTTP/1.0 answers.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::report::ErrorKind;

/// Room for a typical answer in one read; grows for larger heads and chunk lines.
const INITIAL_BUFFER: usize = 16 * 1024;
/// An answer head or chunk line longer than this is not worth parsing.
const MAX_BUFFER: usize = 1024 * 1024;
const MAX_HEADERS: usize = 64;

/// The parts of an answer the report counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body_bytes: u64,
    /// The server will close the connection (or already did): do not reuse it.
    pub close: bool,
}

/// One open connection.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    buffer: Buffer,
}

impl Connection {
    pub async fn open(addr: SocketAddr) -> Result<Self, ErrorKind> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|_| ErrorKind::Connect)?;
        // Without NODELAY small requests wait for Nagle; failure only costs latency.
        let _ = stream.set_nodelay(true);
        Ok(Connection {
            stream,
            buffer: Buffer::new(),
        })
    }

    /// Sends one whole request and reads its whole answer.
    pub async fn exchange(&mut self, request: &[u8]) -> Result<Answer, ErrorKind> {
        self.exchange_into(request, None).await
    }

    /// Like [`Connection::exchange`], and with `body` the answer's body is appended to it (up
    /// to [`MAX_BUFFER`] bytes; the rest is read and counted, not kept). Only answers that are
    /// read, such as an ad answer whose tracking URLs come next, pay for the copy.
    pub async fn exchange_into(
        &mut self,
        request: &[u8],
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<Answer, ErrorKind> {
        self.stream.write_all(request).await.map_err(io_kind)?;
        let head = loop {
            if let Some(head) = parse_head(self.buffer.available())? {
                self.buffer.consume(head.len);
                if (100..200).contains(&head.status) {
                    continue; // an interim answer; the real one follows
                }
                break head;
            }
            self.buffer.fill(&mut self.stream).await?;
        };
        let bodiless = head.status == 204 || head.status == 304 || request.starts_with(b"HEAD ");
        let body_bytes = match head.framing {
            _ if bodiless => 0,
            Framing::Length(length) => {
                self.skip(length, &mut body).await?;
                length
            }
            Framing::Chunked => self.skip_chunked(&mut body).await?,
            Framing::UntilClose => self.skip_to_end(&mut body).await?,
        };
        Ok(Answer {
            status: head.status,
            body_bytes,
            close: head.close || matches!(head.framing, Framing::UntilClose) && !bodiless,
        })
    }

    /// Skips `length` body bytes, keeping them in `keep` when given.
    async fn skip(&mut self, mut length: u64, keep: &mut Keep<'_>) -> Result<(), ErrorKind> {
        while length > 0 {
            if self.buffer.available().is_empty() {
                self.buffer.fill(&mut self.stream).await?;
            }
            let take = self
                .buffer
                .available()
                .len()
                .min(usize::try_from(length).unwrap_or(usize::MAX));
            keep_bytes(keep, &self.buffer.available()[..take]);
            self.buffer.consume(take);
            length -= take as u64;
        }
        Ok(())
    }

    async fn line(&mut self) -> Result<usize, ErrorKind> {
        loop {
            if let Some(end) = find_crlf(self.buffer.available()) {
                return Ok(end);
            }
            self.buffer.fill(&mut self.stream).await?;
        }
    }

    /// Skips a chunked body and its trailers; returns the body size.
    async fn skip_chunked(&mut self, keep: &mut Keep<'_>) -> Result<u64, ErrorKind> {
        let mut total = 0;
        loop {
            let end = self.line().await?;
            let line = &self.buffer.available()[..end];
            let digits = line.split(|&b| b == b';').next().unwrap_or(line);
            let size = std::str::from_utf8(digits)
                .ok()
                .and_then(|text| u64::from_str_radix(text.trim(), 16).ok())
                .ok_or(ErrorKind::Parse)?;
            self.buffer.consume(end + 2);
            if size == 0 {
                // Trailers, up to an empty line.
                loop {
                    let end = self.line().await?;
                    self.buffer.consume(end + 2);
                    if end == 0 {
                        return Ok(total);
                    }
                }
            }
            self.skip(size, keep).await?;
            self.skip(2, &mut None).await?;
            total += size;
        }
    }

    async fn skip_to_end(&mut self, keep: &mut Keep<'_>) -> Result<u64, ErrorKind> {
        let mut total = 0;
        loop {
            let available = self.buffer.available().len();
            keep_bytes(keep, self.buffer.available());
            total += available as u64;
            self.buffer.consume(available);
            match self.buffer.fill(&mut self.stream).await {
                Ok(()) => {}
                Err(ErrorKind::Closed) => return Ok(total),
                Err(other) => return Err(other),
            }
        }
    }
}

/// Where a body is kept, if anywhere.
type Keep<'a> = Option<&'a mut Vec<u8>>;

fn keep_bytes(keep: &mut Keep<'_>, bytes: &[u8]) {
    if let Some(keep) = keep {
        let room = MAX_BUFFER.saturating_sub(keep.len());
        keep.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// Received bytes not yet consumed: `data[start..end]`.
#[derive(Debug)]
struct Buffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl Buffer {
    fn new() -> Self {
        Buffer {
            data: vec![0; INITIAL_BUFFER],
            start: 0,
            end: 0,
        }
    }

    fn available(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads more; the end of the stream is `Closed`.
    async fn fill(&mut self, stream: &mut TcpStream) -> Result<(), ErrorKind> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < MAX_BUFFER {
                self.data.resize(self.data.len() * 2, 0);
            } else {
                return Err(ErrorKind::Parse);
            }
        }
        let n = stream
            .read(&mut self.data[self.end..])
            .await
            .map_err(io_kind)?;
        if n == 0 {
            return Err(ErrorKind::Closed);
        }
        self.end += n;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    status: u16,
    len: usize,
    framing: Framing,
    close: bool,
}

/// The answer's head if `bytes` hold all of it.
fn parse_head(bytes: &[u8]) -> Result<Option<Head>, ErrorKind> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ErrorKind::Parse),
    };
    let status = response.code.ok_or(ErrorKind::Parse)?;
    // HTTP/1.0 closes unless told otherwise; 1.1 keeps alive unless told otherwise.
    let mut close = response.version == Some(0);
    let mut framing = Framing::UntilClose;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            let length = std::str::from_utf8(header.value)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .ok_or(ErrorKind::Parse)?;
            if framing != Framing::Chunked {
                framing = Framing::Length(length);
            }
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if has_token(header.value, "chunked") {
                framing = Framing::Chunked;
            }
        } else if header.name.eq_ignore_ascii_case("connection") {
            if has_token(header.value, "close") {
                close = true;
            } else if has_token(header.value, "keep-alive") {
                close = false;
            }
        }
    }
    Ok(Some(Head {
        status,
        len,
        framing,
        close,
    }))
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|part| part.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|pair| pair == b"\r\n")
}

fn io_kind(error: std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as Io;
    match error.kind() {
        Io::ConnectionReset | Io::ConnectionAborted | Io::BrokenPipe | Io::UnexpectedEof => {
            ErrorKind::Closed
        }
        Io::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Serves canned answers, one per request line received, on one connection.
    async fn canned(answers: Vec<&'static [u8]>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            for answer in answers {
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = stream.read(&mut buf).await.unwrap();
                    seen.extend_from_slice(&buf[..n]);
                }
                let at = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                seen.drain(..at + 4);
                // Dribble the answer out in small pieces to exercise partial parsing.
                for piece in answer.chunks(7) {
                    stream.write_all(piece).await.unwrap();
                    stream.flush().await.unwrap();
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn parses_every_framing_on_one_connection() {
        let addr = canned(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: 1\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        ])
        .await;
        let mut connection = Connection::open(addr).await.unwrap();
        let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let answers = [
            (200, 5, false),
            (204, 0, false),
            (200, 19, false),
            (404, 0, true),
        ];
        for (status, body_bytes, close) in answers {
            let answer = connection.exchange(get).await.unwrap();
            assert_eq!(
                answer,
                Answer {
                    status,
                    body_bytes,
                    close
                }
            );
        }
    }

    #[tokio::test]
    async fn bodies_are_kept_when_asked_for() {
        let addr = canned(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nxyz",
        ])
        .await;
        let mut connection = Connection::open(addr).await.unwrap();
        let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut body = Vec::new();
        connection
            .exchange_into(get, Some(&mut body))
            .await
            .unwrap();
        assert_eq!(body, b"hello");
        body.clear();
        let answer = connection
            .exchange_into(get, Some(&mut body))
            .await
            .unwrap();
        assert_eq!((body.as_slice(), answer.body_bytes), (&b"abcdefg"[..], 7));
        body.clear();
        connection.exchange(get).await.unwrap();
        assert!(body.is_empty());
    }

    #[tokio::test]
    async fn body_until_close_and_broken_answers() {
        let addr = canned(vec![b"HTTP/1.0 200 OK\r\n\r\nuntil the end"]).await;
        let mut connection = Connection::open(addr).await.unwrap();
        let answer = connection
            .exchange(b"GET / HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        assert_eq!((answer.body_bytes, answer.close), (13, true));

        let addr = canned(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"]).await;
        let mut connection = Connection::open(addr).await.unwrap();
        let error = connection.exchange(b"GET / HTTP/1.1\r\n\r\n").await;
        assert_eq!(error, Err(ErrorKind::Closed));

        let addr = canned(vec![b"SMTP ready\r\n\r\n"]).await;
        let mut connection = Connection::open(addr).await.unwrap();
        let error = connection.exchange(b"GET / HTTP/1.1\r\n\r\n").await;
        assert_eq!(error, Err(ErrorKind::Parse));
    }
}
