//! Run statistics, counted in one place: what a `run` or `backfill` wrote (messages, events,
//! rows per metric, Φ distribution, tiers, statuses, dead letters by reason) and what its LLM
//! clients and judged metrics did ([`LlmUsage`]). The pipeline's batcher feeds [`RunStats`] as
//! the sink accepts rows; the summary table ([`crate::telemetry::summary`]) renders it, telemetry reads
//! [`LlmUsage::total`], and the per-run LLM figures come from [`LlmUsage::since`].
//!
//! Memory stays constant however long the daemon runs: Φ goes into a fixed histogram at the
//! 0.01 resolution Φ is rounded to, so mean, P50 and P90 are exact.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::evaluation::{DeadLetter, EvaluationRow, Metric};
use crate::judge::JudgeTotals;
use crate::metrics::avoid::MetricCalls;
use crate::sampling::EstimateTracker;
use compact_str::CompactString;

pub mod judge_pass;

pub use judge_pass::{JudgeStats, JudgeStatsSnapshot};

/// Φ buckets: 0.00 … 100.00 in steps of 0.01.
const PHI_BUCKETS: usize = 10_001;

/// Statistics of the STEF rows. Mean and percentiles are over *scored* rows
/// ([`crate::evaluation::RowStatus::is_scored`]); `count - scored` were not scored
/// (`sql_too_large`) and are reported as coverage, never averaged in as Φ 0.
#[derive(Debug, Clone, PartialEq)]
pub struct StefStats {
    /// STEF rows seen.
    pub count: u64,
    /// Rows that are scored (enter the mean and the percentiles).
    pub scored: u64,
    sum: f64,
    histogram: Vec<u64>,
    /// Rows per quality tier.
    pub tiers: BTreeMap<String, u64>,
    /// Rows per filter status.
    pub filter_statuses: BTreeMap<String, u64>,
    /// Rows per semantic verdict.
    pub verdicts: BTreeMap<String, u64>,
    /// Rows per row status (`ok`, `parse_error`, …).
    pub statuses: BTreeMap<String, u64>,
    /// Rows of events scored without their malformed `result` (`details.result_ignored`).
    pub results_ignored: u64,
    /// `p_correct` of the scored rows that carry one.
    pub p_correct: crate::sampling::Moments,
    /// Scored rows whose verdict flags the query (`p_correct` below the model's threshold).
    pub flagged: u64,
    /// The correctness model's version (from the first line-rate row's judge identity).
    pub model_version: Option<String>,
}

impl Default for StefStats {
    fn default() -> Self {
        StefStats {
            count: 0,
            scored: 0,
            sum: 0.0,
            histogram: vec![0; PHI_BUCKETS],
            tiers: BTreeMap::new(),
            filter_statuses: BTreeMap::new(),
            verdicts: BTreeMap::new(),
            statuses: BTreeMap::new(),
            results_ignored: 0,
            p_correct: crate::sampling::Moments::default(),
            flagged: 0,
            model_version: None,
        }
    }
}

impl StefStats {
    fn observe(&mut self, row: &EvaluationRow) {
        let phi = if row.value.is_finite() {
            row.value.clamp(0.0, 100.0)
        } else {
            0.0
        };
        self.count += 1;
        if row.status.is_scored() {
            self.scored += 1;
            self.sum += phi;
            let bucket = ((phi * 100.0).round() as usize).min(PHI_BUCKETS - 1);
            if let Some(slot) = self.histogram.get_mut(bucket) {
                *slot += 1;
            }
        }
        count(&mut self.statuses, row.status.as_str());
        if sqlgrade_core::stef::result_ignored(&row.details) {
            self.results_ignored += 1;
        }
        if let Some(stef) = &row.stef {
            count(&mut self.tiers, stef.quality_tier.as_str());
            count(&mut self.filter_statuses, &stef.filter_status);
            count(&mut self.verdicts, &stef.semantic_verdict);
            if row.status.is_scored() {
                if let Some(p) = stef.p_correct {
                    self.p_correct.add(p);
                }
                self.flagged += u64::from(row.verdict == Some(false));
            }
            if self.model_version.is_none() {
                self.model_version = stef
                    .judge_identity
                    .split_whitespace()
                    .find_map(|part| part.strip_prefix("verdict="))
                    .map(str::to_string);
            }
        }
    }

    /// Mean Φ over scored rows (`None` without any).
    pub fn mean(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.sum / self.scored as f64)
    }

    /// Nearest-rank percentile of Φ, `p` in (0, 100] (`None` without rows).
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.scored == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.scored as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (bucket, n) in self.histogram.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket as f64 / 100.0);
            }
        }
        Some(100.0)
    }
}

/// Statistics of one non-STEF metric. The mean is over *scored* rows
/// ([`crate::evaluation::RowStatus::is_scored`]: a prediction that fails counts 0, a gold query
/// that cannot be parsed or run is not scored); `count - scored` is the coverage gap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricStats {
    /// Rows.
    pub count: u64,
    /// Rows that are scored (enter the mean).
    pub scored: u64,
    sum: f64,
    /// Rows with a verdict.
    pub verdicts: u64,
    /// Rows whose verdict is true.
    pub verdicts_true: u64,
    /// Rows per row status.
    pub statuses: BTreeMap<String, u64>,
    /// (scored rows, sum of their values) per benchmark difficulty / hardness
    /// (`details.difficulty`, else `details.hardness`).
    pub by_difficulty: BTreeMap<String, (u64, f64)>,
}

impl MetricStats {
    /// Mean value over scored rows (`None` without any).
    pub fn mean(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.sum / self.scored as f64)
    }

    /// Scored rows / all rows (`None` without rows).
    pub fn coverage(&self) -> Option<f64> {
        (self.count > 0).then(|| self.scored as f64 / self.count as f64)
    }
}

/// Φ per agent label (`agent_id agent_version model`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupStats {
    /// STEF rows.
    pub count: u64,
    sum: f64,
    /// `p_correct` of its scored rows that carry one.
    pub p_correct: crate::sampling::Moments,
}

impl GroupStats {
    /// Mean Φ.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// What one LLM client did during a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientUsage {
    /// Who uses the client: `STEF judge`, `gold metrics`, or `STEF judge + gold metrics`.
    pub role: String,
    /// `llm:<model>`.
    pub judge: String,
    /// Calls, cache hits, tokens, retries, failures.
    pub totals: JudgeTotals,
}

/// LLM usage of a run: per client, and per LLM-judged gold metric (FLEX, ROSE, Hybrid-EX).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmUsage {
    /// One entry per distinct LLM client (a client shared by STEF and the gold metrics once).
    pub clients: Vec<ClientUsage>,
    /// Judge calls requested, cache hits and avoided calls per judged metric.
    pub judged: BTreeMap<Metric, MetricCalls>,
}

impl LlmUsage {
    /// Whether nothing used an LLM (no LLM client configured).
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty() && self.judged.is_empty()
    }

    /// Every client's totals summed (what telemetry's `judge.cache.lookups` reports).
    pub fn total(&self) -> JudgeTotals {
        self.clients
            .iter()
            .fold(JudgeTotals::default(), |sum, c| sum.plus(&c.totals))
    }

    /// The usage accumulated since `before` (a snapshot of the same scorer taken earlier), so a
    /// run reports its own calls when the scorer outlives it.
    pub fn since(&self, before: &LlmUsage) -> LlmUsage {
        let clients = self
            .clients
            .iter()
            .map(|c| {
                let earlier = before
                    .clients
                    .iter()
                    .find(|b| b.role == c.role && b.judge == c.judge)
                    .map(|b| b.totals)
                    .unwrap_or_default();
                ClientUsage {
                    totals: c.totals.since(&earlier),
                    ..c.clone()
                }
            })
            .collect();
        let judged = self
            .judged
            .iter()
            .map(|(m, c)| {
                let earlier = before.judged.get(m).cloned().unwrap_or_default();
                (*m, c.since(&earlier))
            })
            .collect();
        LlmUsage { clients, judged }
    }
}

/// What the STEF probes of a run did (`[stef] probe_databases`): counted apart from scoring,
/// since they run on the blocking pool, not on the scoring thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeUsage {
    /// Probe queries run (cache hits included).
    pub probes: u64,
    /// Probes that concluded (a row or none).
    pub answered: u64,
    /// Probes the database rejected (the event's own SQL errors).
    pub failed: u64,
    /// Probes that timed out or found no database.
    pub inconclusive: u64,
}

impl ProbeUsage {
    /// The usage since `before` (a scorer's counters span its runs).
    pub fn since(&self, before: &ProbeUsage) -> ProbeUsage {
        ProbeUsage {
            probes: self.probes.saturating_sub(before.probes),
            answered: self.answered.saturating_sub(before.answered),
            failed: self.failed.saturating_sub(before.failed),
            inconclusive: self.inconclusive.saturating_sub(before.inconclusive),
        }
    }
}

/// Everything a run wrote (counted when the sink accepted it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStats {
    /// Messages fully processed and acknowledged.
    pub messages: u64,
    /// Events that were scored (messages that produced rows).
    pub events: u64,
    /// Rows written, all metrics.
    pub rows: u64,
    /// Dead letters written.
    pub dead_letters: u64,
    /// Dead letters per reason (the reason up to its first `:`).
    pub dead_letter_reasons: BTreeMap<String, u64>,
    /// STEF statistics.
    pub stef: StefStats,
    /// Other metrics by name.
    pub metrics: BTreeMap<String, MetricStats>,
    /// STEF Φ per agent label.
    pub by_agent: BTreeMap<String, GroupStats>,
    /// LLM clients and judged-metric calls of the run.
    pub llm: LlmUsage,
    /// The STEF probes of the run.
    pub probes: ProbeUsage,
    /// The second, LLM-judged pass: selected, judged, shed, spend (runs with an LLM judge).
    pub judge_pass: Option<JudgeStatsSnapshot>,
    /// Calibrated estimates per series (runs with an LLM judge).
    pub estimates: EstimateTracker,
    /// When the line-rate pass was done (every message's rows handed to the writer), since the
    /// run started; with a second pass the run ends later, once the judge stage drained.
    pub line_rate_elapsed: Option<Duration>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// What the source saw (label, text), as it reports it (`Source::report`).
    pub source: Vec<(String, String)>,
    /// Components that were degraded or failed during the run (the daemon's health): how
    /// often, for how long in all, the longest episode.
    pub outages: BTreeMap<String, OutageStats>,
    /// The evaluation events sent to the collector (`[telemetry] evaluations`), when on.
    pub evaluation_events: Option<EvaluationEventCounts>,
    /// The agent of the last STEF row and its label (a cache, not a statistic: spares building
    /// the label for every row).
    pub(crate) last_agent: LabelCache,
}

/// What became of the evaluation events (`[telemetry] evaluations`) of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvaluationEventCounts {
    /// Rows handed to the exporter.
    pub submitted: u64,
    /// Records the collector took.
    pub sent: u64,
    /// Records dropped because the queue was full (the collector was away too long).
    pub dropped_queue_full: u64,
    /// Records the collector refused (a 4xx other than 429: retrying cannot help).
    pub refused: u64,
    /// Records still waiting when shutdown's grace ended.
    pub dropped_at_shutdown: u64,
    /// Export attempts that failed and were retried.
    pub failed_attempts: u64,
}

impl EvaluationEventCounts {
    /// Records not delivered, for whichever reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.refused + self.dropped_at_shutdown
    }
}

/// One component's time away from `Ok` during a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutageStats {
    /// Times it left `Ok`.
    pub episodes: u32,
    /// Time not `Ok` in all.
    pub total: Duration,
    /// The longest episode.
    pub longest: Duration,
    /// Failed attempts reported during its episodes (each retried).
    pub failures: u64,
}

impl RunStats {
    /// Count one row.
    pub fn observe_row(&mut self, row: &EvaluationRow) {
        self.rows += 1;
        let value = if row.value.is_finite() {
            row.value
        } else {
            0.0
        };
        if row.metric == Metric::Stef {
            self.stef.observe(row);
            self.remember_agent(row);
            let label = self
                .last_agent
                .0
                .as_ref()
                .map_or("", |last| last.label.as_str());
            let p = row
                .stef
                .as_ref()
                .and_then(|s| s.p_correct)
                .filter(|_| row.status.is_scored());
            update(&mut self.by_agent, label, |group| {
                group.count += 1;
                group.sum += value;
                if let Some(p) = p {
                    group.p_correct.add(p);
                }
            });
            return;
        }
        let scored = row.status.is_scored();
        // Benchmark difficulty is in the gold rows' details, which are value trees (the
        // line-rate STEF row's rendered details never carry it and are not parsed here).
        let difficulty = row
            .details
            .tree()
            .and_then(|d| d.get("difficulty").or_else(|| d.get("hardness")))
            .and_then(|v| v.as_str());
        update(&mut self.metrics, row.metric.as_str(), |stats| {
            stats.count += 1;
            if scored {
                stats.scored += 1;
                stats.sum += value;
            }
            if let Some(verdict) = row.verdict {
                stats.verdicts += 1;
                stats.verdicts_true += u64::from(verdict);
            }
            count(&mut stats.statuses, row.status.as_str());
            if let Some(difficulty) = difficulty
                && scored
            {
                update(&mut stats.by_difficulty, difficulty, |entry| {
                    entry.0 += 1;
                    entry.1 += value;
                });
            }
        });
    }

    /// Count one dead letter.
    pub fn observe_dead_letter(&mut self, dead_letter: &DeadLetter) {
        self.dead_letters += 1;
        let reason = dead_letter
            .reason
            .split_once(':')
            .map_or(dead_letter.reason.as_str(), |(head, _)| head)
            .trim();
        count(&mut self.dead_letter_reasons, reason);
    }

    /// Keep `row`'s agent and its label as the last one seen. The label is built only for a
    /// row whose agent differs from the previous row's (a run's rows come from a few agents,
    /// usually one after another).
    fn remember_agent(&mut self, row: &EvaluationRow) {
        let same = self.last_agent.0.as_ref().is_some_and(|last| {
            last.agent_id == row.agent_id
                && last.agent_version == row.agent_version
                && last.model == row.model
        });
        if !same {
            self.last_agent.0 = Some(LastAgent {
                agent_id: row.agent_id.clone(),
                agent_version: row.agent_version.clone(),
                model: row.model.clone(),
                label: agent_label(row),
            });
        }
    }
}

/// The agent of the last STEF row counted and its label (see [`RunStats::remember_agent`]).
/// Two caches are equal whatever they hold: run statistics compare by what they counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct LabelCache(Option<LastAgent>);

impl PartialEq for LabelCache {
    fn eq(&self, _other: &LabelCache) -> bool {
        true
    }
}

#[derive(Debug, Clone)]
struct LastAgent {
    agent_id: Option<CompactString>,
    agent_version: Option<CompactString>,
    model: Option<CompactString>,
    label: String,
}

/// Apply `change` to the entry of `key` in `map`, inserted as the default the first time; the
/// key is copied only then (the batcher counts every row: a `String` per row and per map was
/// most of its cost).
fn update<V: Default>(map: &mut BTreeMap<String, V>, key: &str, change: impl FnOnce(&mut V)) {
    match map.get_mut(key) {
        Some(value) => change(value),
        None => change(map.entry(key.to_string()).or_default()),
    }
}

/// Count one more `key`.
fn count(map: &mut BTreeMap<String, u64>, key: &str) {
    update(map, key, |n| *n += 1);
}

/// The label Φ is grouped by: `agent_id agent_version (model)`.
pub(crate) fn agent_label(row: &EvaluationRow) -> String {
    let mut parts = vec![row.agent_id.as_deref().unwrap_or("(no agent)")];
    if let Some(version) = row.agent_version.as_deref() {
        parts.push(version);
    }
    let mut label = parts.join(" ");
    if let Some(model) = row.model.as_deref() {
        label.push_str(&format!(" ({model})"));
    }
    label
}
