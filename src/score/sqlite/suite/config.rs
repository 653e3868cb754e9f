//! The suites' settings.

use crate::score::sqlite::constraints::MiningLimits;

/// How suites are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteConfig {
    /// Seed of the generator (suites are deterministic for a seed).
    pub seed: u64,
    /// Candidate databases generated per gold query.
    pub candidates: usize,
    /// Largest suite kept.
    pub max_suite: usize,
    /// Candidates kept regardless of mutants: the first ones on which the gold query returns
    /// rows (so every suite has some databases).
    pub always_keep: usize,
    /// Most rows per table of a generated database.
    pub max_rows: usize,
    /// Most mutants of the gold query.
    pub max_mutants: usize,
    /// Largest counterexample script, in bytes.
    pub max_script_bytes: usize,
    /// Bounds of mining a real database's constraints (once per database).
    pub mining: MiningLimits,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        SuiteConfig {
            seed: 7,
            candidates: 150,
            max_suite: 16,
            always_keep: 4,
            max_rows: 5,
            max_mutants: 32,
            max_script_bytes: 8 * 1024,
            mining: MiningLimits::default(),
        }
    }
}
