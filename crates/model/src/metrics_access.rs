//! Who may read `/metrics`. The edge and the manager both serve it, and its series name every
//! line item's budget, spend and pacing, so both ask this one decision before answering: with
//! a configured token, only requests carrying it; without one, only loopback peers (a scraper
//! on the same host, `curl localhost/metrics`). The ad port faces the whole internet, so
//! "nothing configured" must not mean "open".

use std::fmt;
use std::net::IpAddr;

use crate::same_secret;

/// The `/metrics` access rule of one process (`metrics.token` in the configuration); the
/// default is [`MetricsAccess::loopback_only`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MetricsAccess {
    /// `None`: loopback peers only.
    token: Option<String>,
}

/// Why a scrape was refused. The messages go to the client: they name the configuration key,
/// never the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetricsRefusal {
    #[error("metrics need `Authorization: Bearer <metrics.token>`")]
    MissingToken,
    #[error("the bearer token is not metrics.token")]
    WrongToken,
    #[error(
        "metrics are served to loopback addresses only; to scrape from elsewhere set \
         metrics.token (MARQUEE_METRICS__TOKEN) and send `Authorization: Bearer <token>`"
    )]
    NotLoopback,
}

impl MetricsRefusal {
    /// The HTTP status to answer with: 401 when credentials are missing or wrong (the client
    /// can fix its request), 403 when no token is configured (only the operator can).
    pub fn status(self) -> u16 {
        match self {
            MetricsRefusal::MissingToken | MetricsRefusal::WrongToken => 401,
            MetricsRefusal::NotLoopback => 403,
        }
    }
}

impl MetricsAccess {
    /// The rule without a token: loopback peers only.
    pub const fn loopback_only() -> MetricsAccess {
        MetricsAccess { token: None }
    }

    /// The rule for a configured `metrics.token` (`None`: loopback peers only). The
    /// configuration checks the token's form at load.
    pub fn new(token: Option<String>) -> MetricsAccess {
        MetricsAccess { token }
    }

    /// Whether a request may read the metrics. `peer` is the TCP peer the server accepted
    /// (`None` when unknown, which is refused without a token: no forwarded header is
    /// trusted); `authorization` is the raw `Authorization` header, if any.
    pub fn check(
        &self,
        peer: Option<IpAddr>,
        authorization: Option<&[u8]>,
    ) -> Result<(), MetricsRefusal> {
        let Some(token) = &self.token else {
            // A dual-stack listener sees IPv4 loopback as `::ffff:127.0.0.1`.
            let loopback = peer.is_some_and(|peer| peer.to_canonical().is_loopback());
            return if loopback {
                Ok(())
            } else {
                Err(MetricsRefusal::NotLoopback)
            };
        };
        let sent = authorization
            .and_then(bearer)
            .ok_or(MetricsRefusal::MissingToken)?;
        // An empty token never matches, whatever is configured.
        if !sent.is_empty() && same_secret(sent, token.as_bytes()) {
            Ok(())
        } else {
            Err(MetricsRefusal::WrongToken)
        }
    }
}

/// The credentials of an `Authorization: Bearer <credentials>` value (the scheme in any case,
/// as RFC 9110 has it), or `None` for another scheme.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let scheme_end = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(scheme_end);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    Some(rest.trim_ascii())
}

/// The token is a secret: `Debug` says only whether one is set.
impl fmt::Debug for MetricsAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsAccess")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    use super::{MetricsAccess, MetricsRefusal};

    const TOKEN: &str = "scrape-me-0123456789";

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn without_a_token_only_loopback_peers_may_scrape() {
        let access = MetricsAccess::default();
        for loopback in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(access.check(ip(loopback), None), Ok(()), "{loopback}");
        }
        for outside in [
            "192.0.2.2",
            "10.0.0.7",
            "0.0.0.0",
            "::",
            "fd00::2",
            "::ffff:192.0.2.2",
        ] {
            assert_eq!(
                access.check(ip(outside), None),
                Err(MetricsRefusal::NotLoopback),
                "{outside}"
            );
        }
        // An unknown peer is not trusted, and a header does not stand in for a token.
        assert_eq!(access.check(None, None), Err(MetricsRefusal::NotLoopback));
        let header = format!("Bearer {TOKEN}");
        assert_eq!(
            access.check(ip("192.0.2.2"), Some(header.as_bytes())),
            Err(MetricsRefusal::NotLoopback)
        );
        assert_eq!(MetricsRefusal::NotLoopback.status(), 403);
        assert!(
            MetricsRefusal::NotLoopback
                .to_string()
                .contains("MARQUEE_METRICS__TOKEN")
        );
    }

    #[test]
    fn with_a_token_only_its_bearer_may_scrape_from_anywhere() {
        let access = MetricsAccess::new(Some(TOKEN.into()));
        let outside = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
        let loopback = Some(IpAddr::V6(Ipv6Addr::LOCALHOST));
        for peer in [outside, loopback, None] {
            for good in [
                format!("Bearer {TOKEN}"),
                format!("bearer {TOKEN}"),
                format!("BEARER   {TOKEN} "),
            ] {
                assert_eq!(access.check(peer, Some(good.as_bytes())), Ok(()), "{good}");
            }
            // A token is needed from loopback too: configured means configured.
            assert_eq!(access.check(peer, None), Err(MetricsRefusal::MissingToken));
            for other_scheme in [format!("Basic {TOKEN}"), TOKEN.to_owned(), String::new()] {
                assert_eq!(
                    access.check(peer, Some(other_scheme.as_bytes())),
                    Err(MetricsRefusal::MissingToken),
                    "{other_scheme:?}"
                );
            }
            for wrong in [
                "Bearer scrape-me-0123456788".to_owned(),
                format!("Bearer {TOKEN}x"),
                format!("Bearer {}", &TOKEN[1..]),
                "Bearer ".to_owned(),
                format!("Bearer {TOKEN} {TOKEN}"),
            ] {
                assert_eq!(
                    access.check(peer, Some(wrong.as_bytes())),
                    Err(MetricsRefusal::WrongToken),
                    "{wrong:?}"
                );
            }
        }
        assert_eq!(MetricsRefusal::MissingToken.status(), 401);
        assert_eq!(MetricsRefusal::WrongToken.status(), 401);
    }

    #[test]
    fn an_empty_configured_token_matches_nothing() {
        let access = MetricsAccess::new(Some(String::new()));
        assert_eq!(
            access.check(ip("127.0.0.1"), Some(b"Bearer ")),
            Err(MetricsRefusal::WrongToken)
        );
    }

    #[test]
    fn debug_hides_the_token() {
        let shown = format!("{:?}", MetricsAccess::new(Some(TOKEN.into())));
        assert!(!shown.contains(TOKEN), "{shown}");
    }
}
