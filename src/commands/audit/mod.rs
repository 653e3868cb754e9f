//! `sqlgrade audit`: which gold (reference) queries of a benchmark are themselves suspect, from
//! the rows of several runs of different systems over the same items.
//!
//! Benchmarks carry wrong gold queries, and every wrong gold query moves every system's EX. When
//! several systems have been backfilled over one benchmark, their rows hold the evidence. Per
//! item (`event_id`, the question id of a benchmark backfill), the audit collects:
//!
//! | evidence | from | weight |
//! |---|---|---|
//! | `gold_fails`: the gold query does not execute | EX rows with status `gold_error` | [`GOLD_FAILS_WEIGHT`] |
//! | `consensus_against_gold`: k ≥ 2 systems return the *same* result (EX's `pred_digest`, a set fingerprint), different from the gold's | EX rows | no system matches the gold: `1 + k/n`, or only `k/n` when the agreed result has another number of columns than the gold's (an extra or missing column is more often a reading of the question than a wrong gold); m systems match it and k > m: `(k − m)/n`; an *empty* agreed result only [`NO_MATCH_WEIGHT`] (systems that all fail to find rows — a misspelt value in the evidence, say — agree trivially) |
//! | `no_system_matches`: every system with an EX verdict misses the gold (n ≥ 2) and no two agree | EX rows | [`NO_MATCH_WEIGHT`] |
//! | `flex_incorrect_ground_truth`: FLEX judged the prediction correct although EX = 0 and its false-negative categorisation names `incorrect_ground_truth_query` | FLEX rows (`gold.flex_error_categories = true`) | [`JUDGE_FLAG_WEIGHT`] per system |
//! | `rose_gold_incorrect`: ROSE's Refuter says the gold query is wrong | ROSE rows | [`JUDGE_FLAG_WEIGHT`] per system |
//! | `ts_ex_gold_suspect`: `ts_ex` gave up a counterexample because it hinges on a condition of the gold that neither the question nor the evidence asks for (`details.gold_suspect`: a literal nobody names, an aggregate over more rows than the query reads) | `ts_ex` rows | [`TS_EX_SUSPECT_WEIGHT`] once (the reason is the gold's, whichever systems showed it) |
//!
//! The strength of an item is the sum of its weights; its level is `strong` (≥ 2), `moderate`
//! (≥ 1) or `weak` (> 0). Items at `moderate` or above are **suspected**: the corrected EX of
//! each system leaves them out, beside the plain EX over every scored item (both with their
//! count and a 95% Wilson interval). EX here is the mean over *scored* EX rows (a verdict;
//! `gold_error` and other unscored rows are counted apart).
//!
//! **Suspicion is not proof.** Systems share training data and habits and can agree on the same
//! wrong answer; an LLM judge can be wrong about the gold. The audit ranks items for a person
//! (or a dataset maintainer) to check; it never changes a row.

pub mod html;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::commands::report::ReportError;
use crate::evaluation::Metric;
use crate::metrics::flex::INCORRECT_GROUND_TRUTH;
use crate::sampling::estimate::wilson_interval;
use crate::stores::StoredRow;

/// Weight of a gold query that fails to execute.
pub const GOLD_FAILS_WEIGHT: f64 = 3.0;
/// Weight of each system whose LLM judge (FLEX's FN categorisation, ROSE's Refuter) says the
/// gold query is wrong.
pub const JUDGE_FLAG_WEIGHT: f64 = 0.75;
/// Weight of a gold condition nobody asked for that a `ts_ex` counterexample hinges on: listed
/// (weak evidence), not enough alone to leave the item out of the corrected EX — the condition
/// may be a reading of the question the benchmark meant.
pub const TS_EX_SUSPECT_WEIGHT: f64 = 0.5;
/// Weight of "every system misses the gold, and no two agree".
pub const NO_MATCH_WEIGHT: f64 = 0.25;
/// Strength from which an item is suspected (left out of the corrected EX).
pub const SUSPECTED_FROM: f64 = 1.0;
/// Strength from which an item's suspicion is `strong`.
pub const STRONG_FROM: f64 = 2.0;

/// How strongly an item's gold query is suspected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Some evidence, not enough to leave the item out of the corrected EX.
    Weak,
    /// Suspected.
    Moderate,
    /// Suspected, with strong evidence.
    Strong,
}

impl Level {
    fn of(strength: f64) -> Option<Level> {
        if strength >= STRONG_FROM {
            Some(Level::Strong)
        } else if strength >= SUSPECTED_FROM {
            Some(Level::Moderate)
        } else if strength > 0.0 {
            Some(Level::Weak)
        } else {
            None
        }
    }

    /// The name used in the outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Weak => "weak",
            Level::Moderate => "moderate",
            Level::Strong => "strong",
        }
    }
}

/// One piece of evidence against an item's gold query.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// The gold query fails to execute.
    GoldFails {
        /// Runs that recorded the failure.
        runs: Vec<String>,
        /// The executor's message.
        message: String,
    },
    /// Several systems return the same result, which is not the gold's.
    ConsensusAgainstGold {
        /// The agreeing runs.
        runs: Vec<String>,
        /// Runs with an EX verdict on the item.
        of: usize,
        /// Runs whose result matches the gold.
        matching_gold: Vec<String>,
        /// The agreed result's set digest.
        digest: String,
        /// The agreed result has no rows.
        empty: bool,
        /// The agreed result has another number of columns than the gold's.
        other_columns: bool,
    },
    /// Every system misses the gold and no two agree.
    NoSystemMatches {
        /// Runs with an EX verdict on the item.
        of: usize,
    },
    /// FLEX's false-negative categorisation names `incorrect_ground_truth_query`.
    FlexIncorrectGroundTruth {
        /// The run.
        run: String,
        /// The judge's explanation.
        explanation: Option<String>,
    },
    /// ROSE's Refuter says the gold query is incorrect.
    RoseGoldIncorrect {
        /// The run.
        run: String,
    },
    /// `ts_ex` counterexamples hinge on a gold condition nobody asked for.
    TsExGoldSuspect {
        /// The runs whose `ts_ex` row says so.
        runs: Vec<String>,
        /// `unasked_literal` | `wider_aggregate`.
        suspect: String,
        /// Which condition, and why.
        reason: String,
    },
}

impl Evidence {
    /// Its contribution to the item's strength.
    pub fn weight(&self) -> f64 {
        match self {
            Evidence::GoldFails { .. } => GOLD_FAILS_WEIGHT,
            Evidence::ConsensusAgainstGold {
                runs,
                of,
                matching_gold,
                empty,
                other_columns,
                ..
            } => {
                let (k, m, n) = (runs.len(), matching_gold.len(), (*of).max(1));
                if *empty {
                    NO_MATCH_WEIGHT
                } else if m == 0 && *other_columns {
                    k as f64 / n as f64
                } else if m == 0 {
                    1.0 + k as f64 / n as f64
                } else {
                    k.saturating_sub(m) as f64 / n as f64
                }
            }
            Evidence::NoSystemMatches { .. } => NO_MATCH_WEIGHT,
            Evidence::FlexIncorrectGroundTruth { .. } | Evidence::RoseGoldIncorrect { .. } => {
                JUDGE_FLAG_WEIGHT
            }
            Evidence::TsExGoldSuspect { .. } => TS_EX_SUSPECT_WEIGHT,
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Evidence::GoldFails { runs, message } => {
                format!(
                    "gold fails to execute ({} run(s)): {}",
                    runs.len(),
                    truncate(message, 80)
                )
            }
            Evidence::ConsensusAgainstGold {
                runs,
                of,
                matching_gold,
                empty,
                other_columns,
                ..
            } => {
                let mut s = format!(
                    "{}/{} systems agree on {} ({})",
                    runs.len(),
                    of,
                    if *empty {
                        "an empty result"
                    } else {
                        "another result"
                    },
                    runs.join(", ")
                );
                if *other_columns {
                    s.push_str(", with another number of columns");
                }
                if !matching_gold.is_empty() {
                    let _ = write!(s, "; {} match the gold", matching_gold.len());
                }
                s
            }
            Evidence::NoSystemMatches { of } => format!("none of {of} systems matches the gold"),
            Evidence::FlexIncorrectGroundTruth { run, .. } => {
                format!("FLEX ({run}): incorrect ground truth")
            }
            Evidence::RoseGoldIncorrect { run } => format!("ROSE refuter ({run}): gold incorrect"),
            Evidence::TsExGoldSuspect { runs, reason, .. } => {
                format!("ts_ex ({}): {}", runs.join(", "), truncate(reason, 100))
            }
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// What people need to read an item (from the dataset and the predictions files, when given).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ItemText {
    /// Database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_id: Option<String>,
    /// The question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The benchmark's evidence (hint) text; `hint` in the JSONL, beside the audit's own
    /// `evidence`.
    #[serde(rename = "hint", skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The gold SQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold_sql: Option<String>,
}

/// One item whose gold query is suspect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuspectedItem {
    /// 1-based rank (strongest first).
    pub rank: usize,
    /// The item (`event_id`).
    pub event_id: String,
    /// Sum of the evidence weights.
    pub strength: f64,
    /// Level of the suspicion.
    pub level: Level,
    /// Whether the corrected EX leaves it out.
    pub suspected: bool,
    /// The evidence, strongest first.
    pub evidence: Vec<Evidence>,
    /// Question, evidence and gold SQL, when known.
    #[serde(flatten)]
    pub text: ItemText,
    /// Each run's predicted SQL, when known.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub predictions: BTreeMap<String, String>,
    /// Each run's EX verdict on the item.
    pub ex: BTreeMap<String, Option<bool>>,
}

/// A proportion with its count and 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportion {
    /// Successes.
    pub k: u64,
    /// Trials.
    pub n: u64,
    /// k / n (`None` when n = 0).
    pub mean: Option<f64>,
    /// 95% Wilson interval.
    pub interval: Option<(f64, f64)>,
}

impl Proportion {
    fn new(k: u64, n: u64) -> Proportion {
        Proportion {
            k,
            n,
            mean: (n > 0).then(|| k as f64 / n as f64),
            interval: wilson_interval(k, n),
        }
    }

    /// `0.713 [0.669, 0.754] n=432`.
    pub fn display(&self) -> String {
        match (self.mean, self.interval) {
            (Some(m), Some((lo, hi))) => format!("{m:.3} [{lo:.3}, {hi:.3}] n={}", self.n),
            _ => "— n=0".to_string(),
        }
    }
}

/// One system's EX, plain and with the suspected items left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemEx {
    /// The run.
    pub run_id: String,
    /// Items with an EX row.
    pub items: usize,
    /// EX rows without a verdict (gold_error, gold_unavailable, …): not scored.
    pub not_scored: usize,
    /// EX over scored items.
    pub plain: Proportion,
    /// EX over scored items that are not suspected.
    pub corrected: Proportion,
}

/// The audit of a set of runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoldAudit {
    /// The runs compared.
    pub runs: Vec<String>,
    /// Distinct items seen in their EX rows.
    pub items: usize,
    /// Items with any evidence, strongest first.
    pub items_with_evidence: Vec<SuspectedItem>,
    /// Per run.
    pub systems: Vec<SystemEx>,
}

/// What one run says about one item.
#[derive(Debug, Default, Clone)]
struct RunItem {
    ex: Option<bool>,
    ex_status: Option<String>,
    pred_digest: Option<String>,
    pred_rows: Option<u64>,
    other_columns: bool,
    gold_error: Option<String>,
    flex_gt: Option<Option<String>>,
    rose_gold_incorrect: bool,
    /// `ts_ex`'s `details.gold_suspect`: (kind, reason).
    ts_ex_suspect: Option<(String, String)>,
}

/// One run's EX over the audited items: plain, and corrected (the suspected items left out).
fn system_ex(
    run: &str,
    items: &BTreeMap<String, BTreeMap<String, RunItem>>,
    suspected: &BTreeSet<&str>,
) -> SystemEx {
    let (mut n_items, mut not_scored) = (0, 0);
    let (mut k, mut n, mut ck, mut cn) = (0u64, 0u64, 0u64, 0u64);
    for (event_id, by_run) in items {
        let Some(item) = by_run.get(run).filter(|i| i.ex_status.is_some()) else {
            continue;
        };
        n_items += 1;
        let Some(verdict) = item.ex else {
            not_scored += 1;
            continue;
        };
        n += 1;
        k += u64::from(verdict);
        if !suspected.contains(event_id.as_str()) {
            cn += 1;
            ck += u64::from(verdict);
        }
    }
    SystemEx {
        run_id: run.to_string(),
        items: n_items,
        not_scored,
        plain: Proportion::new(k, n),
        corrected: Proportion::new(ck, cn),
    }
}

impl RunItem {
    /// Take what one of the run's rows says about the item (EX's result, FLEX's and ROSE's
    /// doubts about the gold query, `ts_ex`'s suspect gold).
    fn observe(&mut self, row: &StoredRow) {
        let details = &row.details;
        match row.metric.known() {
            Some(Metric::Ex) => {
                self.ex = row.verdict;
                self.ex_status = Some(row.status.clone());
                self.pred_digest = details
                    .get("pred_digest")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.pred_rows = details.get("pred_rows").and_then(Value::as_u64);
                let columns = |k: &str| details.get(k).and_then(Value::as_u64);
                self.other_columns = columns("pred_columns")
                    .zip(columns("gold_columns"))
                    .is_some_and(|(p, g)| p != g);
                self.gold_error = (row.status == "gold_error").then(|| {
                    details
                        .pointer("/gold_error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("gold query failed")
                        .to_string()
                });
            }
            Some(Metric::Flex) => {
                let flagged = details
                    .get("fn_categories")
                    .and_then(Value::as_array)
                    .is_some_and(|c| c.iter().any(|k| k.as_str() == Some(INCORRECT_GROUND_TRUTH)));
                self.flex_gt = flagged.then(|| {
                    details
                        .pointer(&format!(
                            "/fn_category_explanations/{INCORRECT_GROUND_TRUTH}"
                        ))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                });
            }
            Some(Metric::TsEx) => {
                self.ts_ex_suspect = details.get("gold_suspect").map(|s| {
                    let text = |k: &str| {
                        s.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    (text("kind"), text("reason"))
                });
            }
            Some(Metric::Rose) => {
                self.rose_gold_incorrect = details
                    .get("gold_incorrect")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
            }
            _ => {}
        }
    }
}

impl GoldAudit {
    /// Audit `rows` (run id → its rows); `texts` and `predictions` ((run, item) → SQL) only
    /// decorate the output.
    pub fn build(
        rows: &BTreeMap<String, Vec<StoredRow>>,
        texts: &HashMap<String, ItemText>,
        predictions: &HashMap<(String, String), String>,
    ) -> GoldAudit {
        let runs: Vec<String> = rows.keys().cloned().collect();
        // item → run → what the run says (the last row of a kind wins, as FINAL would keep).
        let mut items: BTreeMap<String, BTreeMap<String, RunItem>> = BTreeMap::new();
        for (run, run_rows) in rows {
            for row in run_rows {
                let entry = items
                    .entry(row.event_id.clone())
                    .or_default()
                    .entry(run.clone())
                    .or_default();
                entry.observe(row);
            }
        }
        let mut listed = Vec::new();
        for (event_id, by_run) in &items {
            let evidence = item_evidence(by_run);
            let strength: f64 = evidence.iter().map(Evidence::weight).sum();
            let Some(level) = Level::of(strength) else {
                continue;
            };
            listed.push(SuspectedItem {
                rank: 0,
                event_id: event_id.clone(),
                strength,
                level,
                suspected: strength >= SUSPECTED_FROM,
                evidence,
                text: texts.get(event_id).cloned().unwrap_or_default(),
                predictions: runs
                    .iter()
                    .filter_map(|r| {
                        predictions
                            .get(&(r.clone(), event_id.clone()))
                            .map(|sql| (r.clone(), sql.clone()))
                    })
                    .collect(),
                ex: by_run
                    .iter()
                    .filter(|(_, i)| i.ex_status.is_some())
                    .map(|(r, i)| (r.clone(), i.ex))
                    .collect(),
            });
        }
        listed.sort_by(|a, b| {
            b.strength
                .total_cmp(&a.strength)
                .then_with(|| natural_cmp(&a.event_id, &b.event_id))
        });
        for (i, item) in listed.iter_mut().enumerate() {
            item.rank = i + 1;
        }
        let suspected: BTreeSet<&str> = listed
            .iter()
            .filter(|i| i.suspected)
            .map(|i| i.event_id.as_str())
            .collect();
        let systems = runs
            .iter()
            .map(|run| system_ex(run, &items, &suspected))
            .collect();
        GoldAudit {
            runs,
            items: items
                .values()
                .filter(|by_run| by_run.values().any(|i| i.ex_status.is_some()))
                .count(),
            items_with_evidence: listed,
            systems,
        }
    }

    /// Items left out of the corrected EX.
    pub fn suspected(&self) -> impl Iterator<Item = &SuspectedItem> {
        self.items_with_evidence.iter().filter(|i| i.suspected)
    }

    /// The terminal table: the `top` strongest items, then EX per system.
    pub fn terminal_summary(&self, top: usize) -> String {
        let mut out = String::new();
        let count = |l: Level| {
            self.items_with_evidence
                .iter()
                .filter(|i| i.level == l)
                .count()
        };
        let _ = writeln!(
            out,
            "Gold audit: {} runs ({}), {} items; suspected {} (strong {}, moderate {}), weak evidence on {} more",
            self.runs.len(),
            self.runs.join(", "),
            self.items,
            self.suspected().count(),
            count(Level::Strong),
            count(Level::Moderate),
            count(Level::Weak),
        );
        let _ = writeln!(
            out,
            "Suspicion is not proof: systems can agree on the same wrong answer and judges err; check each item.\n"
        );
        let _ = writeln!(
            out,
            "{:>4}  {:<10} {:<9} {:>8}  evidence",
            "rank", "item", "level", "strength"
        );
        for item in self.items_with_evidence.iter().take(top) {
            let evidence: Vec<String> = item.evidence.iter().map(Evidence::describe).collect();
            let _ = writeln!(
                out,
                "{:>4}  {:<10} {:<9} {:>8.2}  {}",
                item.rank,
                truncate(&item.event_id, 10),
                item.level.as_str(),
                item.strength,
                evidence.join("; ")
            );
            if let Some(q) = &item.text.question {
                let _ = writeln!(out, "{:>26}question: {}", "", truncate(q, 100));
            }
        }
        if self.items_with_evidence.len() > top {
            let _ = writeln!(
                out,
                "  … {} more (see the JSONL / HTML output)",
                self.items_with_evidence.len() - top
            );
        }
        let _ = writeln!(
            out,
            "\nEX per system over scored items (95% Wilson interval), plain and with the {} suspected items left out:",
            self.suspected().count()
        );
        let _ = writeln!(
            out,
            "{:<28} {:<32} {:<32} not scored",
            "run", "EX plain", "EX corrected"
        );
        for s in &self.systems {
            let _ = writeln!(
                out,
                "{:<28} {:<32} {:<32} {}",
                truncate(&s.run_id, 28),
                s.plain.display(),
                s.corrected.display(),
                s.not_scored
            );
        }
        out
    }

    /// One JSON line per item with evidence (for dataset maintainers).
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for item in &self.items_with_evidence {
            if let Ok(line) = serde_json::to_string(item) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }
}

/// The evidence of one item, strongest first.
fn item_evidence(by_run: &BTreeMap<String, RunItem>) -> Vec<Evidence> {
    let mut evidence = Vec::new();
    let failing: Vec<(&String, &String)> = by_run
        .iter()
        .filter_map(|(r, i)| i.gold_error.as_ref().map(|m| (r, m)))
        .collect();
    if let Some((_, message)) = failing.first() {
        evidence.push(Evidence::GoldFails {
            runs: failing.iter().map(|(r, _)| (*r).clone()).collect(),
            message: (*message).clone(),
        });
    }
    let judged: Vec<(&String, &RunItem)> = by_run.iter().filter(|(_, i)| i.ex.is_some()).collect();
    let matching_gold: Vec<String> = judged
        .iter()
        .filter(|(_, i)| i.ex == Some(true))
        .map(|(r, _)| (*r).clone())
        .collect();
    let mut by_digest: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut empty_digests: BTreeSet<&str> = BTreeSet::new();
    let mut other_columns: BTreeSet<&str> = BTreeSet::new();
    for (run, item) in &judged {
        if item.ex == Some(false)
            && item.ex_status.as_deref() == Some("ok")
            && let Some(d) = &item.pred_digest
        {
            by_digest
                .entry(d.as_str())
                .or_default()
                .push((*run).clone());
            if item.pred_rows == Some(0) {
                empty_digests.insert(d.as_str());
            }
            if item.other_columns {
                other_columns.insert(d.as_str());
            }
        }
    }
    let largest = by_digest
        .iter()
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| b.0.cmp(a.0)));
    match largest {
        Some((digest, agreeing)) if agreeing.len() >= 2 => {
            evidence.push(Evidence::ConsensusAgainstGold {
                runs: agreeing.clone(),
                of: judged.len(),
                matching_gold: matching_gold.clone(),
                digest: (*digest).to_string(),
                empty: empty_digests.contains(digest),
                other_columns: other_columns.contains(digest),
            });
        }
        _ if judged.len() >= 2 && matching_gold.is_empty() => {
            evidence.push(Evidence::NoSystemMatches { of: judged.len() });
        }
        _ => {}
    }
    for (run, item) in by_run {
        if let Some(explanation) = &item.flex_gt {
            evidence.push(Evidence::FlexIncorrectGroundTruth {
                run: run.clone(),
                explanation: explanation.clone(),
            });
        }
        if item.rose_gold_incorrect {
            evidence.push(Evidence::RoseGoldIncorrect { run: run.clone() });
        }
    }
    let suspects: Vec<(&String, &(String, String))> = by_run
        .iter()
        .filter_map(|(run, item)| item.ts_ex_suspect.as_ref().map(|s| (run, s)))
        .collect();
    if let Some((_, (suspect, reason))) = suspects.first() {
        evidence.push(Evidence::TsExGoldSuspect {
            runs: suspects.iter().map(|(run, _)| (*run).clone()).collect(),
            suspect: suspect.clone(),
            reason: reason.clone(),
        });
    }
    evidence.retain(|e| e.weight() > 0.0);
    evidence.sort_by(|a, b| b.weight().total_cmp(&a.weight()));
    evidence
}

/// Numeric ids in numeric order (`9` before `10`), others as text after them.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// Question, evidence and gold SQL per item from a benchmark dataset file (BIRD/Spider
/// `dev.jsonl`: `question_id`, `db_id`, `question`, `evidence`, `gold_sql`) or an events JSONL
/// file in the input contract (`event_id`, `question`, `gold.sql`, `gold.db_id`,
/// `gold.evidence`). Lines that are neither are skipped.
pub fn texts_from_file(path: &Path) -> Result<HashMap<String, ItemText>, ReportError> {
    let text = read(path)?;
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let s = |ptr: &str| v.pointer(ptr).and_then(Value::as_str).map(str::to_string);
        let id = match (v.get("question_id"), v.get("event_id")) {
            (Some(Value::Number(n)), _) => n.to_string(),
            (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.clone(),
            _ => continue,
        };
        out.insert(
            id,
            ItemText {
                db_id: s("/db_id").or_else(|| s("/gold/db_id")),
                question: s("/question"),
                evidence: s("/evidence")
                    .or_else(|| s("/gold/evidence"))
                    .filter(|e| !e.trim().is_empty()),
                gold_sql: s("/gold_sql")
                    .or_else(|| s("/query"))
                    .or_else(|| s("/gold/sql")),
            },
        );
    }
    Ok(out)
}

/// Predicted SQL per item from a predictions file (`question_id`, `predicted_sql`) or an events
/// JSONL file (`event_id`, `sql`).
pub fn predictions_from_file(path: &Path) -> Result<HashMap<String, String>, ReportError> {
    let text = read(path)?;
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let id = match (v.get("question_id"), v.get("event_id")) {
            (Some(Value::Number(n)), _) => n.to_string(),
            (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.clone(),
            _ => continue,
        };
        if let Some(sql) = v
            .get("predicted_sql")
            .or_else(|| v.get("sql"))
            .and_then(Value::as_str)
        {
            out.insert(id, sql.to_string());
        }
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String, ReportError> {
    std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(
        run: &str,
        id: &str,
        metric: &str,
        verdict: Option<bool>,
        status: &str,
        details: Value,
    ) -> StoredRow {
        serde_json::from_value(json!({
            "event_id": id, "run_id": run, "agent_id": run, "metric": metric,
            "value": if verdict == Some(true) { 1.0 } else { 0.0 },
            "verdict": verdict, "status": status, "details": details,
        }))
        .unwrap()
    }

    fn ex(run: &str, id: &str, verdict: bool, digest: &str) -> StoredRow {
        row(
            run,
            id,
            "ex",
            Some(verdict),
            "ok",
            json!({"pred_digest": digest, "gold_digest": "g"}),
        )
    }

    fn audit(rows: Vec<StoredRow>) -> GoldAudit {
        let mut by_run: BTreeMap<String, Vec<StoredRow>> = BTreeMap::new();
        for r in rows {
            by_run.entry(r.run_id.clone().unwrap()).or_default().push(r);
        }
        GoldAudit::build(&by_run, &HashMap::new(), &HashMap::new())
    }

    #[test]
    fn consensus_against_the_gold_is_suspected_and_leaves_the_corrected_ex() {
        let a = audit(vec![
            // Item 1: all three agree on "x", none matches the gold: strong.
            ex("A", "1", false, "x"),
            ex("B", "1", false, "x"),
            ex("C", "1", false, "x"),
            // Item 2: two agree, the third matches the gold: weak.
            ex("A", "2", false, "y"),
            ex("B", "2", false, "y"),
            ex("C", "2", true, "g"),
            // Item 3: every system matches: no evidence.
            ex("A", "3", true, "g"),
            ex("B", "3", true, "g"),
            ex("C", "3", true, "g"),
            // Item 4: all miss, all differ: weak.
            ex("A", "4", false, "p"),
            ex("B", "4", false, "q"),
            ex("C", "4", false, "r"),
            // Item 5: two of three agree, the third differs too: moderate.
            ex("A", "5", false, "s"),
            ex("B", "5", false, "s"),
            ex("C", "5", false, "t"),
        ]);
        assert_eq!(a.items, 5);
        let ids: Vec<(&str, Level)> = a
            .items_with_evidence
            .iter()
            .map(|i| (i.event_id.as_str(), i.level))
            .collect();
        assert_eq!(
            ids,
            vec![
                ("1", Level::Strong),
                ("5", Level::Moderate),
                ("2", Level::Weak),
                ("4", Level::Weak)
            ]
        );
        assert_eq!(a.items_with_evidence[0].strength, 2.0);
        assert!((a.items_with_evidence[1].strength - (1.0 + 2.0 / 3.0)).abs() < 1e-9);
        assert!((a.items_with_evidence[2].strength - 1.0 / 3.0).abs() < 1e-9);
        let c = a.systems.iter().find(|s| s.run_id == "C").unwrap();
        assert_eq!((c.plain.k, c.plain.n), (2, 5));
        assert_eq!(
            (c.corrected.k, c.corrected.n),
            (2, 3),
            "items 1 and 5 left out"
        );
        let jsonl = a.to_jsonl();
        assert_eq!(jsonl.lines().count(), 4);
        let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
        assert_eq!(first["evidence"][0]["kind"], "consensus_against_gold");
        assert_eq!(first["level"], "strong");
        assert_eq!(first["ex"]["A"], false);
    }

    #[test]
    fn ts_ex_gold_suspects_are_listed_once_as_weak_evidence() {
        let suspect = json!({"ts_verdict": "ex_fallback_gold_suspect", "gold_suspect": {
            "kind": "unasked_literal",
            "reason": "the gold filters T2.position = 'Member', a value neither the question nor the evidence names",
            "relaxed": "SELECT …"}});
        let a = audit(vec![
            ex("A", "1426", true, "g"),
            ex("B", "1426", true, "g"),
            row("A", "1426", "ts_ex", Some(true), "ok", suspect.clone()),
            row("B", "1426", "ts_ex", Some(true), "ok", suspect),
            row(
                "A",
                "9",
                "ts_ex",
                Some(true),
                "ok",
                json!({"ts_verdict": "equivalent_on_suite"}),
            ),
        ]);
        assert_eq!(a.items_with_evidence.len(), 1);
        let item = &a.items_with_evidence[0];
        assert_eq!((item.event_id.as_str(), item.level), ("1426", Level::Weak));
        assert!(!item.suspected, "listed, not left out of the corrected EX");
        assert_eq!(item.evidence.len(), 1);
        assert!(
            item.evidence[0]
                .describe()
                .starts_with("ts_ex (A, B): the gold filters T2.position"),
            "{}",
            item.evidence[0].describe()
        );
    }

    #[test]
    fn gold_failures_and_judge_flags_add_up() {
        let a = audit(vec![
            row(
                "A",
                "7",
                "ex",
                None,
                "gold_error",
                json!({"gold_error": {"kind": "sql", "message": "no such column: x"}}),
            ),
            row(
                "B",
                "7",
                "ex",
                None,
                "gold_error",
                json!({"gold_error": {"kind": "sql", "message": "no such column: x"}}),
            ),
            ex("A", "8", false, "u"),
            ex("B", "8", true, "g"),
            row(
                "A",
                "8",
                "flex",
                Some(true),
                "ok",
                json!({"fn_categories": ["incorrect_ground_truth_query"],
                "fn_category_explanations": {"incorrect_ground_truth_query": "gold filters the wrong year"}}),
            ),
            row(
                "A",
                "8",
                "rose",
                Some(true),
                "ok",
                json!({"gold_incorrect": true}),
            ),
            row(
                "B",
                "8",
                "rose",
                Some(true),
                "ok",
                json!({"gold_incorrect": false}),
            ),
        ]);
        let first = &a.items_with_evidence[0];
        assert_eq!((first.event_id.as_str(), first.level), ("7", Level::Strong));
        assert!(
            matches!(&first.evidence[0], Evidence::GoldFails { runs, message } if runs.len() == 2 && message.contains("no such column"))
        );
        let second = &a.items_with_evidence[1];
        assert_eq!(second.event_id, "8");
        assert_eq!(second.strength, 1.5);
        assert_eq!(second.level, Level::Moderate);
        assert!(second.evidence.iter().any(|e| matches!(e, Evidence::FlexIncorrectGroundTruth { explanation: Some(x), .. } if x.contains("wrong year"))));
        // Gold errors are not scored: EX counts them apart.
        let a_ex = a.systems.iter().find(|s| s.run_id == "A").unwrap();
        assert_eq!(
            (a_ex.items, a_ex.not_scored, a_ex.plain.n, a_ex.corrected.n),
            (2, 1, 1, 0)
        );
        let summary = a.terminal_summary(10);
        assert!(summary.contains("Suspicion is not proof"), "{summary}");
        assert!(summary.contains("gold fails to execute"), "{summary}");
    }

    #[test]
    fn agreeing_on_no_rows_is_weak_evidence() {
        let empty = |run: &str| {
            row(
                run,
                "9",
                "ex",
                Some(false),
                "ok",
                json!({"pred_digest": "e3b0", "pred_rows": 0}),
            )
        };
        let a = audit(vec![empty("A"), empty("B"), empty("C")]);
        let item = &a.items_with_evidence[0];
        assert_eq!((item.level, item.suspected), (Level::Weak, false));
        assert_eq!(item.strength, NO_MATCH_WEIGHT);
        assert!(
            item.evidence[0]
                .describe()
                .contains("agree on an empty result")
        );
    }

    #[test]
    fn agreeing_on_another_shape_is_weaker_than_on_other_rows() {
        let wide = |run: &str| {
            row(
                run,
                "3",
                "ex",
                Some(false),
                "ok",
                json!({"pred_digest": "w", "pred_rows": 4, "pred_columns": 2, "gold_columns": 1}),
            )
        };
        let a = audit(vec![wide("A"), wide("B"), wide("C")]);
        let item = &a.items_with_evidence[0];
        assert_eq!((item.level, item.strength), (Level::Moderate, 1.0));
        assert!(
            item.evidence[0]
                .describe()
                .contains("another number of columns")
        );
        let b = audit(vec![wide("A"), wide("B"), ex("C", "3", false, "z")]);
        assert_eq!(b.items_with_evidence[0].level, Level::Weak);
    }

    #[test]
    fn numeric_items_sort_numerically_on_ties() {
        let mut rows = Vec::new();
        for id in ["10", "9", "abc"] {
            for run in ["A", "B"] {
                rows.push(ex(run, id, false, "z"));
            }
        }
        let a = audit(rows);
        let ids: Vec<&str> = a
            .items_with_evidence
            .iter()
            .map(|i| i.event_id.as_str())
            .collect();
        assert_eq!(ids, vec!["9", "10", "abc"]);
    }
}
