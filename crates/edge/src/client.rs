//! Who sent a request, as far as the edge can tell: the client's address (the socket's peer, or
//! the address a trusted proxy forwarded), its user agent, and whether the browser fetched
//! without the visitor seeing anything (prefetch, prerender, `HEAD`). The traffic-quality
//! screen (`quality.rs`) judges events by it.

use std::net::{IpAddr, SocketAddr};

use hyper::Method;
use hyper::header::{HeaderMap, HeaderName, USER_AGENT};
use ipnet::IpNet;

/// The client of one request, read from the request only when asked: most requests (ad
/// requests without an event) never ask, and header lookups are a measurable share of a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client<'r> {
    /// The socket's peer; `None` in tests that have no socket.
    peer: Option<SocketAddr>,
    headers: &'r HeaderMap,
    /// Proxies whose forwarded address is believed.
    trusted: &'r [IpNet],
    head: bool,
}

impl<'r> Client<'r> {
    /// The client of a request from `peer` with `headers`, reading the forwarded address only
    /// when `peer` is one of the `trusted` proxies.
    pub(crate) fn of(
        peer: Option<SocketAddr>,
        method: &Method,
        headers: &'r HeaderMap,
        trusted: &'r [IpNet],
    ) -> Client<'r> {
        Client {
            peer,
            headers,
            trusted,
            head: *method == Method::HEAD,
        }
    }

    /// The client's address; `None` without a socket.
    pub(crate) fn ip(&self) -> Option<IpAddr> {
        self.peer
            .map(|peer| client_ip(peer.ip(), self.headers, self.trusted))
    }

    /// The `User-Agent` header's bytes, empty when absent.
    pub(crate) fn user_agent(&self) -> &'r [u8] {
        self.headers
            .get(USER_AGENT)
            .map_or(&[][..], |v| v.as_bytes())
    }

    /// A prefetch or prerender (`Sec-Purpose`, `Purpose`, `X-Purpose`, `X-Moz`).
    pub(crate) fn prefetch(&self) -> bool {
        is_prefetch(self.headers)
    }

    /// A `HEAD` request: nothing was fetched for a visitor to see.
    pub(crate) fn head(&self) -> bool {
        self.head
    }
}

/// Whether a header says the browser fetched ahead of a visitor: Chromium's `Sec-Purpose:
/// prefetch` (and `prefetch;prerender`), the older `Purpose: prefetch`, Safari's `X-Purpose:
/// preview` and Firefox's `X-Moz: prefetch`. One pass over the few headers a request has costs
/// less than a hashed lookup for each of the four names.
fn is_prefetch(headers: &HeaderMap) -> bool {
    headers.iter().any(|(name, value)| {
        matches!(
            name.as_str(),
            "sec-purpose" | "purpose" | "x-purpose" | "x-moz"
        ) && {
            let value = value.as_bytes();
            contains_ignoring_case(value, b"prefetch")
                || contains_ignoring_case(value, b"prerender")
                || contains_ignoring_case(value, b"preview")
        }
    })
}

fn contains_ignoring_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle))
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The client's address: the peer's, unless the peer is a trusted proxy; then the last address
/// of `X-Forwarded-For` (or `Forwarded: for=`) that is not itself a trusted proxy, read from
/// the right, since only the entries our own proxies appended can be believed.
fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if trusted.is_empty() || !is_trusted(&peer) {
        return peer;
    }
    let forwarded = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter_map(parse_address)
        .collect::<Vec<_>>();
    let forwarded = if forwarded.is_empty() {
        headers
            .get_all(hyper::header::FORWARDED)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split([',', ';']))
            .filter_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                name.eq_ignore_ascii_case("for").then_some(value)
            })
            .filter_map(parse_address)
            .collect()
    } else {
        forwarded
    };
    forwarded
        .into_iter()
        .rev()
        .find(|ip| !is_trusted(ip))
        .unwrap_or(peer)
}

/// An address as proxies write them: `203.0.113.7`, `203.0.113.7:4711`, `2001:db8::1`,
/// `[2001:db8::1]:4711`, or quoted (`"[2001:db8::1]"` in `Forwarded`).
fn parse_address(text: &str) -> Option<IpAddr> {
    let text = text.trim().trim_matches('"');
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    let bracketed = text.strip_prefix('[')?;
    let end = bracketed.find(']')?;
    bracketed[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn the_forwarded_address_is_believed_only_from_a_trusted_proxy() {
        let h = headers(&[("x-forwarded-for", "198.51.100.9, 203.0.113.7")]);
        let peer: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(client_ip(peer, &h, &[]), peer);
        assert_eq!(client_ip(peer, &h, &nets(&["192.168.0.0/16"])), peer);
        assert_eq!(
            client_ip(peer, &h, &nets(&["10.0.0.0/8"])),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        // A chain of our own proxies: the first untrusted address from the right.
        assert_eq!(
            client_ip(peer, &h, &nets(&["10.0.0.0/8", "203.0.113.0/24"])),
            "198.51.100.9".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn forwarded_headers_of_both_kinds_and_every_address_form_are_read() {
        let trusted = nets(&["10.0.0.0/8"]);
        let peer: IpAddr = "10.1.2.3".parse().unwrap();
        let h = headers(&[("forwarded", "for=\"[2001:db8::7]:4711\";proto=https")]);
        assert_eq!(
            client_ip(peer, &h, &trusted),
            "2001:db8::7".parse::<IpAddr>().unwrap()
        );
        let h = headers(&[("x-forwarded-for", "203.0.113.7:5000")]);
        assert_eq!(
            client_ip(peer, &h, &trusted),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        let h = headers(&[("x-forwarded-for", "garbage")]);
        assert_eq!(client_ip(peer, &h, &trusted), peer);
    }

    #[test]
    fn prefetch_and_prerender_headers_are_recognised() {
        for (name, value) in [
            ("sec-purpose", "prefetch"),
            ("sec-purpose", "prefetch;prerender"),
            ("purpose", "prefetch"),
            ("x-purpose", "preview"),
            ("x-moz", "prefetch"),
        ] {
            assert!(is_prefetch(&headers(&[(name, value)])), "{name}: {value}");
        }
        assert!(!is_prefetch(&headers(&[("accept", "image/*")])));
    }
}
