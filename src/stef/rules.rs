//! Application rule profiles Rapp (`rules/<app_id>.toml`), hot-reloaded. (Skeleton.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::TierThresholds;

/// Default λ_min: a LIMIT at or above it without a top-k request is a safety limit.
pub const DEFAULT_LIMIT_MIN: u64 = 1000;

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
    /// Content hash of the profile source (set by the loader, not read from the file).
    #[serde(skip_deserializing)]
    pub version: String,
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
            version: "default".into(),
        }
    }
}
