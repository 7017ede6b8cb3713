//! TLS to Postgres, as libpq's `sslmode` has it: `disable` (plain), `prefer` (TLS when the
//! server offers it, the certificate not checked), `require` (TLS, the certificate checked only
//! against an `sslrootcert` when one is given, as libpq does), `verify-ca` (the chain against
//! `sslrootcert`, else the public roots), `verify-full` (the chain and the host name). A client
//! certificate from `sslcert` and `sslkey`. Managed Postgres services (RDS, Cloud SQL, Azure,
//! Supabase) require TLS or make it their default; n8n speaks it through
//! `DB_POSTGRESDB_SSL_ENABLED` and `DB_POSTGRESDB_SSL_CA/_CERT/_KEY/_REJECT_UNAUTHORIZED`.
//!
//! The `ssl*` keys are taken out of the DSN here (tokio-postgres knows no `verify-ca`,
//! `verify-full` or certificate keys); errors name files and what is wrong with them, never
//! the DSN.

use crate::error::BadInput;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_rustls::rustls;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// What the DSN asked of TLS.
#[derive(Debug, Clone, PartialEq)]
pub struct Tls {
    pub mode: Mode,
    pub root_cert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// The DSN without its `ssl*` keys, and what they asked. libpq's default mode is `prefer`.
pub fn split(dsn: &str) -> Result<(String, Tls), BadInput> {
    let mut found: Vec<(String, String)> = Vec::new();
    let rest = if let Some((head, query)) = dsn
        .starts_with("postgres")
        .then(|| dsn.split_once('?'))
        .flatten()
    {
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if KEYS.contains(&k) {
                found.push((k.into(), percent_decoded(v)));
            } else {
                kept.push(pair);
            }
        }
        match kept.is_empty() {
            true => head.to_string(),
            false => format!("{head}?{}", kept.join("&")),
        }
    } else if dsn.starts_with("postgres") {
        dsn.to_string()
    } else {
        let mut kept = Vec::new();
        for token in dsn.split_whitespace() {
            match token.split_once('=') {
                Some((k, v)) if KEYS.contains(&k.trim()) => {
                    found.push((k.trim().into(), v.trim_matches('\'').into()))
                }
                _ => kept.push(token),
            }
        }
        kept.join(" ")
    };
    let get = |k: &str| {
        found
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let mode = match get("sslmode").as_deref() {
        None | Some("prefer") | Some("allow") => Mode::Prefer,
        Some("disable") => Mode::Disable,
        Some("require") => Mode::Require,
        Some("verify-ca") => Mode::VerifyCa,
        Some("verify-full") => Mode::VerifyFull,
        Some(other) => {
            return Err(BadInput(format!(
                "the Postgres DSN's sslmode={other:?} is not one of libpq's: disable, allow, prefer, require, verify-ca, verify-full"
            )))
        }
    };
    let path = |k: &str| get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    Ok((
        rest,
        Tls {
            mode,
            root_cert: path("sslrootcert"),
            cert: path("sslcert"),
            key: path("sslkey"),
        },
    ))
}

fn percent_decoded(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The PEM certificates of `path` (for `what`), at least one.
fn certificates(
    path: &std::path::Path,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, BadInput> {
    let text = crate::util::read_text_file(path, 1024 * 1024, what)?;
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile_certs(&text);
    if certs.is_empty() {
        return Err(BadInput(format!(
            "{what} {}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

/// The certificates of a PEM text.
fn rustls_pemfile_certs(text: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(text.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// The rustls client configuration `tls` asks for.
pub fn client_config(tls: &Tls) -> Result<rustls::ClientConfig, BadInput> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| BadInput(format!("TLS to Postgres: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    match &tls.root_cert {
        Some(p) => {
            for c in certificates(p, "sslrootcert")? {
                roots.add(c).map_err(|e| {
                    BadInput(format!(
                        "sslrootcert {}: not a CA certificate: {e}",
                        p.display()
                    ))
                })?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let checked = || {
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots.clone()),
            provider.clone(),
        )
        .build()
        .map_err(|e| BadInput(format!("sslrootcert: {e}")))
    };
    let verifier: Arc<dyn ServerCertVerifier> = match tls.mode {
        Mode::VerifyFull => checked()?,
        Mode::VerifyCa => Arc::new(ChainOnly(checked()?)),
        // libpq: require checks the chain when a root certificate is given, else nothing.
        Mode::Require if tls.root_cert.is_some() => Arc::new(ChainOnly(checked()?)),
        _ => Arc::new(crate::wire::tls::NoVerify(provider.clone())),
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match (&tls.cert, &tls.key) {
        (Some(c), Some(k)) => {
            use rustls::pki_types::pem::PemObject;
            let chain = certificates(c, "sslcert")?;
            let key = PrivateKeyDer::from_pem_file(k).map_err(|e| {
                BadInput(format!("sslkey {}: not a PEM private key: {e}", k.display()))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| BadInput(format!("sslcert/sslkey: {e}")))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(BadInput(
            "the Postgres DSN gives one of sslcert and sslkey: give both (a client certificate and its key) or neither".into(),
        )),
    }
}

/// The chain checked against the roots, the host name not (libpq's verify-ca).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A connection's client and the task driving it (aborted by the caller when done).
pub type Connected = (
    tokio_postgres::Client,
    tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
);

/// Connects `cfg` as `tls` asks: plain for disable, else through rustls with tokio-postgres'
/// own negotiation (prefer falls back to plain when the server offers no TLS).
pub async fn connect(
    cfg: &tokio_postgres::Config,
    tls: &Tls,
) -> Result<Result<Connected, tokio_postgres::Error>, BadInput> {
    use tokio_postgres::config::SslMode;
    if tls.mode == Mode::Disable {
        return Ok(cfg
            .connect(tokio_postgres::NoTls)
            .await
            .map(|(c, conn)| (c, tokio::spawn(conn))));
    }
    let mut cfg = cfg.clone();
    cfg.ssl_mode(match tls.mode {
        Mode::Prefer => SslMode::Prefer,
        _ => SslMode::Require,
    });
    let make = tokio_postgres_rustls::MakeRustlsConnect::new(client_config(tls)?);
    Ok(cfg
        .connect(make)
        .await
        .map(|(c, conn)| (c, tokio::spawn(conn))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssl_keys_are_taken_out_of_both_forms_of_dsn() {
        let (rest, t) = split(
            "host=db.example port=5432 user=n8n password=pw dbname=n8n sslmode=verify-full sslrootcert=/etc/ca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "host=db.example port=5432 user=n8n password=pw dbname=n8n"
        );
        assert_eq!(t.mode, Mode::VerifyFull);
        assert_eq!(t.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        let (rest, t) = split(
            "postgres://n8n:pw@db.example:5432/n8n?sslmode=verify-ca&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://n8n:pw@db.example:5432/n8n?application_name=x"
        );
        assert_eq!(t.mode, Mode::VerifyCa);
        assert_eq!(t.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(split("host=x").unwrap().1.mode, Mode::Prefer);
        assert_eq!(split("postgres://x/db").unwrap().1.mode, Mode::Prefer);
        assert!(split("host=x sslmode=verify").is_err());
    }
}
