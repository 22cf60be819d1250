//! Where a bidder's win and loss notices may go.
//!
//! A bidder writes its `nurl` and `lurl` itself, so without a check it could make the gateway
//! send a GET to any host it names, internal ones included (cloud metadata at 169.254.169.254,
//! admin ports on loopback, private services): a blind SSRF. So a notice is sent only when
//!
//! - its URL parses (WHATWG rules, the `url` crate), is `http` or `https` and has no user info;
//! - its host is the bidder endpoint's host or matches one of the bidder's `notice_hosts`
//!   (a host, or `*.domain` for any subdomain of `domain`); the port is not restricted;
//! - the address it connects to, an IP address in the URL or each address its name resolves
//!   to, is not loopback, private, shared (100.64.0.0/10), link-local, unspecified, broadcast or
//!   multicast, unless the endpoint's own host is such an address or resolves to one: the
//!   operator then put the bidder on an internal network and trusts it.
//!
//! The address check runs inside the notice client's resolver, so the addresses checked are
//! the addresses connected to (a name cannot resolve to one address for the check and another
//! for the connection).

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::dns::Name;
use url::{Host, Url};

/// Why a `notice_hosts` entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoticeHostError {
    #[error("{entry:?}: `*` is allowed only as a leading `*.` followed by a domain name")]
    Wildcard { entry: String },
    #[error(
        "{entry:?} is not a host name or IP address ({source}); give a bare host: no scheme, \
         port or path, an IPv6 address in brackets"
    )]
    NotAHost {
        entry: String,
        source: url::ParseError,
    },
}

/// One `notice_hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostPattern {
    /// This host exactly: a domain name, or an IPv4 or IPv6 address.
    Exact(Host<String>),
    /// Any subdomain of this domain (`*.example.net`), at any depth; not the domain itself.
    Subdomains(String),
}

impl HostPattern {
    /// Reads an entry; domain names are compared as the URL parser writes them (lower case,
    /// international names in punycode), so `Win.Example.com` matches `win.example.com`.
    pub(crate) fn parse(entry: &str) -> Result<HostPattern, NoticeHostError> {
        let (wildcard, host) = match entry.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
        let wildcard_error = || NoticeHostError::Wildcard {
            entry: entry.to_owned(),
        };
        if host.contains('*') {
            return Err(wildcard_error());
        }
        let host = Host::parse(host).map_err(|source| NoticeHostError::NotAHost {
            entry: entry.to_owned(),
            source,
        })?;
        match (wildcard, host) {
            (false, host) => Ok(HostPattern::Exact(host)),
            (true, Host::Domain(domain)) => Ok(HostPattern::Subdomains(domain)),
            // "Any subdomain of an IP address" means nothing.
            (true, _) => Err(wildcard_error()),
        }
    }

    fn matches(&self, host: &Host<&str>) -> bool {
        match (self, host) {
            (HostPattern::Exact(exact), host) => exact == host,
            (HostPattern::Subdomains(domain), Host::Domain(name)) => name
                .strip_suffix(domain.as_str())
                .is_some_and(|label| label.len() > 1 && label.ends_with('.')),
            (HostPattern::Subdomains(_), _) => false,
        }
    }
}

/// Why a notice was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoticeRefusal {
    #[error("the URL does not parse: {0}")]
    Unparsable(#[from] url::ParseError),
    #[error("the URL's scheme {0:?} is neither http nor https")]
    Scheme(String),
    #[error("the URL has user info")]
    UserInfo,
    #[error("host {0:?} is neither the endpoint's nor in `notice_hosts`")]
    Host(String),
    #[error(
        "address {0} is loopback, private, link-local or otherwise internal, and the bidder's \
         endpoint is not on such a network"
    )]
    Address(IpAddr),
}

/// The hosts a bidder's notices may go to.
#[derive(Debug)]
pub(crate) struct NoticePolicy {
    endpoint: Host<String>,
    extra: Vec<HostPattern>,
}

impl NoticePolicy {
    pub(crate) fn new(endpoint: Host<String>, extra: Vec<HostPattern>) -> NoticePolicy {
        NoticePolicy { endpoint, extra }
    }

    /// The URL to send, or why it must not be sent. The caller sends the URL as parsed here
    /// (its serialisation), never the bidder's text, so that the HTTP client cannot read a
    /// different host out of it than the one checked.
    pub(crate) fn check(&self, url: &str) -> Result<Url, NoticeRefusal> {
        let url = Url::parse(url)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(NoticeRefusal::Scheme(url.scheme().to_owned()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(NoticeRefusal::UserInfo);
        }
        let allowed = url.host().is_some_and(|host| {
            self.endpoint == host || self.extra.iter().any(|pattern| pattern.matches(&host))
        });
        if !allowed {
            return Err(NoticeRefusal::Host(
                url.host_str().unwrap_or_default().to_owned(),
            ));
        }
        Ok(url)
    }
}

/// Whether a notice may not reach `ip` unless the bidder's endpoint is internal too:
/// loopback, private (RFC 1918, IPv6 unique local), shared (100.64.0.0/10, where some clouds
/// put their metadata service), link-local, unspecified (0.0.0.0/8, `::`), broadcast or
/// multicast; an IPv4-mapped IPv6 address as its IPv4 address.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_internal_v4(v4),
            None => {
                v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || v6.is_unique_local()
                    || v6.is_unicast_link_local()
            }
        },
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [first, second, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || first == 0
        || (first == 100 && (64..128).contains(&second))
}

/// The address half of the policy: whether a notice may connect to an internal address, which
/// depends on where the bidder's endpoint is.
#[derive(Debug)]
pub(crate) struct AddressGuard {
    endpoint: Host<String>,
    /// Whether the endpoint's name resolves to an internal address: decided on the first
    /// notice that needs it and kept, so that a bidder re-pointing its endpoint's name at an
    /// internal address later gains nothing.
    endpoint_internal: tokio::sync::OnceCell<bool>,
}

impl AddressGuard {
    pub(crate) fn new(endpoint: Host<String>) -> AddressGuard {
        AddressGuard {
            endpoint,
            endpoint_internal: tokio::sync::OnceCell::new(),
        }
    }

    /// Whether a notice may connect to `ip`.
    pub(crate) async fn admits(&self, ip: IpAddr) -> bool {
        !is_internal(ip) || self.endpoint_is_internal().await
    }

    async fn endpoint_is_internal(&self) -> bool {
        let name = match &self.endpoint {
            Host::Ipv4(ip) => return is_internal(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => return is_internal(IpAddr::V6(*ip)),
            Host::Domain(name) => name.as_str(),
        };
        let resolved = self
            .endpoint_internal
            .get_or_try_init(|| async {
                let addresses = tokio::net::lookup_host((name, 0)).await?;
                Ok::<_, io::Error>(addresses.map(|a| a.ip()).any(is_internal))
            })
            .await;
        // A failed lookup is not kept: the next notice asks again. Until then, not trusted.
        resolved.is_ok_and(|internal| *internal)
    }

    /// The addresses of `resolved` a notice may connect to; the first refused one when none
    /// is left.
    async fn screen(&self, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, IpAddr> {
        let Some(internal) = resolved
            .iter()
            .map(SocketAddr::ip)
            .find(|ip| is_internal(*ip))
        else {
            return Ok(resolved);
        };
        if self.endpoint_is_internal().await {
            return Ok(resolved);
        }
        let public: Vec<SocketAddr> = resolved
            .into_iter()
            .filter(|address| !is_internal(address.ip()))
            .collect();
        if public.is_empty() {
            Err(internal)
        } else {
            Ok(public)
        }
    }
}

/// Why the notice client's resolver gave no address.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    #[error(transparent)]
    Lookup(#[from] io::Error),
    #[error("{0} is internal and the bidder's endpoint is not")]
    Refused(IpAddr),
}

/// The notice client's resolver: the system's (`getaddrinfo`, as the bid calls use), with the
/// addresses the guard refuses taken out.
#[derive(Debug, Clone)]
pub(crate) struct GuardedResolver(pub(crate) Arc<AddressGuard>);

impl tower::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = ResolveError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ResolveError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ResolveError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let guard = Arc::clone(&self.0);
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let admitted = guard.screen(resolved).await;
            admitted.map(Vec::into_iter).map_err(ResolveError::Refused)
        })
    }
}

/// The internal address the resolver refused, if that is why a request failed.
pub(crate) fn refused_address(error: &(dyn std::error::Error + 'static)) -> Option<IpAddr> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(ResolveError::Refused(ip)) = error.downcast_ref::<ResolveError>() {
            return Some(*ip);
        }
        cause = error.source();
    }
    None
}

/// At most one log line per interval (a bidder answering every auction with a refused URL
/// must not flood the log; the metric counts every refusal).
#[derive(Debug)]
pub(crate) struct LogLimit {
    origin: Instant,
    interval: Duration,
    /// Milliseconds since `origin` before which nothing more is logged.
    next_ms: AtomicU64,
}

impl LogLimit {
    pub(crate) fn new(interval: Duration) -> LogLimit {
        LogLimit {
            origin: Instant::now(),
            interval,
            next_ms: AtomicU64::new(0),
        }
    }

    /// Whether a line may be logged at `now` (and the next one not before an interval).
    pub(crate) fn allow(&self, now: Instant) -> bool {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let now_ms = millis(now.saturating_duration_since(self.origin));
        let next = now_ms.saturating_add(millis(self.interval));
        self.next_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |until| {
                (now_ms >= until).then_some(next)
            })
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::Ipv6Addr;

    use super::*;

    fn policy(endpoint: &str, extra: &[&str]) -> NoticePolicy {
        let endpoint = Url::parse(endpoint).unwrap().host().unwrap().to_owned();
        let extra = extra
            .iter()
            .map(|e| HostPattern::parse(e).unwrap())
            .collect();
        NoticePolicy::new(endpoint, extra)
    }

    #[test]
    fn notices_go_to_the_endpoint_host_on_any_port_and_path() {
        let policy = policy("http://Bid.Example.com:8080/openrtb", &[]);
        for url in [
            "http://bid.example.com/win?p=1",
            "https://BID.example.com:9443/loss?r=102",
            "http://bid.example.com:8080/openrtb/win",
        ] {
            assert!(policy.check(url).is_ok(), "{url}");
        }
        for (url, host) in [
            (
                "http://169.254.169.254/latest/meta-data/",
                "169.254.169.254",
            ),
            ("http://127.0.0.1:8080/admin", "127.0.0.1"),
            ("http://example.com/win", "example.com"),
            ("http://evil.bid.example.com/win", "evil.bid.example.com"),
            (
                "http://bid.example.com.evil.net/win",
                "bid.example.com.evil.net",
            ),
        ] {
            assert_eq!(
                policy.check(url),
                Err(NoticeRefusal::Host(host.into())),
                "{url}"
            );
        }
    }

    #[test]
    fn only_http_urls_without_user_info_are_sent() {
        let policy = policy("http://10.0.0.7/bid", &[]);
        assert_eq!(
            policy.check("ftp://10.0.0.7/win"),
            Err(NoticeRefusal::Scheme("ftp".into()))
        );
        assert_eq!(
            policy.check("file:///etc/passwd"),
            Err(NoticeRefusal::Scheme("file".into()))
        );
        assert_eq!(
            policy.check("gopher://10.0.0.7:6379/_FLUSHALL"),
            Err(NoticeRefusal::Scheme("gopher".into()))
        );
        assert_eq!(
            policy.check("http://user:secret@10.0.0.7/win"),
            Err(NoticeRefusal::UserInfo)
        );
        assert_eq!(
            policy.check("http://user@10.0.0.7/win"),
            Err(NoticeRefusal::UserInfo)
        );
        assert!(matches!(
            policy.check("not a url"),
            Err(NoticeRefusal::Unparsable(_))
        ));
        assert!(matches!(
            policy.check("http://[::1/win"),
            Err(NoticeRefusal::Unparsable(_))
        ));
        assert!(matches!(
            policy.check(""),
            Err(NoticeRefusal::Unparsable(_))
        ));
    }

    #[test]
    fn the_host_checked_is_the_host_sent_to() {
        let policy = policy("http://10.0.0.7/bid", &[]);
        // Backslashes are slashes in http URLs: the host is 10.0.0.7, the rest is the path.
        let url = policy.check("http://10.0.0.7\\@169.254.169.254/").unwrap();
        assert_eq!(url.host_str(), Some("10.0.0.7"));
        assert_eq!(url.as_str(), "http://10.0.0.7/@169.254.169.254/");
        // Other spellings of an address are that address.
        for url in [
            "http://2852039166/",
            "http://0xA9FEA9FE/",
            "http://169.254.43518/",
        ] {
            assert_eq!(
                policy.check(url),
                Err(NoticeRefusal::Host("169.254.169.254".into())),
                "{url}"
            );
        }
        let policy = self::policy("http://169.254.169.254/", &[]);
        assert!(policy.check("http://0xA9FEA9FE/").is_ok());
    }

    #[test]
    fn notice_hosts_widen_the_policy_exactly_or_by_subdomain() {
        let policy = policy(
            "http://10.0.0.7/bid",
            &["win.example.com", "*.Example.NET", "10.0.0.9", "[fd00::1]"],
        );
        for url in [
            "http://win.example.com/w",
            "http://WIN.example.com:81/w",
            "http://a.example.net/w",
            "http://a.b.example.net/w",
            "http://10.0.0.9/w",
            "http://[fd00::1]:8080/w",
            "http://10.0.0.7/w",
        ] {
            assert!(policy.check(url).is_ok(), "{url}");
        }
        for url in [
            "http://example.net/w",
            "http://badexample.net/w",
            "http://a.example.com/w",
            "http://example.com/w",
            "http://10.0.0.8/w",
            "http://[fd00::2]/w",
        ] {
            assert!(
                matches!(policy.check(url), Err(NoticeRefusal::Host(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn notice_host_entries_are_bare_hosts_or_a_leading_wildcard() {
        assert_eq!(
            HostPattern::parse("WIN.example.com"),
            Ok(HostPattern::Exact(Host::Domain("win.example.com".into())))
        );
        assert_eq!(
            HostPattern::parse("*.example.net"),
            Ok(HostPattern::Subdomains("example.net".into()))
        );
        assert_eq!(
            HostPattern::parse("10.0.0.9"),
            Ok(HostPattern::Exact(Host::Ipv4(Ipv4Addr::new(10, 0, 0, 9))))
        );
        assert_eq!(
            HostPattern::parse("[::1]"),
            Ok(HostPattern::Exact(Host::Ipv6(Ipv6Addr::LOCALHOST)))
        );
        for entry in [
            "*",
            "win.*.com",
            "*win.example.com",
            "**.example.com",
            "*.10.0.0.1",
        ] {
            assert!(
                matches!(
                    HostPattern::parse(entry),
                    Err(NoticeHostError::Wildcard { .. })
                ),
                "{entry}"
            );
        }
        for entry in [
            "",
            "*.",
            "http://win.example.com",
            "win.example.com:8080",
            "win.example.com/path",
            "user@win.example.com",
            "::1",
            "a b.com",
        ] {
            assert!(
                matches!(
                    HostPattern::parse(entry),
                    Err(NoticeHostError::NotAHost { .. })
                ),
                "{entry}"
            );
        }
    }

    #[test]
    fn internal_addresses_are_told_apart() {
        for ip in [
            "127.0.0.1",
            "127.5.5.5",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn internal_addresses_are_admitted_only_for_an_internal_endpoint() {
        let public = AddressGuard::new(Host::Ipv4(Ipv4Addr::new(93, 184, 216, 34)));
        let loopback: IpAddr = Ipv4Addr::LOCALHOST.into();
        let metadata: IpAddr = Ipv4Addr::new(169, 254, 169, 254).into();
        let elsewhere: IpAddr = Ipv4Addr::new(8, 8, 8, 8).into();
        assert!(!public.admits(loopback).await);
        assert!(!public.admits(metadata).await);
        assert!(public.admits(elsewhere).await);
        let mixed = vec![
            SocketAddr::new(metadata, 80),
            SocketAddr::new(elsewhere, 80),
        ];
        assert_eq!(
            public.screen(mixed).await,
            Ok(vec![SocketAddr::new(elsewhere, 80)]),
            "the public address of a name is kept, the internal one dropped"
        );
        assert_eq!(
            public.screen(vec![SocketAddr::new(metadata, 80)]).await,
            Err(metadata)
        );
        let private = AddressGuard::new(Host::Ipv4(Ipv4Addr::new(10, 0, 0, 7)));
        assert!(private.admits(loopback).await);
        assert!(private.admits(metadata).await);
        let named = AddressGuard::new(Host::Domain("localhost".into()));
        assert!(
            named.admits(loopback).await,
            "an endpoint named `localhost` resolves to loopback"
        );
    }

    #[test]
    fn the_log_limit_lets_one_line_through_per_interval() {
        let limit = LogLimit::new(Duration::from_secs(60));
        let start = limit.origin;
        assert!(limit.allow(start));
        assert!(!limit.allow(start + Duration::from_secs(1)));
        assert!(!limit.allow(start + Duration::from_secs(59)));
        assert!(limit.allow(start + Duration::from_secs(60)));
        assert!(!limit.allow(start + Duration::from_secs(61)));
    }
}
