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

/// A secret is written as a string (best given through the environment, never logged).
impl schemars::JsonSchema for Secret {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secret".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A secret: best given through the environment (SQLGRADE__SECTION__KEY); never logged, printed redacted."
        })
    }
}

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

/// A URL as it may be shown (logs, `check-config`, errors): its credentials (the whole
/// userinfo: a user name alone can be a token), its query (`?api-key=…`) and its fragment
/// replaced by [`REDACTED`]; scheme, host, port and path kept
/// (`https://u:pw@host/v1?key=k` → `https://<redacted>@host/v1?<redacted>`). Text without
/// `://` is returned as it is.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest_start = scheme_end + 3;
    let rest = url.get(rest_start..).unwrap_or_default();
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest.get(..authority_end).unwrap_or_default();
    let mut out = String::with_capacity(url.len());
    out.push_str(url.get(..rest_start).unwrap_or_default());
    match authority.rfind('@') {
        Some(at) => {
            out.push_str(REDACTED);
            out.push_str(authority.get(at..).unwrap_or_default());
        }
        None => out.push_str(authority),
    }
    let tail = rest.get(authority_end..).unwrap_or_default();
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    out.push_str(tail.get(..path_end).unwrap_or_default());
    let extra = tail.get(path_end..).unwrap_or_default();
    if let Some(query) = extra.strip_prefix('?') {
        let query_end = query.find('#').unwrap_or(query.len());
        if query_end > 0 {
            out.push('?');
            out.push_str(REDACTED);
        }
        if query_end < query.len() {
            out.push('#');
            out.push_str(REDACTED);
        }
    } else if extra.starts_with('#') {
        out.push('#');
        out.push_str(REDACTED);
    }
    out
}

/// librdkafka properties whose values are shown (`check-config`, the startup line); every other
/// property's value is redacted, since secrets hide under names that do not look secret
/// (`ssl.key.pem`, `sasl.oauthbearer.config`, `ssl.keystore.location`'s neighbours).
const SHOWN_KAFKA_PROPERTIES: &[&str] = &[
    "acks",
    "allow.auto.create.topics",
    "api.version.request",
    "auto.offset.reset",
    "bootstrap.servers",
    "broker.address.family",
    "broker.version.fallback",
    "check.crcs",
    "client.dns.lookup",
    "client.id",
    "client.rack",
    "compression.codec",
    "compression.type",
    "debug",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.idempotence",
    "enable.partition.eof",
    "enable.ssl.certificate.verification",
    "group.protocol",
    "group.remote.assignor",
    "isolation.level",
    "log_level",
    "partition.assignment.strategy",
    "sasl.kerberos.service.name",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.scope",
    "sasl.username",
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.endpoint.identification.algorithm",
    "ssl.key.location",
];

/// Whether a librdkafka property's value may be shown: on the allow-list above, or a number-like
/// setting (`….ms`, `….bytes`, `….kbytes`, `….messages`, `….max`, `….count`).
pub fn is_shown_kafka_property(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    SHOWN_KAFKA_PROPERTIES.contains(&k.as_str())
        || [".ms", ".bytes", ".kbytes", ".messages", ".max", ".count"]
            .iter()
            .any(|suffix| k.ends_with(suffix))
}

/// Replace every secret in a rendered configuration (keys that name secrets, passwords in URLs).
pub fn redact(value: &mut toml::Value) {
    match value {
        toml::Value::Table(table) => {
            for (key, v) in table.iter_mut() {
                if key == "kafka_properties"
                    && let toml::Value::Table(properties) = v
                {
                    for (property, value) in properties.iter_mut() {
                        if !is_shown_kafka_property(property) {
                            *value = toml::Value::String(REDACTED.into());
                        }
                    }
                } else if is_secret_key(key) && !matches!(v, toml::Value::Table(_)) {
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
    fn urls_are_shown_without_credentials_query_or_fragment() {
        for (url, shown) in [
            ("http://ch:8123", "http://ch:8123"),
            ("http://ch:8123/", "http://ch:8123/"),
            ("not a url", "not a url"),
            ("http://user@ch:8123", "http://<redacted>@ch:8123"),
            ("https://u:p@w@h/x?y=1", "https://<redacted>@h/x?<redacted>"),
            (
                "https://llm.example/v1?api-key=SENTINEL",
                "https://llm.example/v1?<redacted>",
            ),
            ("https://h/p#frag", "https://h/p#<redacted>"),
            ("https://h/p?q=1#frag", "https://h/p?<redacted>#<redacted>"),
            ("https://h/p?", "https://h/p"),
            ("https://h?k=v", "https://h?<redacted>"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn kafka_properties_are_shown_only_on_the_allow_list() {
        for shown in ["security.protocol", "session.timeout.ms", "SASL.Mechanisms"] {
            assert!(is_shown_kafka_property(shown), "{shown}");
        }
        for hidden in [
            "ssl.key.pem",
            "sasl.oauthbearer.config",
            "sasl.password",
            "ssl.keystore.password",
            "ssl.certificate.pem",
            "sasl.oauthbearer.client.secret",
            "some.future.property",
        ] {
            assert!(!is_shown_kafka_property(hidden), "{hidden}");
        }
    }

    #[test]
    fn same_secret_is_true_only_for_the_same_text() {
        assert!(same_secret("s3cret-token", "s3cret-token"));
        assert!(!same_secret("s3cret-tokeN", "s3cret-token"));
        assert!(!same_secret("s3cret", "s3cret-token"));
        assert!(!same_secret("", "s3cret-token"));
    }
}
