//! Trust for Home Assistant over https: Mozilla's roots (webpki-roots) by
//! default, or only the certificates of a CA file (`[executors.home_assistant]
//! ca_file`, PEM) — what a home installation with its own certificate needs.
//! The same roots serve the REST calls (ureq) and the WebSocket API the home
//! import reads (tungstenite over a rustls stream), so the two never disagree
//! about whom they trust.

use std::{
    io::{Read, Write},
    net::TcpStream,
    sync::Arc,
};

use rustls::pki_types::{CertificateDer, ServerName};

pub use crate::tls::{ca_certificates, certificate_problem, ureq_tls};

/// rustls's client settings for the same roots (ring, as ureq uses).
pub fn rustls_client(
    ca: Option<&[ureq::tls::Certificate<'static>]>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(certs) => {
            for c in certs {
                roots
                    .add(CertificateDer::from(c.der().to_vec()))
                    .map_err(|e| format!("a certificate of the CA file is not usable: {e}"))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A connection that is plain TCP or TLS over it, for the WebSocket API.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    /// TLS to `host` over `tcp`, the handshake done here so that a
    /// certificate Home Assistant's own CA signed, and nobody's roots
    /// know, is named as such before any WebSocket byte is sent.
    pub fn tls(
        tcp: TcpStream,
        host: &str,
        config: Arc<rustls::ClientConfig>,
    ) -> std::io::Result<Self> {
        let name = ServerName::try_from(host.to_owned()).map_err(std::io::Error::other)?;
        let conn = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(Self::Tls(Box::new(stream)))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_is_not_a_certificate_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.pem");
        let e = ca_certificates(&missing).unwrap_err();
        assert!(
            e.contains("cannot read the CA file") && e.contains("none.pem"),
            "{e}"
        );
        let text = dir.path().join("key.pem");
        std::fs::write(&text, "just some words\n").unwrap();
        let e = ca_certificates(&text).unwrap_err();
        assert!(
            e.contains("holds no certificate") && e.contains("BEGIN CERTIFICATE"),
            "{e}"
        );
    }

    #[test]
    fn a_rustls_certificate_error_is_found_inside_an_io_error() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let found = certificate_problem(&io).unwrap();
        assert!(found.contains("UnknownIssuer"), "{found}");
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(certificate_problem(&plain), None);
        let through_ureq = ureq::Error::Io(std::io::Error::other(
            rustls::Error::InvalidCertificate(rustls::CertificateError::Expired),
        ));
        assert!(
            certificate_problem(&through_ureq)
                .unwrap()
                .contains("Expired")
        );
    }
}
