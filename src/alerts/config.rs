//! Alert rules: the `[alerts]` config section, with defaults and per-app overrides (read by
//! the alert engine, `crate::alerts`).
//!
//! ```toml
//! [alerts]
//! enabled = true
//! series_key = ["app_id", "agent_id", "agent_version", "model"]
//! webhook_url = "https://hooks.slack.com/services/…"
//!
//! [alerts.defaults]
//! recent_window = 200
//! baseline_window = 1000
//! stef_min_drop = 5.0
//!
//! [alerts.apps.sales-assistant]     # only the keys that differ from [alerts.defaults]
//! stef_min_drop = 8.0
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evaluation::{Metric, MetricKind};
use crate::settings::Secret;
use crate::stores::breakdown::Dimension;

/// A label that can be part of a series key.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SeriesLabel {
    /// The event's `app_id`.
    AppId,
    /// The event's `agent_id`.
    AgentId,
    /// The event's `agent_version`.
    AgentVersion,
    /// The event's `model`.
    Model,
    /// The event's `run_id`.
    RunId,
}

impl SeriesLabel {
    /// The label's name (also its alert label name).
    pub fn as_str(self) -> &'static str {
        match self {
            SeriesLabel::AppId => "app_id",
            SeriesLabel::AgentId => "agent_id",
            SeriesLabel::AgentVersion => "agent_version",
            SeriesLabel::Model => "model",
            SeriesLabel::RunId => "run_id",
        }
    }
}

/// `[alerts]`: whether the engine runs, how series are keyed, where alerts go, and the rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AlertsConfig {
    /// Run the alert engine.
    pub enabled: bool,
    /// Labels that identify a series (each series has its own windows).
    pub series_key: Vec<SeriesLabel>,
    /// Inputs queued for the engine at most; beyond that inputs are dropped (and counted) so
    /// that scoring never waits for alerting.
    pub channel_capacity: usize,
    /// Series tracked at most (memory bound); rows of further series are ignored and counted.
    pub max_series: usize,
    /// Webhook receiving alert notifications (Slack incoming webhook or an Alertmanager-style
    /// receiver). Secret: webhook URLs embed their token.
    pub webhook_url: Option<Secret>,
    /// Per-request webhook timeout.
    pub webhook_timeout_ms: u64,
    /// Delivery attempts per notification and destination (webhook, ClickHouse).
    pub delivery_attempts: u32,
    /// First retry delay (doubles per attempt).
    pub retry_initial_ms: u64,
    /// Largest retry delay.
    pub retry_max_ms: u64,
    /// Also write alerts to the ClickHouse `alerts` table (uses the `[sink]` connection).
    pub clickhouse: bool,
    /// Base URL of the review page as the people paged reach it (e.g.
    /// `https://sqlgrade.internal:8089`): each notification then links to the alert's events in
    /// the review queue (`<review_url>/queue?alert=<alert_id>`: Alertmanager's `generatorURL`,
    /// and a line of the Slack text). Unset = no link.
    pub review_url: Option<String>,
    /// Rules for every app without an override.
    pub defaults: RuleSet,
    /// Per-app overrides of [`AlertsConfig::defaults`], keyed by `app_id`.
    pub apps: BTreeMap<String, RuleOverrides>,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig {
            enabled: false,
            series_key: vec![
                SeriesLabel::AppId,
                SeriesLabel::AgentId,
                SeriesLabel::AgentVersion,
                SeriesLabel::Model,
            ],
            channel_capacity: 10_000,
            max_series: 10_000,
            webhook_url: None,
            webhook_timeout_ms: 5_000,
            delivery_attempts: 5,
            retry_initial_ms: 500,
            retry_max_ms: 30_000,
            clickhouse: false,
            review_url: None,
            defaults: RuleSet::default(),
            apps: BTreeMap::new(),
        }
    }
}

impl AlertsConfig {
    /// The rules that apply to `app_id` (defaults with the app's overrides applied).
    pub fn rules_for(&self, app_id: Option<&str>) -> std::borrow::Cow<'_, RuleSet> {
        match app_id.and_then(|a| self.apps.get(a)) {
            Some(overrides) => std::borrow::Cow::Owned(overrides.apply(&self.defaults)),
            None => std::borrow::Cow::Borrowed(&self.defaults),
        }
    }

    /// Problems with the section, for `config::Config::validate`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.channel_capacity == 0 {
            problems.push("alerts.channel_capacity must be at least 1".to_string());
        }
        if self.delivery_attempts == 0 {
            problems.push("alerts.delivery_attempts must be at least 1".to_string());
        }
        problems.extend(self.defaults.problems("alerts.defaults"));
        for (app, overrides) in &self.apps {
            let rules = overrides.apply(&self.defaults);
            problems.extend(rules.problems(&format!("alerts.apps.{app}")));
        }
        problems
    }
}

/// The thresholds of every detector. Windows count observations (rows of that metric), so a
/// replay behaves exactly like live traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RuleSet {
    /// Observations in the recent window.
    pub recent_window: usize,
    /// Observations in the baseline window (the ones just before the recent window; frozen
    /// while an alert fires so the regression does not become the new normal).
    pub baseline_window: usize,
    /// Minimum observations in each window before any test is run.
    pub min_samples: usize,
    /// Run the test every this many observations of the series.
    pub evaluate_every: usize,
    /// One-sided significance level of the Mann–Whitney test.
    pub alpha: f64,
    /// Consecutive breaching evaluations before an alert fires (hysteresis).
    pub fire_after: usize,
    /// Consecutive calm evaluations before a firing alert resolves (hysteresis).
    pub resolve_after: usize,
    /// An evaluation is calm when the effect is below `resolve_ratio × min effect`.
    pub resolve_ratio: f64,
    /// Metrics watched for score drops (`stef`, `ex`, `esm`, `esm_plus`, `etm`, `ts_ex`,
    /// `ts_ex_strict`, `hybrid_ex`, `flex`, `rose`).
    pub metrics: Vec<String>,
    /// Minimum drop of the mean STEF Φ (points, 0–100) to alert.
    pub stef_min_drop: f64,
    /// Minimum drop of a gold metric's mean (0–1) to alert.
    pub gold_min_drop: f64,
    /// Minimum rise of the share of `poor`-tier STEF rows (0–1) to alert; 0 disables the rule.
    pub poor_share_min_increase: f64,
    /// Minimum rise of the share of `judge_fallback` STEF rows (0–1); 0 disables the rule.
    pub judge_fallback_min_increase: f64,
    /// Minimum rise of the share of dead-lettered messages (0–1); 0 disables the rule.
    pub dead_letter_min_increase: f64,
    /// Minimum rise of the share of LLM-judged events whose verdict (correct or not) differs
    /// from the line-rate verdict it revises (0–1); 0 disables the rule (`judge_disagreement`).
    pub judge_disagreement_min_increase: f64,
    /// Minimum rise of the share flagged by the line-rate verdict among the events of one
    /// element — a table, column or join edge the SQL reads (`details.reads`), or a question
    /// type —, per series and element (`element_flagged`, metric
    /// `flagged_share:<dimension>:<element>`); 0 disables the rule (the default).
    pub element_flagged_min_increase: f64,
    /// The dimensions `element_flagged` watches: `table`, `column`, `join`, `question_type`.
    pub element_flagged_by: Vec<Dimension>,
    /// Share of the recent window a question type (or a table questions ground to) must take,
    /// having taken under a quarter of that share of the baseline, to fire `question_mix`
    /// (`question_tables_mix`): what users ask changed; 0 disables this test (the default).
    pub new_question_type_min_share: f64,
    /// Jensen–Shannon divergence (bits, 0–1) between the recent and the baseline mix of
    /// question types (of the tables questions ground to) at which `question_mix`
    /// (`question_tables_mix`) breaches, with the G-test's `p < alpha`; 0 disables this test
    /// (the default).
    pub question_mix_divergence: f64,
    /// Estimate rules: line-rate STEF rows per block. The calibrated estimate of the share
    /// correct (PPI: line rate plus the LLM correction on the uniform slice) is kept per block
    /// and compared block by block, when each block closes.
    pub estimate_block: usize,
    /// Blocks in the recent window of the estimate rules.
    pub estimate_recent_blocks: usize,
    /// Blocks in the baseline window, just before the recent one (frozen while firing).
    pub estimate_baseline_blocks: usize,
    /// LLM-judged uniform-slice events each window needs before an estimate rule evaluates.
    pub estimate_min_judged: u64,
    /// `estimate_low`: fires when the upper end of the recent estimate's 95% interval is below
    /// this share correct (0–1); 0 disables the rule.
    pub estimate_floor: f64,
    /// `estimate_drop`: fires when the recent estimate's 95% interval lies wholly below the
    /// baseline's (the intervals do not overlap).
    pub estimate_drop: bool,
    /// `judge_agreement`: fires when Cohen's κ of a judge identity against human labels, over
    /// its most recent `agreement_window` labels, is below this; 0 disables the rule. The
    /// `agreement_*` keys are read from `[alerts.defaults]` only: a judge identity spans apps.
    pub agreement_kappa_min: f64,
    /// Labels a judge identity needs in the window before `judge_agreement` evaluates.
    pub agreement_min_labels: usize,
    /// Labels in the agreement window (the most recent per judge identity).
    pub agreement_window: usize,
    /// Which judges `judge_agreement` watches: `stef` (the line-rate verdict), `stef_judged`
    /// (the LLM judge).
    pub agreement_judges: Vec<String>,
    /// Severity label on the alerts.
    pub severity: String,
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet {
            recent_window: 200,
            baseline_window: 1000,
            min_samples: 100,
            evaluate_every: 10,
            alpha: 0.001,
            fire_after: 3,
            resolve_after: 3,
            resolve_ratio: 0.5,
            metrics: vec![Metric::Stef.to_string(), Metric::Ex.to_string()],
            stef_min_drop: 5.0,
            gold_min_drop: 0.05,
            poor_share_min_increase: 0.10,
            judge_fallback_min_increase: 0.10,
            dead_letter_min_increase: 0.05,
            judge_disagreement_min_increase: 0.15,
            element_flagged_min_increase: 0.0,
            element_flagged_by: Dimension::ALL.to_vec(),
            new_question_type_min_share: 0.0,
            question_mix_divergence: 0.0,
            estimate_block: 100,
            estimate_recent_blocks: 5,
            estimate_baseline_blocks: 20,
            estimate_min_judged: 30,
            estimate_floor: 0.0,
            estimate_drop: true,
            agreement_kappa_min: 0.4,
            agreement_min_labels: 30,
            agreement_window: 100,
            agreement_judges: vec![Metric::Stef.to_string(), Metric::StefJudged.to_string()],
            severity: "warning".into(),
        }
    }
}

impl RuleSet {
    fn problems(&self, at: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.recent_window == 0 || self.baseline_window == 0 {
            problems.push(format!(
                "{at}: recent_window and baseline_window must be ≥ 1"
            ));
        }
        if self.min_samples < 2 || self.min_samples > self.recent_window.min(self.baseline_window) {
            problems.push(format!(
                "{at}: min_samples must be between 2 and the smaller window"
            ));
        }
        if self.evaluate_every == 0 || self.fire_after == 0 || self.resolve_after == 0 {
            problems.push(format!(
                "{at}: evaluate_every, fire_after and resolve_after must be ≥ 1"
            ));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            problems.push(format!("{at}: alpha must be in (0, 1)"));
        }
        if !(self.resolve_ratio >= 0.0 && self.resolve_ratio < 1.0) {
            problems.push(format!("{at}: resolve_ratio must be in [0, 1)"));
        }
        if self.estimate_block == 0
            || self.estimate_recent_blocks == 0
            || self.estimate_baseline_blocks == 0
        {
            problems.push(format!(
                "{at}: estimate_block, estimate_recent_blocks and estimate_baseline_blocks must be ≥ 1"
            ));
        }
        if !(0.0..=1.0).contains(&self.question_mix_divergence) {
            problems.push(format!("{at}: question_mix_divergence must be in [0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.new_question_type_min_share) {
            problems.push(format!(
                "{at}: new_question_type_min_share must be in [0, 1]"
            ));
        }
        if !(0.0..1.0).contains(&self.estimate_floor) {
            problems.push(format!("{at}: estimate_floor must be in [0, 1)"));
        }
        if !(self.agreement_kappa_min >= 0.0 && self.agreement_kappa_min <= 1.0) {
            problems.push(format!("{at}: agreement_kappa_min must be in [0, 1]"));
        }
        if self.agreement_min_labels < 2 || self.agreement_min_labels > self.agreement_window {
            problems.push(format!(
                "{at}: agreement_min_labels must be between 2 and agreement_window"
            ));
        }
        for judge in &self.agreement_judges {
            if !matches!(
                Metric::from_name(judge),
                Some(Metric::Stef | Metric::StefJudged)
            ) {
                problems.push(format!(
                    "{at}: agreement_judges: unknown judge {judge:?} (stef or stef_judged)"
                ));
            }
        }
        for metric in &self.metrics {
            // Score-drop rules watch any metric with a score of its own (the second pass's
            // `stef_judged` is watched by the estimate and agreement rules instead).
            if Metric::from_name(metric).is_none_or(|m| m.kind() == MetricKind::SecondPass) {
                problems.push(format!("{at}: unknown metric {metric:?}"));
            }
        }
        problems
    }

    /// Minimum drop for `metric` (points for STEF, 0–1 for gold metrics).
    pub fn min_drop(&self, metric: &str) -> f64 {
        // STEF's points (scale 100) against the gold metrics' rates (scale 1).
        if Metric::from_name(metric).is_some_and(|m| m.entry().scale > 1.0) {
            self.stef_min_drop
        } else {
            self.gold_min_drop
        }
    }
}

/// Per-app overrides: every key of [`RuleSet`], optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RuleOverrides {
    pub recent_window: Option<usize>,
    pub baseline_window: Option<usize>,
    pub min_samples: Option<usize>,
    pub evaluate_every: Option<usize>,
    pub alpha: Option<f64>,
    pub fire_after: Option<usize>,
    pub resolve_after: Option<usize>,
    pub resolve_ratio: Option<f64>,
    pub metrics: Option<Vec<String>>,
    pub stef_min_drop: Option<f64>,
    pub gold_min_drop: Option<f64>,
    pub poor_share_min_increase: Option<f64>,
    pub judge_fallback_min_increase: Option<f64>,
    pub dead_letter_min_increase: Option<f64>,
    pub judge_disagreement_min_increase: Option<f64>,
    pub element_flagged_min_increase: Option<f64>,
    pub element_flagged_by: Option<Vec<Dimension>>,
    pub new_question_type_min_share: Option<f64>,
    pub question_mix_divergence: Option<f64>,
    pub estimate_block: Option<usize>,
    pub estimate_recent_blocks: Option<usize>,
    pub estimate_baseline_blocks: Option<usize>,
    pub estimate_min_judged: Option<u64>,
    pub estimate_floor: Option<f64>,
    pub estimate_drop: Option<bool>,
    pub agreement_kappa_min: Option<f64>,
    pub agreement_min_labels: Option<usize>,
    pub agreement_window: Option<usize>,
    pub agreement_judges: Option<Vec<String>>,
    pub severity: Option<String>,
}

impl RuleOverrides {
    /// `base` with every set key replaced.
    pub fn apply(&self, base: &RuleSet) -> RuleSet {
        let mut r = base.clone();
        macro_rules! set {
            ($($field:ident),*) => {
                $(if let Some(v) = &self.$field { r.$field = v.clone(); })*
            };
        }
        set!(
            recent_window,
            baseline_window,
            min_samples,
            evaluate_every,
            alpha,
            fire_after,
            resolve_after,
            resolve_ratio,
            metrics,
            stef_min_drop,
            gold_min_drop,
            poor_share_min_increase,
            judge_fallback_min_increase,
            dead_letter_min_increase,
            judge_disagreement_min_increase,
            element_flagged_min_increase,
            element_flagged_by,
            new_question_type_min_share,
            question_mix_divergence,
            estimate_block,
            estimate_recent_blocks,
            estimate_baseline_blocks,
            estimate_min_judged,
            estimate_floor,
            estimate_drop,
            agreement_kappa_min,
            agreement_min_labels,
            agreement_window,
            agreement_judges,
            severity
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_overrides_apply_on_top_of_defaults() {
        let config: AlertsConfig = toml::from_str(
            r#"
            enabled = true
            [defaults]
            stef_min_drop = 6.0
            [apps.sales]
            stef_min_drop = 9.0
            "#,
        )
        .unwrap();
        assert_eq!(config.rules_for(Some("sales")).stef_min_drop, 9.0);
        assert_eq!(config.rules_for(Some("other")).stef_min_drop, 6.0);
        assert_eq!(config.rules_for(None).recent_window, 200);
        assert!(config.problems().is_empty());
    }

    #[test]
    fn bad_rules_are_reported() {
        let config: AlertsConfig = toml::from_str(
            r#"
            [apps.x]
            alpha = 2.0
            metrics = ["nope"]
            "#,
        )
        .unwrap();
        let problems = config.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn webhook_url_is_redacted_and_env_overrides_work() {
        let env = std::collections::HashMap::from([
            (
                "SQLGRADE__ALERTS__WEBHOOK_URL".to_string(),
                "https://hooks.slack.com/services/T000/B000/XXXX".to_string(),
            ),
            ("SQLGRADE__ALERTS__ENABLED".to_string(), "true".to_string()),
        ]);
        let config = crate::config::Config::load_with_env(None, Some(env)).unwrap();
        assert!(config.alerts.enabled);
        let text = config.to_redacted_toml().unwrap();
        assert!(!text.contains("XXXX"), "{text}");
        assert!(text.contains("[alerts.defaults]"));
    }
}
