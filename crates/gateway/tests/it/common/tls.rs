//! A test CA made in the test (rcgen), a server certificate it signed for `127.0.0.1` and
//! `localhost`, and a TLS acceptor for the mock bidders that offers the ALPN protocols given.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// ALPN as a server speaking HTTP/2 and HTTP/1.1 over TLS offers it.
pub const H2_AND_HTTP1: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN as a server speaking HTTP/1.1 only.
pub const HTTP1_ONLY: &[&[u8]] = &[b"http/1.1"];

#[derive(Debug)]
pub struct TestCa {
    /// Holds `ca.pem` for `tls_ca_file`.
    directory: tempfile::TempDir,
    ca_file: PathBuf,
    certificate: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "Marquee test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "mock bidder");
        let certificate = server.signed_by(&server_key, &ca).unwrap();
        let directory = tempfile::tempdir().unwrap();
        let ca_file = directory.path().join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        TestCa {
            directory,
            ca_file,
            certificate: certificate.der().clone(),
            key: PrivatePkcs8KeyDer::from(server_key.serialize_der()),
        }
    }

    /// The PEM file of the CA's certificate.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// A TLS acceptor with the server certificate, offering `alpn`.
    pub fn acceptor(&self, alpn: &[&[u8]]) -> TlsAcceptor {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![self.certificate.clone()],
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsAcceptor::from(Arc::new(config))
    }
}
