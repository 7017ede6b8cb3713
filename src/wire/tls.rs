//! TLS for the clients n8ncap runs (the load generator, the Prometheus API reader): a rustls
//! connector with the web's roots plus an optional CA file, or no verification for
//! self-signed test hosts; and a stream that is plain or TLS.

use crate::error::BadInput;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types};
use tokio_rustls::TlsConnector;

#[derive(Clone)]
pub struct Tls {
    pub connector: TlsConnector,
    pub name: pki_types::ServerName<'static>,
    pub host: String,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({})", self.host)
    }
}

/// Accepts any certificate (the handshake's signatures are still checked): `--insecure`, for
/// self-signed test hosts only; Postgres' `sslmode=prefer`/`require` without a root certificate.
#[derive(Debug)]
pub struct NoVerify(pub Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &pki_types::CertificateDer<'_>,
        _: &[pki_types::CertificateDer<'_>],
        _: &pki_types::ServerName<'_>,
        _: &[u8],
        _: pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub fn connector(
    host: &str,
    ca_cert: Option<&std::path::Path>,
    insecure: bool,
) -> Result<Tls, BadInput> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| BadInput(format!("TLS setup: {e}")))?;
    let config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = ca_cert {
            use pki_types::pem::PemObject;
            let certs: Vec<_> = pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|e| {
                    BadInput(format!(
                        "cannot read CA certificate {}: {e}",
                        path.display()
                    ))
                })?
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    BadInput(format!(
                        "{} is not a PEM certificate file: {e}",
                        path.display()
                    ))
                })?;
            if certs.is_empty() {
                return Err(BadInput(format!("{} holds no certificate", path.display())));
            }
            for c in certs {
                roots.add(c).map_err(|e| {
                    BadInput(format!("{}: unusable CA certificate: {e}", path.display()))
                })?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    let name = pki_types::ServerName::try_from(host.to_string()).map_err(|_| {
        BadInput(format!(
            "{host:?} is not a name a TLS certificate can carry"
        ))
    })?;
    Ok(Tls {
        connector: TlsConnector::from(Arc::new(config)),
        name,
        host: host.to_string(),
    })
}

/// A connection, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
