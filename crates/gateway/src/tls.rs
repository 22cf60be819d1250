//! TLS for the calls to `https://` bidders and for notices to `https://` URLs: one rustls client
//! configuration for the whole gateway, built at start.
//!
//! - Crypto provider: ring. It builds with a C compiler alone, where aws-lc-rs needs CMake
//!   (and NASM on some targets) at build time; a client checking certificates and running
//!   ECDHE handshakes needs nothing aws-lc-rs adds. It is passed explicitly, so no
//!   process-wide default has to be installed (rustls panics at a missing one).
//! - Trusted roots: the platform's store (`rustls-native-certs`: the CA bundle of the OS or
//!   image, e.g. Debian's `ca-certificates`), which its package updates keep current and where
//!   an organisation adds its own CAs. Roots built into the binary (`webpki-roots`) would go
//!   stale with each build and need their own licence; where the platform has none (a bare
//!   container image), the start warns, and `tls_ca_file` can name a bundle instead.
//! - `tls_ca_file`: a PEM file of more CAs trusted besides those (a private CA, tests).
//! - ALPN offers `h2` and `http/1.1` (set by the connector): a bidder speaking HTTP/2 over TLS
//!   gets it, the others HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

/// Why the gateway's TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("CA file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    #[error("CA file {} holds no certificate (expected PEM `CERTIFICATE` blocks)", path.display())]
    Empty { path: PathBuf },
    #[error("CA file {}: certificate {index} is not a usable CA: {source}", path.display())]
    Certificate {
        path: PathBuf,
        /// 1-based, in file order.
        index: usize,
        source: rustls::Error,
    },
    #[error("TLS setup: {0}")]
    Setup(#[from] rustls::Error),
}

/// The client configuration every bidder's connections and notices use. ALPN is left to the
/// connector, which offers the versions it was built with.
pub(crate) fn client_config(ca_file: Option<&Path>) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_file)?)
        .with_no_client_auth();
    Ok(config)
}

fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "a certificate of the platform's trust store could not be read");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 && ca_file.is_none() {
        tracing::warn!(
            ignored,
            "the platform's trust store has no usable root certificate: calls and notices to \
             https:// URLs will fail (install the CA bundle, e.g. ca-certificates, or name one \
             in gateway.tls_ca_file)"
        );
    }
    if let Some(path) = ca_file {
        let read = |source| TlsError::Read {
            path: path.to_owned(),
            source,
        };
        let certificates = CertificateDer::pem_file_iter(path)
            .map_err(read)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(read)?;
        if certificates.is_empty() {
            return Err(TlsError::Empty {
                path: path.to_owned(),
            });
        }
        for (index, certificate) in certificates.into_iter().enumerate() {
            roots
                .add(certificate)
                .map_err(|source| TlsError::Certificate {
                    path: path.to_owned(),
                    index: index + 1,
                    source,
                })?;
        }
    }
    Ok(roots)
}

/// Whether a failed call failed in the TLS handshake (an unknown CA, a certificate for another
/// name, an expired one, no common protocol), for a log line that says so.
pub(crate) fn is_tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        cause = inner(error);
    }
    false
}

/// The error's cause. hyper-rustls hands rustls' error on inside an `io::Error` (inside another
/// one), whose `source` skips the error it wraps: that one is taken instead.
fn inner<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e (dyn std::error::Error + 'static)> {
    match error.downcast_ref::<std::io::Error>() {
        Some(io) => io
            .get_ref()
            .map(|wrapped| wrapped as &(dyn std::error::Error + 'static)),
        None => error.source(),
    }
}

/// An error and its causes on one line, `outer: inner: …` (hyper's own text says only
/// "client error (Connect)").
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = inner(error);
    while let Some(error) = cause {
        let next = error.to_string();
        // An io::Error shows the error it wraps as its own.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = inner(error);
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_refused_by_name() {
        let missing = Path::new("/nonexistent/ca.pem");
        let error = client_config(Some(missing)).unwrap_err().to_string();
        assert!(error.contains("/nonexistent/ca.pem"), "{error}");
        let directory = tempfile::tempdir().unwrap();
        let empty = directory.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = client_config(Some(&empty)).unwrap_err();
        assert!(matches!(error, TlsError::Empty { .. }), "{error}");
    }

    #[test]
    fn the_ca_file_adds_to_the_platforms_roots() {
        let platform = roots(None).unwrap().len();
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_owned()]).unwrap();
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join("ca.pem");
        std::fs::write(&file, ca.cert.pem()).unwrap();
        assert_eq!(roots(Some(&file)).unwrap().len(), platform + 1);
    }
}
