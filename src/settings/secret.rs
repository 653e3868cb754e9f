//! Secrets in configuration: the [`Secret`] wrapper (its `Debug` and `Display` never show the
//! value) and the redaction `check-config` and `Debug` output use (secret-looking keys, passwords
//! inside URLs).

use std::fmt;

use serde::{Deserialize, Serialize};

/// What secrets are replaced with in rendered configuration.
pub const REDACTED: &str = "<redacted>";

/// A secret string (password, API key). `Debug` and `Display` never reveal it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself; call only where it is handed to a client.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is empty (not configured).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Whether `given` equals the secret `expected`, in time that does not depend on where they
/// differ: both are hashed (SHA-256) and the digests compared without an early exit. For bearer
/// tokens (the review page, the OTLP receiver).
pub fn same_secret(given: &str, expected: &str) -> bool {
    use sha2::Digest as _;
    let a = sha2::Sha256::digest(given.as_bytes());
    let b = sha2::Sha256::digest(expected.as_bytes());
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// Whether a key names a secret (`password`, `sasl.password`, `api_key`, `client.secret`, …).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    // `api_key_env` names a variable; it is not the key. `max_…` keys are limits
    // (`max_tokens_per_minute`), not secrets.
    if k.ends_with("_env") || k.starts_with("max_") {
        return false;
    }
    [
        "password",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "credential",
        "webhook_url",
    ]
    .iter()
    .any(|needle| k.contains(needle))
}

/// Replace the password in a URL's userinfo (`https://u:pw@host` → `https://u:<redacted>@host`).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest_start = scheme_end + 3;
    let rest = url.get(rest_start..).unwrap_or_default();
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest.get(..authority_end).unwrap_or_default();
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = authority.get(..at).unwrap_or_default();
    let Some(colon) = userinfo.find(':') else {
        return url.to_string();
    };
    format!(
        "{}{}:{}{}",
        url.get(..rest_start).unwrap_or_default(),
        userinfo.get(..colon).unwrap_or_default(),
        REDACTED,
        rest.get(at..).unwrap_or_default()
    )
}

/// Replace every secret in a rendered configuration (keys that name secrets, passwords in URLs).
pub fn redact(value: &mut toml::Value) {
    match value {
        toml::Value::Table(table) => {
            for (key, v) in table.iter_mut() {
                if is_secret_key(key) && !matches!(v, toml::Value::Table(_)) {
                    *v = toml::Value::String(REDACTED.into());
                } else if let toml::Value::String(s) = v {
                    if s.contains("://") {
                        *s = redact_url(s);
                    }
                } else {
                    redact(v);
                }
            }
        }
        toml::Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_secret_is_true_only_for_the_same_text() {
        assert!(same_secret("s3cret-token", "s3cret-token"));
        assert!(!same_secret("s3cret-tokeN", "s3cret-token"));
        assert!(!same_secret("s3cret", "s3cret-token"));
        assert!(!same_secret("", "s3cret-token"));
    }
}
