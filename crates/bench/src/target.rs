//! The target URL and the loopback rule: load goes only to this machine unless the user names
//! the remote address explicitly, so a typo cannot turn a benchmark into an attack.

use std::net::{IpAddr, SocketAddr};

use hyper::Uri;
use hyper::header::HeaderValue;

use crate::BenchError;

/// Where load goes, resolved and checked.
#[derive(Debug, Clone)]
pub struct Target {
    /// The address every connection opens.
    pub addr: SocketAddr,
    /// The `Host` header, as the URL spelled it.
    pub host: HeaderValue,
    /// Path and query of the URL (`/` when it had none).
    pub path: String,
    /// The URL as given, for reports.
    pub url: String,
}

/// Parses `url`, resolves its host and refuses any address that is neither loopback nor named
/// in `allow_remote`.
pub async fn resolve(url: &str, allow_remote: &[IpAddr]) -> Result<Target, BenchError> {
    let uri: Uri = url
        .parse()
        .map_err(|error| BenchError::Usage(format!("{url:?} is not a URL: {error}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(BenchError::Usage(format!(
                "{url}: only http:// is supported, not {other}://"
            )));
        }
        None => {
            return Err(BenchError::Usage(format!(
                "{url:?}: give a full URL such as http://127.0.0.1:8080/"
            )));
        }
    }
    let authority = uri
        .authority()
        .ok_or_else(|| BenchError::Usage(format!("{url}: the URL has no host")))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(80);
    let addr = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| BenchError::Resolve {
            host: host.to_owned(),
            source,
        })?
        .next()
        .ok_or_else(|| BenchError::Resolve {
            host: host.to_owned(),
            source: std::io::Error::other("no address"),
        })?;
    check_allowed(addr.ip(), allow_remote)?;
    let host = HeaderValue::from_str(authority.as_str())
        .map_err(|error| BenchError::Usage(format!("{url}: bad host: {error}")))?;
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |path| path.as_str().to_owned());
    Ok(Target {
        addr,
        host,
        path,
        url: url.to_owned(),
    })
}

/// Loopback addresses always pass; any other must be listed exactly.
pub fn check_allowed(ip: IpAddr, allow_remote: &[IpAddr]) -> Result<(), BenchError> {
    // `::ffff:127.0.0.1` is loopback too.
    if ip.to_canonical().is_loopback() || allow_remote.contains(&ip) {
        Ok(())
    } else {
        Err(BenchError::NotLoopback { ip })
    }
}
