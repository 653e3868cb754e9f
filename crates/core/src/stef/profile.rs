//! Application rule profiles Rapp: what a profile holds, how it is parsed from TOML or JSON
//! text, validated and pre-normalized. Pure: reading `rules/<app_id>.toml` files, the store and
//! hot reloading live at the edge (the daemon's `score::profiles`).
//!
//! A profile holds `column_mappings` (NL term → physical column), `benign_filters` (`lhs op rhs`
//! strings that are acceptable application defaults), `ignore_filters` (dimensions removed from
//! alignment entirely), the app's `dialect`, `limit_min` (λ_min of the safety-LIMIT rule), tier
//! thresholds and free-text `notes` for the judge prompt. Its `version` is the content hash of the
//! text it came from, so judge-cache keys change whenever a profile does.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::TierThresholds;
use super::text::{canonical_number, name_key, normalize_value, strip_quotes};
use crate::sqlspec::FilterOp;

/// Default λ_min: a LIMIT at or above it without a top-k request is a safety limit.
pub const DEFAULT_LIMIT_MIN: u64 = 1000;

/// Name of the profile used for apps without their own file.
pub const DEFAULT_PROFILE: &str = "default";

/// One application's rule profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleProfile {
    /// NL term → physical column.
    pub column_mappings: BTreeMap<String, String>,
    /// Filters that are acceptable application defaults (`"status = 'Active'"`).
    pub benign_filters: Vec<String>,
    /// Dimensions removed from alignment entirely (tenant ids, access control).
    pub ignore_filters: Vec<String>,
    /// SQL dialect of this app's agents.
    pub dialect: Option<String>,
    /// λ_min for the safety-LIMIT rule.
    pub limit_min: u64,
    /// Tier thresholds.
    pub tiers: TierThresholds,
    /// Free text for the judge prompt.
    pub notes: Option<String>,
    /// This app's schema catalogue: a Spider/BIRD `tables.json`, a SQLite file (introspected) or
    /// the JSON/TOML catalogue form; a relative path resolves against the rules directory.
    /// Switches on the STEF catalogue checks for the app's events.
    pub catalogue: Option<String>,
    /// The database of `catalogue` for events without a `db_id` (unneeded when the catalogue
    /// holds one database).
    pub catalogue_db: Option<String>,
    /// Content hash of the profile source (set by the loader, not read from the file).
    #[serde(skip_deserializing)]
    pub version: String,
    /// Pre-normalized forms of the rules, computed on first use (see [`RuleProfile::compiled`]).
    /// Public only so that `RuleProfile { .., ..Default::default() }` works outside this module.
    #[serde(skip)]
    pub compiled: CompiledCache,
}

impl Default for RuleProfile {
    fn default() -> Self {
        RuleProfile {
            column_mappings: BTreeMap::new(),
            benign_filters: Vec::new(),
            ignore_filters: Vec::new(),
            dialect: None,
            limit_min: DEFAULT_LIMIT_MIN,
            tiers: TierThresholds::default(),
            notes: None,
            catalogue: None,
            catalogue_db: None,
            version: "default".into(),
            compiled: CompiledCache::default(),
        }
    }
}

/// Why a profile file could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RulesError {
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// File or directory.
        path: String,
        /// OS error.
        message: String,
    },
    /// TOML/JSON syntax or schema error.
    #[error("invalid rule profile {path}: {message}")]
    Parse {
        /// File.
        path: String,
        /// Parser message.
        message: String,
    },
    /// Parsed, but a value is not acceptable.
    #[error("invalid rule profile {path}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A benign filter entry in normalized form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenignFilter {
    /// [`name_key`] of the left-hand side (mapped through column mappings).
    pub lhs_key: String,
    /// Operator (LIKE without wildcards is `Eq`, `LIKE '%x%'` is `Contains`, …).
    pub op: FilterOp,
    /// Normalized value (empty for IS [NOT] NULL).
    pub value: String,
}

/// Pre-normalized rules used by alignment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompiledRules {
    /// `name_key(term)` → `name_key(column)` for every mapping.
    pub mappings: Vec<(String, String)>,
    /// `name_key` of every ignored dimension (and of the column it maps to).
    pub ignore_keys: Vec<String>,
    /// Parsed benign filters (entries that do not parse are skipped; validation reports them).
    pub benign: Vec<BenignFilter>,
    /// The deterministic judge's identity under this profile
    /// ([`super::assessment::rule_identity`]), formatted once rather than per row.
    pub deterministic_identity: String,
}

impl CompiledRules {
    /// Canonical key of a dimension: its [`name_key`], mapped through the column mappings.
    pub fn dimension_key(&self, name: &str) -> String {
        let key = name_key(name);
        self.map_key(key)
    }

    /// Map an already-computed [`name_key`] through the column mappings.
    pub fn map_key(&self, key: String) -> String {
        match self.mappings.iter().find(|(term, _)| *term == key) {
            Some((_, col)) => col.clone(),
            None => key,
        }
    }

    /// Whether a dimension is ignored.
    pub fn is_ignored(&self, name: &str) -> bool {
        if self.ignore_keys.is_empty() {
            return false;
        }
        let raw = name_key(name);
        if self.ignore_keys.contains(&raw) {
            return true;
        }
        let mapped = self.map_key(raw);
        self.ignore_keys.contains(&mapped)
    }
}

/// Lazily filled cache of [`CompiledRules`]; never affects equality. Note: a profile mutated
/// after [`RuleProfile::compiled`] was first called keeps the old compiled rules — build a new
/// profile (or clone before compiling) instead of mutating one in use.
#[derive(Debug, Clone, Default)]
pub struct CompiledCache(OnceLock<CompiledRules>);

impl PartialEq for CompiledCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl RuleProfile {
    /// Parse a TOML profile; `version` is the content hash of `text`.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<RuleProfile, RulesError> {
        let mut p: RuleProfile = toml::from_str(text).map_err(|e| RulesError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        p.version = content_version(text.as_bytes());
        p.validate(origin)?;
        Ok(p)
    }

    /// Parse a JSON profile; `version` is the content hash of `text`.
    pub fn from_json_str(text: &str, origin: &str) -> Result<RuleProfile, RulesError> {
        let mut p: RuleProfile = serde_json::from_str(text).map_err(|e| RulesError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        p.version = content_version(text.as_bytes());
        p.validate(origin)?;
        Ok(p)
    }

    /// Check values the type system cannot: λ_min ≥ 1, ordered tier thresholds, parseable
    /// benign filters, non-empty mapping targets.
    pub fn validate(&self, origin: &str) -> Result<(), RulesError> {
        let invalid = |message: String| RulesError::Invalid {
            path: origin.to_string(),
            message,
        };
        if self.limit_min == 0 {
            return Err(invalid("limit_min must be at least 1".into()));
        }
        let t = &self.tiers;
        let ordered = t.excellent >= t.good && t.good >= t.marginal && t.marginal >= 0.0;
        if !ordered || t.excellent > 100.0 {
            return Err(invalid(
                "tiers must satisfy 100 ≥ excellent ≥ good ≥ marginal ≥ 0".into(),
            ));
        }
        let c_ok = (0.0..=1.0).contains(&t.confidence_high)
            && (0.0..=1.0).contains(&t.confidence_moderate)
            && t.confidence_high >= t.confidence_moderate;
        if !c_ok {
            return Err(invalid(
                "tiers must satisfy 1 ≥ confidence_high ≥ confidence_moderate ≥ 0".into(),
            ));
        }
        for entry in &self.benign_filters {
            if parse_benign(entry).is_none() {
                return Err(invalid(format!(
                    "benign filter {entry:?} is not `lhs op rhs` (ops: = != <> < <= > >= LIKE ILIKE IN, IS [NOT] NULL)"
                )));
            }
        }
        for (term, col) in &self.column_mappings {
            if name_key(term).is_empty() || name_key(col).is_empty() {
                return Err(invalid(format!(
                    "column mapping {term:?} → {col:?} is empty"
                )));
            }
        }
        Ok(())
    }

    /// Pre-normalized rules (computed once per profile value).
    pub fn compiled(&self) -> &CompiledRules {
        self.compiled.0.get_or_init(|| {
            let mappings: Vec<(String, String)> = self
                .column_mappings
                .iter()
                .map(|(t, c)| (name_key(t), name_key(c)))
                .collect();
            let mut rules = CompiledRules {
                mappings,
                ignore_keys: Vec::new(),
                benign: Vec::new(),
                deterministic_identity: super::assessment::rule_identity(
                    "deterministic",
                    &self.version,
                ),
            };
            for dim in &self.ignore_filters {
                let key = name_key(dim);
                let mapped = rules.map_key(key.clone());
                if !rules.ignore_keys.contains(&key) {
                    rules.ignore_keys.push(key);
                }
                if !rules.ignore_keys.contains(&mapped) {
                    rules.ignore_keys.push(mapped);
                }
            }
            rules.benign = self
                .benign_filters
                .iter()
                .filter_map(|e| parse_benign(e))
                .map(|mut b| {
                    b.lhs_key = rules.map_key(b.lhs_key);
                    b
                })
                .collect();
            rules
        })
    }
}

/// SHA-256 of the profile source, hex, first 16 characters.
pub fn content_version(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    hex::encode(digest).chars().take(16).collect()
}

/// Parse `lhs op rhs` (`status = 'Active'`, `is_deleted = 0`, `name LIKE '%x%'`,
/// `deleted_at IS NULL`, `region IN ('a')`) into normalized form.
pub fn parse_benign(entry: &str) -> Option<BenignFilter> {
    let s = entry.trim();
    let lower = s.to_ascii_lowercase();
    // IS [NOT] NULL.
    for (suffix, op) in [
        (" is not null", FilterOp::IsNotNull),
        (" is null", FilterOp::IsNull),
    ] {
        if let Some(lhs) = lower.strip_suffix(suffix) {
            let key = name_key(lhs);
            return (!key.is_empty()).then(|| BenignFilter {
                lhs_key: key,
                op,
                value: String::new(),
            });
        }
    }
    // Word operators (case-insensitive), then symbols; the lhs is everything before the operator.
    let word_ops: [(&str, FilterOp); 5] = [
        (" not ilike ", FilterOp::NotLike),
        (" not like ", FilterOp::NotLike),
        (" ilike ", FilterOp::Like),
        (" like ", FilterOp::Like),
        (" in ", FilterOp::In),
    ];
    let mut found: Option<(usize, usize, FilterOp)> = None;
    for (word, op) in word_ops {
        if let Some(pos) = lower.find(word) {
            found = Some((pos, word.len(), op));
            break;
        }
    }
    if found.is_none() {
        for (sym, op) in [
            ("!=", FilterOp::NotEq),
            ("<>", FilterOp::NotEq),
            (">=", FilterOp::GtEq),
            ("<=", FilterOp::LtEq),
            ("=", FilterOp::Eq),
            (">", FilterOp::Gt),
            ("<", FilterOp::Lt),
        ] {
            if let Some(pos) = s.find(sym) {
                found = Some((pos, sym.len(), op));
                break;
            }
        }
    }
    let (pos, len, mut op) = found?;
    let lhs_key = name_key(s.get(..pos)?);
    let raw = s.get(pos + len..)?.trim();
    if lhs_key.is_empty() || raw.is_empty() {
        return None;
    }
    let mut value_raw = strip_quotes(raw).to_string();
    if op == FilterOp::In {
        // `IN ('a')` with one element is `= 'a'`.
        let inner = raw.trim_start_matches('(').trim_end_matches(')');
        if inner.contains(',') {
            return None;
        }
        value_raw = strip_quotes(inner.trim()).to_string();
        op = FilterOp::Eq;
    }
    if matches!(op, FilterOp::Like | FilterOp::NotLike) {
        let starts = value_raw.starts_with('%');
        let ends = value_raw.ends_with('%') && value_raw.len() > 1;
        let inner = value_raw.trim_matches('%').to_string();
        if !inner.contains('%') && op == FilterOp::Like {
            op = match (starts, ends) {
                (true, true) => FilterOp::Contains,
                (false, true) => FilterOp::StartsWith,
                (true, false) => FilterOp::EndsWith,
                (false, false) => FilterOp::Eq,
            };
            value_raw = inner;
        }
    }
    let value = match canonical_number(&value_raw) {
        Some(n) => n,
        None => normalize_value(&value_raw),
    };
    Some(BenignFilter { lhs_key, op, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benign_entries_parse_and_normalize() {
        let b = parse_benign("status = 'Active'").unwrap();
        assert_eq!(
            (b.lhs_key.as_str(), b.op, b.value.as_str()),
            ("status", FilterOp::Eq, "active")
        );
        let b = parse_benign("is_deleted = 0.0").unwrap();
        assert_eq!((b.lhs_key.as_str(), b.value.as_str()), ("isdeleted", "0"));
        let b = parse_benign("t.Name ILIKE '%Bob%'").unwrap();
        assert_eq!((b.op, b.value.as_str()), (FilterOp::Contains, "bob"));
        let b = parse_benign("deleted_at IS NULL").unwrap();
        assert_eq!(b.op, FilterOp::IsNull);
        let b = parse_benign("region IN ('EU')").unwrap();
        assert_eq!((b.op, b.value.as_str()), (FilterOp::Eq, "eu"));
        assert!(parse_benign("nonsense").is_none());
        assert!(parse_benign("= 3").is_none());
    }

    #[test]
    fn profile_parses_validates_and_hashes() {
        let text = r#"
            benign_filters = ["status = 'Active'"]
            ignore_filters = ["tenant_id"]
            limit_min = 500
            [column_mappings]
            region = "RegionName"
        "#;
        let p = RuleProfile::from_toml_str(text, "x.toml").unwrap();
        assert_eq!(p.limit_min, 500);
        assert_eq!(p.version, content_version(text.as_bytes()));
        assert_eq!(p.version.len(), 16);
        assert!(p.compiled().is_ignored("T.tenant_id"));
        assert_eq!(p.compiled().dimension_key("Region"), "regionname");
        let json = r#"{"benign_filters":["is_deleted = 0"],"limit_min":10}"#;
        assert_eq!(
            RuleProfile::from_json_str(json, "x.json")
                .unwrap()
                .limit_min,
            10
        );
        for bad in [
            "limit_min = 0",
            "benign_filters = [\"garbage\"]",
            "unknown_key = 1",
            "[tiers]\nexcellent = 50.0\ngood = 75.0",
            "limit_min = \"many\"",
        ] {
            assert!(
                RuleProfile::from_toml_str(bad, "bad.toml").is_err(),
                "{bad}"
            );
        }
    }
}
