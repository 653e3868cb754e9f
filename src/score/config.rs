//! `[rules]` (per-app rule profiles), `[stef]` (schema catalogues and the read-only probe of
//! the line-rate score) and `[gold]` (gold-metric databases, conventions and their judge): the
//! scorer's sections.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::evaluation::{Metric, MetricKind};
use crate::llm::config::LlmJudgeConfig;
use crate::metrics::ex::ExConvention;
use crate::settings::string_or_list;

/// `[rules]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RulesConfig {
    /// Directory of `<app_id>.toml` rule profiles.
    pub dir: PathBuf,
    /// How often the directory is checked for changed profiles (0 = never reload).
    pub reload_interval_ms: u64,
}

impl Default for RulesConfig {
    fn default() -> Self {
        RulesConfig {
            dir: PathBuf::from("rules"),
            reload_interval_ms: 2000,
        }
    }
}

/// `[stef]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StefConfig {
    /// Schema catalogues for every app (an app's `catalogue` in its rule profile comes first):
    /// Spider/BIRD `tables.json` files, SQLite files (introspected read-only; the file's stem
    /// is its `db_id`) or the JSON/TOML catalogue form. An event's schema is the one its
    /// `db_id` (else `gold.db_id`) names; a catalogue of one database serves events without a
    /// `db_id`. Reloaded when a file changes (every `rules.reload_interval_ms`).
    pub catalogues: Vec<PathBuf>,
    /// A read-only replica to probe, laid out as `<db_id>/<db_id>.sqlite` (like
    /// `gold.databases`): for events whose catalogue schema was found and whose database is
    /// here, the checks ask whether the query returns rows and whether its literals occur in
    /// their columns. Unset = no probes.
    pub probe_databases: Option<PathBuf>,
    /// Time limit of one probe query (ms); a probe past it concludes nothing
    /// (`probe_inconclusive`).
    pub probe_timeout_ms: u64,
    /// Probe queries running at the same time.
    pub probe_workers: usize,
    /// The correctness model that gives every line-rate row its `p_correct` and verdict: a
    /// model file `sqlgrade calibrate --fit --write` wrote from this deployment's labels. Unset
    /// = the model the build ships (fitted on the label files of `shared/data/labels`). A file
    /// that is missing, malformed or weighs a feature this build does not know stops the
    /// daemon at start, naming the path and the reason.
    pub model: Option<PathBuf>,
}

impl Default for StefConfig {
    fn default() -> Self {
        StefConfig {
            catalogues: Vec::new(),
            probe_databases: None,
            probe_timeout_ms: 200,
            probe_workers: 2,
            model: None,
        }
    }
}

/// Why `[stef] model` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelLoadError {
    /// The file cannot be read.
    #[error("stef.model {path}: cannot read it")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a model this build can apply.
    #[error("stef.model {path}: not a usable correctness model")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::stef::correctness::ModelError,
    },
}

impl StefConfig {
    /// The correctness model `[stef] model` names, else the shipped one.
    pub fn verdict_model(
        &self,
    ) -> Result<std::sync::Arc<crate::stef::correctness::VerdictModel>, ModelLoadError> {
        use crate::stef::correctness::VerdictModel;
        let Some(path) = &self.model else {
            return Ok(std::sync::Arc::new(VerdictModel::shipped().clone()));
        };
        let text = std::fs::read_to_string(path).map_err(|source| ModelLoadError::Read {
            path: path.clone(),
            source,
        })?;
        VerdictModel::parse(&text)
            .map(std::sync::Arc::new)
            .map_err(|source| ModelLoadError::Invalid {
                path: path.clone(),
                source,
            })
    }
}

impl StefConfig {
    /// What is wrong with this section alone.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.probe_timeout_ms == 0 {
            problems.push("stef.probe_timeout_ms must be at least 1".to_string());
        }
        if self.probe_workers == 0 {
            problems.push("stef.probe_workers must be at least 1".to_string());
        }
        problems
    }
}

/// `[gold]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GoldConfig {
    /// Directory laid out as `<db_id>/<db_id>.sqlite`; unset = gold metrics off (unless a
    /// benchmark backfill supplies its own).
    pub databases: Option<PathBuf>,
    /// Spider-format `tables.json` files with the schemas ESM/ESM+ need (databases missing from
    /// them are introspected from the SQLite files).
    pub tables: Vec<PathBuf>,
    /// EX convention: `bird` (set equality) or `spider` (test-suite: multiset, column
    /// permutations, order only when the gold orders).
    #[serde(with = "ex_convention_name")]
    #[schemars(with = "String")]
    pub ex_convention: ExConvention,
    /// Which gold metrics to compute (`ex`, `esm`, `esm_plus`, `etm`, `ts_ex`, `ts_ex_strict`, and the LLM-judged `flex`,
    /// `rose`, `hybrid_ex`); a list, or a comma-separated string from the environment.
    #[serde(deserialize_with = "gold_metric_list")]
    pub metrics: Vec<Metric>,
    /// Per-query execution time limit.
    pub timeout_ms: u64,
    /// Largest result a query may return, in rows.
    pub max_rows: usize,
    /// Queries executed at the same time (default: the number of CPUs).
    pub workers: NonZeroUsize,
    /// LLM-judged metrics: skip the judge where deterministic evidence decides (ESM+-equivalent
    /// prediction, prediction that fails to execute, identical result tables) and record why.
    pub avoidance: bool,
    /// FLEX: how execution results are rendered in the prompt (`paper` or `repo_v1`).
    pub flex_render: crate::metrics::flex::RenderPreset,
    /// FLEX: a second call classifies the error categories of incorrect verdicts.
    pub flex_error_categories: bool,
    /// ROSE: rows of each execution result shown in the prompts (the released code's 20).
    pub rose_preview_rows: usize,
    /// Hybrid-EX: verdict cut-off θ (pass iff score ≥ θ).
    pub hybrid_cutoff: f64,
    /// Hybrid-EX: default relative numeric tolerance δ0.
    pub hybrid_tolerance: f64,
    /// The LLM endpoint of `flex`, `rose` and `hybrid_ex` (same keys as `[judge]`, with
    /// `kind = "llm"`). Unset: they use `[judge]`, which must then be an LLM judge; the client
    /// (cache, limits) is shared with STEF whenever both name the same endpoint and model.
    #[serde(with = "crate::llm::config::gold_judge")]
    #[schemars(with = "Option<LlmJudgeConfig>")]
    pub judge: Option<LlmJudgeConfig>,
}

impl GoldConfig {
    /// What is wrong with this section alone (its judge, `[gold.judge]`, is checked with
    /// `[judge]` by `Config::validate`, which knows both).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(1..=crate::metrics::rose::MAX_PREVIEW_ROWS).contains(&self.rose_preview_rows) {
            problems.push(format!(
                "gold.rose_preview_rows must be between 1 and {}, not {}",
                crate::metrics::rose::MAX_PREVIEW_ROWS,
                self.rose_preview_rows
            ));
        }
        if !(self.hybrid_cutoff.is_finite() && (0.0..=1.0).contains(&self.hybrid_cutoff)) {
            problems.push(format!(
                "gold.hybrid_cutoff must be between 0 and 1, not {}",
                self.hybrid_cutoff
            ));
        }
        if !(self.hybrid_tolerance.is_finite() && (0.0..=1.0).contains(&self.hybrid_tolerance)) {
            problems.push(format!(
                "gold.hybrid_tolerance must be between 0 and 1 (relative), not {}",
                self.hybrid_tolerance
            ));
        }
        if let Some(judge) = &self.judge
            && judge.budget != crate::llm::config::JudgeBudgetConfig::default()
        {
            problems.push(
                "gold.judge.budget has no effect: the budget governs the STEF judge's second \
                 pass ([judge.budget]); LLM-judged gold metrics judge every event that carries \
                 gold data"
                    .to_string(),
            );
        }
        problems
    }

    /// Whether `metric` is switched on.
    pub fn has(&self, metric: Metric) -> bool {
        self.metrics.contains(&metric)
    }

    /// Whether any LLM-judged metric is switched on.
    pub fn wants_judged(&self) -> bool {
        self.metrics
            .iter()
            .any(|m| m.kind() == MetricKind::JudgedGold)
    }
}

impl Default for GoldConfig {
    fn default() -> Self {
        GoldConfig {
            databases: None,
            tables: Vec::new(),
            ex_convention: ExConvention::Bird,
            metrics: Metric::gold().filter(|m| m.entry().on_by_default).collect(),
            timeout_ms: 30_000,
            max_rows: 1_000_000,
            workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            avoidance: true,
            flex_render: crate::metrics::flex::RenderPreset::Paper,
            flex_error_categories: false,
            rose_preview_rows: crate::metrics::rose::DEFAULT_PREVIEW_ROWS,
            hybrid_cutoff: crate::metrics::hybrid_ex::DEFAULT_CUTOFF,
            hybrid_tolerance: crate::metrics::hybrid_ex::DEFAULT_TOLERANCE,
            judge: None,
        }
    }
}

/// `gold.ex_convention` as the config names it: `bird` or `spider`.
mod ex_convention_name {
    use super::{Deserialize, Deserializer, ExConvention, Serializer};

    pub fn serialize<S: Serializer>(value: &ExConvention, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match value {
            ExConvention::Bird => "bird",
            ExConvention::SpiderTestSuite => "spider",
        })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ExConvention, D::Error> {
        let name = String::deserialize(d)?;
        match name.as_str() {
            "bird" => Ok(ExConvention::Bird),
            "spider" => Ok(ExConvention::SpiderTestSuite),
            other => Err(serde::de::Error::custom(format!(
                "gold.ex_convention must be \"bird\" or \"spider\", not {other:?}"
            ))),
        }
    }
}

/// `gold.metrics`: names (a list, or a comma-separated string from the environment) of gold
/// metrics.
fn gold_metric_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Metric>, D::Error> {
    string_or_list(d)?
        .iter()
        .map(|name| {
            Metric::from_name(name)
                .filter(|m| m.is_gold())
                .ok_or_else(|| {
                    let expected: Vec<&str> = Metric::gold().map(Metric::as_str).collect();
                    serde::de::Error::custom(format!(
                        "gold.metrics: unknown metric {name:?} (expected {})",
                        expected.join(", ")
                    ))
                })
        })
        .collect()
}
