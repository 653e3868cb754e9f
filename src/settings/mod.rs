//! The building blocks every component's config section uses: [`Secret`] (a value whose
//! `Debug` and `Display` never show it), redaction of URLs and secret-looking keys, the reader
//! of a list that the environment gives as a comma-separated string, and the reader of a section
//! whose `kind` chooses its settings ([`WrittenSection`], [`KindedSettings`], [`take_section`]).
//!
//! The sections themselves live with their components (`sources::config`, `stores::config`,
//! `llm::config`, …); the assembly of them, `Config`, is the folder at the top, `config`.

mod kinded;
mod secret;

use serde::{Deserialize, Deserializer};

pub use kinded::{
    Kind, KindedSettings, ReadSection, SectionError, SectionKeys, WrittenSection, keys_of,
    read_all_parts, take_section,
};
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
