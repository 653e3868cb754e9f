//! ESM+ settings, the rules it skipped and its outcome.

use serde::Serialize;

/// ESM+ settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EsmPlusOptions {
    /// Compare literal values (default on).
    pub value_check: bool,
    /// Compare DISTINCT flags (default on).
    pub distinct_check: bool,
    /// Bit `n` set disables rule `n` (1..=20), like the engine's `--disable_rules`.
    pub disabled_rules: u32,
    /// Reproduce the paper's ordered GROUP BY and single ORDER BY direction (A12, A13).
    pub paper_compat: bool,
    /// Rules 1 and 9 also require the column NOT NULL (A3).
    pub strict_nulls: bool,
}

impl Default for EsmPlusOptions {
    fn default() -> Self {
        EsmPlusOptions {
            value_check: true,
            distinct_check: true,
            disabled_rules: 0,
            paper_compat: false,
            strict_nulls: false,
        }
    }
}

impl EsmPlusOptions {
    /// Options with every rule disabled ("stage 0": the functional fixes only).
    pub fn fixes_only() -> EsmPlusOptions {
        EsmPlusOptions {
            disabled_rules: u32::MAX,
            ..EsmPlusOptions::default()
        }
    }

    /// Disable one rule.
    pub fn without_rule(mut self, rule: u8) -> EsmPlusOptions {
        self.disabled_rules |= 1u32 << rule;
        self
    }

    pub(super) fn on(&self, rule: u8) -> bool {
        self.disabled_rules & (1u32 << rule) == 0
    }
}

/// A rule that could not be checked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SkippedRule {
    /// Rule number.
    pub rule: u8,
    /// Why.
    pub reason: String,
}

/// ESM+ verdict and diagnosis for one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EsmPlusOutcome {
    /// Match.
    pub verdict: bool,
    /// Whether the prediction parsed.
    pub pred_parsed: bool,
    /// Why it did not.
    pub pred_parse_error: Option<String>,
    /// Clauses that differ after canonicalisation.
    pub mismatched: Vec<&'static str>,
    /// Rules that rewrote the gold.
    pub gold_rules: Vec<u8>,
    /// Rules that rewrote the prediction.
    pub pred_rules: Vec<u8>,
    /// Rules that could not be checked for lack of schema facts.
    pub skipped_rules: Vec<SkippedRule>,
}
