//! The building blocks every component's config section uses: [`Secret`] (a value whose
//! `Debug` and `Display` never show it), redaction of URLs and secret-looking keys, and the
//! reader of a list that the environment gives as a comma-separated string.
//!
//! The sections themselves live with their components (`sources::config`, `stores::config`,
//! `llm::config`, …); `crate::config` assembles them.

mod secret;

use serde::{Deserialize, Deserializer};

pub use secret::{
    REDACTED, Secret, is_secret_key, is_shown_kafka_property, redact, redact_url, same_secret,
};

/// A list from a TOML array, or from a comma-separated string (what an environment variable
/// can carry).
pub fn string_or_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum StringOrList {
        One(String),
        Many(Vec<String>),
    }
    Ok(match StringOrList::deserialize(d)? {
        StringOrList::One(s) => s
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)
            .collect(),
        StringOrList::Many(v) => v,
    })
}
