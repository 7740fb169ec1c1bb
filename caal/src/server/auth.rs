//! API authentication: one bearer token, generated on first start and kept
//! in the data dir with mode 0600 (or given as `CAAL_API_TOKEN`), compared in
//! constant time on every API call.

use std::{fs, io::Write, path::Path};

use subtle::ConstantTimeEq;

/// The token file's name inside a data dir.
pub const TOKEN_FILE: &str = "api_token";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "cannot read or create the API token file {path}: {source}; check the data dir's permissions"
    )]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the API token file {path} is empty or too short; delete it and a new one is generated"
    )]
    Short { path: String },
}

/// The configured token (`explicit`), else the one in the data dir, else a new one.
pub fn load_or_create(data_dir: &Path, explicit: Option<&str>) -> Result<String, TokenError> {
    if let Some(token) = explicit.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(token.to_owned());
    }
    let path = data_dir.join(TOKEN_FILE);
    let shown = path.display().to_string();
    match fs::read_to_string(&path) {
        Ok(text) if text.trim().len() >= 16 => Ok(text.trim().to_owned()),
        Ok(_) => Err(TokenError::Short { path: shown }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 24];
            getrandom::fill(&mut bytes).map_err(|e| TokenError::Io {
                path: shown.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut options = fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            options
                .open(&path)
                .and_then(|mut f| writeln!(f, "{token}"))
                .map_err(|source| TokenError::Io {
                    path: shown,
                    source,
                })?;
            Ok(token)
        }
        Err(source) => Err(TokenError::Io {
            path: shown,
            source,
        }),
    }
}

/// True if the `Authorization` header carries exactly `token` (the scheme
/// is matched case-insensitively, as RFC 9110 says: `bearer` too).
pub fn authorized(header: Option<&str>, token: &str) -> bool {
    let Some((scheme, given)) = header.and_then(|h| h.trim_start().split_once(' ')) else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && same_secret(given.trim(), token)
}

/// Whether two secrets are the same, in time that does not depend on where
/// they differ.
pub fn same_secret(given: &str, secret: &str) -> bool {
    given.as_bytes().ct_eq(secret.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_created_once_private_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let token = load_or_create(dir.path(), None).unwrap();
        assert_eq!(token.len(), 48);
        assert_eq!(load_or_create(dir.path(), None).unwrap(), token);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join(TOKEN_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            load_or_create(dir.path(), Some("given-token-123456")).unwrap(),
            "given-token-123456"
        );
        assert!(authorized(Some(&format!("Bearer {token}")), &token));
        assert!(authorized(Some(&format!("bearer {token}")), &token));
        assert!(authorized(Some(&format!("BEARER  {token}")), &token));
        for bad in [
            None,
            Some("Bearer "),
            Some("bearer x"),
            Some(token.as_str()),
            Some("Bearer nope"),
            Some(&format!("Basic {token}")),
            Some(&format!("Bearer{token}")),
        ] {
            assert!(!authorized(bad, &token), "{bad:?}");
        }
    }
}
