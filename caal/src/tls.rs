//! Whom a TLS client trusts, for every client the library opens: Mozilla's
//! roots (webpki-roots), the system's (its certificate store, read with
//! rustls-native-certs), or only the certificates of a CA file (PEM), what
//! a home installation or a fleet's receiver with its own CA needs. Home
//! Assistant's connector (`tools::tls`) and shipping (`export::ship`) use it.

use std::path::Path;

/// The certificates a client trusts.
#[derive(Clone, Debug)]
pub enum Trust {
    /// Mozilla's roots, built in (webpki-roots).
    Mozilla,
    /// The system's trusted certificates, as read when shipping started.
    System(Vec<ureq::tls::Certificate<'static>>),
    /// Only a CA file's certificates.
    CaFile(Vec<ureq::tls::Certificate<'static>>),
}

impl Trust {
    /// The system's certificate store; Mozilla's roots where it holds none
    /// (a container without ca-certificates), with the reason why.
    pub fn system() -> (Self, Option<String>) {
        let found = rustls_native_certs::load_native_certs();
        let certs: Vec<ureq::tls::Certificate<'static>> = found
            .certs
            .iter()
            .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        if certs.is_empty() {
            let why = match found.errors.first() {
                Some(e) => format!("the system's certificates could not be read ({e})"),
                None => "the system has no trusted certificates".to_owned(),
            };
            return (
                Trust::Mozilla,
                Some(format!(
                    "{why}; trusting Mozilla's roots instead (install ca-certificates, or give a CA file)"
                )),
            );
        }
        (Trust::System(certs), None)
    }

    /// ureq's TLS settings for this trust.
    pub fn ureq(&self) -> ureq::tls::TlsConfig {
        let roots = match self {
            Trust::Mozilla => ureq::tls::RootCerts::WebPki,
            Trust::System(certs) | Trust::CaFile(certs) => {
                ureq::tls::RootCerts::new_with_certs(certs)
            }
        };
        ureq::tls::TlsConfig::builder().root_certs(roots).build()
    }

    /// What it is, for a log line.
    pub fn describe(&self) -> String {
        match self {
            Trust::Mozilla => "Mozilla's roots".to_owned(),
            Trust::System(c) => format!("the system's {} trusted certificates", c.len()),
            Trust::CaFile(c) => format!("the CA file's {} certificates", c.len()),
        }
    }
}

/// The certificates a CA file holds, for ureq; an empty or unreadable file
/// is an error naming the file and the fix.
pub fn ca_certificates(path: &Path) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "cannot read the CA file {} ({e}); give the path of Home Assistant's CA certificate (PEM)",
            path.display()
        )
    })?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&bytes) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c.to_owned()),
            Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "the CA file {} is not PEM ({e}); give a certificate that begins with -----BEGIN CERTIFICATE-----",
                    path.display()
                ));
            }
        }
    }
    if certs.is_empty() {
        return Err(format!(
            "the CA file {} holds no certificate; give one that begins with -----BEGIN CERTIFICATE-----",
            path.display()
        ));
    }
    Ok(certs)
}

/// ureq's TLS settings for a CA file's certificates, else Mozilla's roots.
pub fn ureq_tls(ca: Option<&[ureq::tls::Certificate<'static>]>) -> ureq::tls::TlsConfig {
    match ca {
        Some(certs) => Trust::CaFile(certs.to_vec()).ureq(),
        None => Trust::Mozilla.ureq(),
    }
}

/// The certificate problem behind an error, when one is: rustls's own words
/// ("invalid peer certificate: UnknownIssuer"), found wherever in the chain
/// of sources (an I/O error, ureq's) it sits.
pub fn certificate_problem(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    if let Some(
        r @ (rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented),
    ) = err.downcast_ref::<rustls::Error>()
    {
        return Some(r.to_string());
    }
    // ureq's error names no source; its variants hold what does.
    match err.downcast_ref::<ureq::Error>() {
        Some(ureq::Error::Rustls(r)) => return certificate_problem(r),
        Some(ureq::Error::Io(io)) => return certificate_problem(io),
        _ => {}
    }
    if let Some(inner) = err
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        && let Some(found) = certificate_problem(inner)
    {
        return Some(found);
    }
    err.source().and_then(certificate_problem)
}
