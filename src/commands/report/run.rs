//! The run report itself: rows grouped by variant, their statistics, the paired comparisons
//! between variants and the terminal text (module documentation of `report`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::evaluation::{Metric, StoredMetric};
use crate::stores::StoredRow;

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No row has the run id.
    #[error("no evaluation rows with run_id {0:?}")]
    EmptyRun(String),
}

/// Φ histogram bins (0–10, 10–20, …, 90–100).
pub const PHI_BINS: usize = 10;

/// Tiers in display order.
pub const TIERS: [&str; 4] = crate::stef::QualityTier::NAMES;

/// One variant's numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VariantStats {
    /// Events (STEF rows).
    pub events: usize,
    /// Mean Φ over scored STEF rows.
    pub phi_mean: f64,
    /// Scored STEF rows (the Φ mean's and histogram's count).
    pub phi_scored: usize,
    /// Φ histogram (counts per 10-point bin).
    pub phi_histogram: [usize; PHI_BINS],
    /// Rows per quality tier.
    pub tiers: BTreeMap<String, usize>,
    /// Mean value over *scored* rows and their count per metric (gold metrics 0–1; `stef`
    /// scaled to 0–1); rows that are not scored (`gold_parse_error`, `judge_error`, …) never
    /// enter a mean ([`crate::evaluation::RowStatus::is_scored`]).
    pub metrics: BTreeMap<StoredMetric, (f64, usize)>,
    /// Scored values per metric (for the interval), same scale as `metrics`.
    pub moments: BTreeMap<StoredMetric, crate::sampling::Moments>,
    /// Rows per metric, scored or not (coverage = scored / rows).
    pub rows: BTreeMap<StoredMetric, usize>,
    /// Metrics with a value other than 0 or 1 (their interval is the normal one, not Wilson's).
    pub continuous: std::collections::BTreeSet<StoredMetric>,
    /// Rows per status (all metrics).
    pub statuses: BTreeMap<String, usize>,
    /// The calibrated estimate of the LLM judge over all scored events (runs with an LLM
    /// judge; empty otherwise).
    pub estimate: crate::sampling::SeriesEstimate,
    /// Line-rate STEF rows per finding code that fired on them (errors and warnings; the
    /// result checks' codes among them), each row counted once per code.
    pub findings: BTreeMap<String, usize>,
}

/// (variant, metric) → event → (scaled value, verdict) of its scored row.
type ScoredByEvent = BTreeMap<(String, StoredMetric), HashMap<String, (f64, Option<bool>)>>;

/// Every two variants, every metric both scored on common items: the paired test.
fn compare(variants: &BTreeMap<String, VariantStats>, scored: &ScoredByEvent) -> Vec<Comparison> {
    let names: Vec<&String> = variants.keys().collect();
    let mut out = Vec::new();
    for (i, a) in names.iter().enumerate() {
        for b in names.iter().skip(i + 1) {
            let metrics: std::collections::BTreeSet<&StoredMetric> = scored
                .keys()
                .filter(|(v, _)| v == *a)
                .map(|(_, m)| m)
                .collect();
            for metric in metrics {
                let (Some(xa), Some(xb)) = (
                    scored.get(&((*a).clone(), metric.clone())),
                    scored.get(&((*b).clone(), metric.clone())),
                ) else {
                    continue;
                };
                let mut values = Vec::new();
                let mut verdicts = Vec::new();
                for (event, (va, da)) in xa {
                    if let Some((vb, db)) = xb.get(event) {
                        values.push((*va, *vb));
                        if let (Some(da), Some(db)) = (da, db) {
                            verdicts.push((*da, *db));
                        }
                    }
                }
                if values.is_empty() {
                    continue;
                }
                let continuous = variants
                    .get(*a)
                    .is_some_and(|v| v.continuous.contains(metric))
                    || variants
                        .get(*b)
                        .is_some_and(|v| v.continuous.contains(metric));
                let test = if continuous || verdicts.is_empty() {
                    super::paired::wilcoxon(&values)
                } else {
                    super::paired::mcnemar(&verdicts)
                };
                let n = values.len() as f64;
                out.push(Comparison {
                    a: (*a).clone(),
                    b: (*b).clone(),
                    metric: metric.clone(),
                    mean_a: values.iter().map(|(x, _)| x).sum::<f64>() / n,
                    mean_b: values.iter().map(|(_, y)| y).sum::<f64>() / n,
                    test,
                });
            }
        }
    }
    out
}

impl Comparison {
    /// `A 0.713 vs B 0.634 on 432 items (Δ +0.079): McNemar exact p = 0.0004 (A only 52, B only 18)`.
    pub fn describe(&self) -> String {
        let (better_a, better_b) = if self.test.test == "mcnemar_exact" {
            ("right for A only", "right for B only")
        } else {
            ("A higher", "B higher")
        };
        format!(
            "{:.3} vs {:.3} on {} items (Δ {:+.3}): {} p = {} ({better_a} {}, {better_b} {})",
            self.mean_a,
            self.mean_b,
            self.test.pairs,
            self.mean_a - self.mean_b,
            if self.test.test == "mcnemar_exact" {
                "McNemar exact"
            } else {
                "Wilcoxon signed-rank"
            },
            format_p(self.test.p_value),
            self.test.a_better,
            self.test.b_better
        )
    }
}

/// A p-value for people: 4 significant digits, `< 0.0001` below that.
pub fn format_p(p: f64) -> String {
    if p < 1e-4 {
        "< 0.0001".to_string()
    } else {
        format!("{p:.4}")
    }
}

impl VariantStats {
    /// The mean of `metric` over scored rows with its 95% interval (Wilson's for 0/1 metrics,
    /// the normal one otherwise; `stef` scaled to 0–1).
    pub fn interval(&self, metric: &str) -> Option<(f64, Option<(f64, f64)>)> {
        let m = self.moments.get(metric)?;
        let mean = m.mean()?;
        let interval = if self.continuous.contains(metric) {
            m.variance().map(|var| {
                let half = crate::sampling::estimate::Z_95 * (var / m.n as f64).sqrt();
                (mean - half, mean + half)
            })
        } else {
            crate::sampling::estimate::wilson_interval(m.sum.round() as u64, m.n)
        };
        Some((mean, interval))
    }

    /// `0.671 [0.626, 0.714]  scored 432/432 (100.0%)` for one metric (`None` without rows).
    pub fn metric_line(&self, metric: &str) -> Option<String> {
        let rows = *self.rows.get(metric)?;
        let scored = self.moments.get(metric).map_or(0, |m| m.n);
        let coverage = format!(
            "scored {scored}/{rows} ({:.1}%)",
            100.0 * scored as f64 / rows.max(1) as f64
        );
        Some(match self.interval(metric) {
            Some((mean, Some((lo, hi)))) => format!("{mean:.3} [{lo:.3}, {hi:.3}]  {coverage}"),
            Some((mean, None)) => format!("{mean:.3} [n<2]  {coverage}"),
            None => format!("—  {coverage}"),
        })
    }
}

/// An event where EX and FLEX or ROSE disagree, or where EX = 1 and `ts_ex` found a database
/// on which the two queries differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    /// Event id.
    pub event_id: String,
    /// Variant.
    pub variant: String,
    /// EX verdict.
    pub ex: bool,
    /// The disagreeing metric (`flex`, `rose` or `ts_ex`).
    pub other_metric: Metric,
    /// Its verdict.
    pub other: bool,
    /// Predicted SQL (from the row details, or the events file).
    pub sql: Option<String>,
    /// Gold SQL (from the row details, or the events file).
    pub gold_sql: Option<String>,
    /// For `ts_ex`: the counterexample (its INSERT script and both results), for people.
    pub counterexample: Option<String>,
}

/// Two variants compared on the items both scored (same `event_id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// First variant.
    pub a: String,
    /// Second variant.
    pub b: String,
    /// Metric.
    pub metric: StoredMetric,
    /// A's mean over the paired items (same scale as [`VariantStats::metrics`]).
    pub mean_a: f64,
    /// B's mean over the paired items.
    pub mean_b: f64,
    /// The paired test (McNemar for verdicts, Wilcoxon for continuous values).
    pub test: super::paired::PairedTest,
}

/// Everything the terminal and HTML views show.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    /// The run.
    pub run_id: String,
    /// Rows read.
    pub rows: usize,
    /// Per variant.
    pub variants: BTreeMap<String, VariantStats>,
    /// EX vs FLEX/ROSE disagreements, and EX = 1 items a `ts_ex` counterexample refutes.
    pub disagreements: Vec<Disagreement>,
    /// Paired comparisons of every two variants on the items both scored.
    pub comparisons: Vec<Comparison>,
}

/// SQL texts of an event, for the disagreement listing.
#[derive(Debug, Clone, Default)]
pub struct EventSql {
    /// Predicted SQL.
    pub sql: Option<String>,
    /// Gold SQL.
    pub gold_sql: Option<String>,
}

/// SQL per event id from an events JSONL file (the input of the run).
pub fn sql_from_events(path: &Path) -> Result<HashMap<String, EventSql>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = HashMap::new();
    for line in text.lines() {
        let Ok(event) = crate::event::Event::decode(line.as_bytes()) else {
            continue;
        };
        out.insert(
            event.event_id.clone(),
            EventSql {
                sql: Some(event.sql.clone()),
                gold_sql: event.gold.as_ref().and_then(|g| g.sql.clone()),
            },
        );
    }
    Ok(out)
}

impl RunReport {
    /// Aggregate `rows` of `run_id`; `sql` supplies SQL texts the rows do not carry.
    pub fn build(
        run_id: &str,
        rows: &[StoredRow],
        sql: &HashMap<String, EventSql>,
    ) -> Result<RunReport, ReportError> {
        if rows.is_empty() {
            return Err(ReportError::EmptyRun(run_id.to_string()));
        }
        let mut variants: BTreeMap<String, VariantStats> = BTreeMap::new();
        // (event, variant) → metric → verdict, and any SQL found in details.
        let mut verdicts: BTreeMap<(String, String), BTreeMap<StoredMetric, bool>> =
            BTreeMap::new();
        let mut detail_sql: HashMap<String, EventSql> = HashMap::new();
        // (event, variant) → the ts_ex counterexample, rendered.
        let mut counterexamples: HashMap<(String, String), String> = HashMap::new();
        // (variant, metric) → event → (scaled value, verdict) of its scored row.
        let mut scored_by_event: ScoredByEvent = BTreeMap::new();
        for row in rows {
            let variant = row.variant();
            let stats = variants.entry(variant.clone()).or_default();
            *stats.statuses.entry(row.status.clone()).or_default() += 1;
            let scaled = if row.metric == Metric::Stef || row.metric == Metric::StefJudged {
                row.value / 100.0
            } else {
                row.value
            };
            let correct = |v: &Option<String>| {
                v.as_deref()
                    .is_some_and(crate::sampling::select::verdict_is_correct)
            };
            match row.metric.known() {
                Some(Metric::Stef) if matches!(row.status.as_str(), "ok" | "judge_fallback") => {
                    stats.estimate.observe_line(row.value, row.line_rate_p())
                }
                Some(Metric::StefJudged)
                    if row.status == "ok" && row.inclusion_probability.is_some() =>
                {
                    if let Some(line) = row.revised_value {
                        stats.estimate.observe_judged(
                            row.value,
                            correct(&row.semantic_verdict),
                            line,
                            row.revised_line_p(),
                        );
                    }
                }
                _ => {}
            }
            let scored = crate::evaluation::RowStatus::name_is_scored(&row.status);
            *stats.rows.entry(row.metric.clone()).or_default() += 1;
            if scored {
                scored_by_event
                    .entry((variant.clone(), row.metric.clone()))
                    .or_default()
                    .insert(row.event_id.clone(), (scaled, row.verdict));
                let entry = stats.metrics.entry(row.metric.clone()).or_insert((0.0, 0));
                entry.0 += scaled;
                entry.1 += 1;
                stats
                    .moments
                    .entry(row.metric.clone())
                    .or_default()
                    .add(scaled);
                if scaled != 0.0 && scaled != 1.0 {
                    stats.continuous.insert(row.metric.clone());
                }
            }
            if row.metric == Metric::Stef {
                stats.events += 1;
                let details = &row.details;
                let mut codes: Vec<&str> = details
                    .get("findings")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|f| f.get("severity").and_then(Value::as_str) != Some("info"))
                    .filter_map(|f| f.get("code").and_then(Value::as_str))
                    .collect();
                codes.sort_unstable();
                codes.dedup();
                for code in codes {
                    *stats.findings.entry(code.to_string()).or_default() += 1;
                }
            }
            if row.metric == Metric::Stef && scored {
                stats.phi_scored += 1;
                stats.phi_mean += row.value;
                let bin = ((row.value / 10.0).floor().max(0.0) as usize).min(PHI_BINS - 1);
                if let Some(slot) = stats.phi_histogram.get_mut(bin) {
                    *slot += 1;
                }
            }
            if row.metric == Metric::Stef
                && let Some(tier) = &row.quality_tier
            {
                *stats.tiers.entry(tier.clone()).or_default() += 1;
            }
            if let Some(verdict) = row.verdict {
                verdicts
                    .entry((row.event_id.clone(), variant.clone()))
                    .or_default()
                    .insert(row.metric.clone(), verdict);
            }
            let details = &row.details;
            if row.metric == Metric::TsEx
                && let Some(cx) = details.get("counterexample").filter(|c| !c.is_null())
            {
                counterexamples.insert(
                    (row.event_id.clone(), variant.clone()),
                    render_counterexample(cx),
                );
            }
            let text = |keys: &[&str]| {
                keys.iter()
                    .find_map(|k| details.get(*k).and_then(Value::as_str).map(str::to_string))
            };
            let found = EventSql {
                sql: text(&["predicted_sql", "sql"]),
                gold_sql: text(&["gold_sql"]),
            };
            if found.sql.is_some() || found.gold_sql.is_some() {
                detail_sql.insert(row.event_id.clone(), found);
            }
        }
        for stats in variants.values_mut() {
            if stats.phi_scored > 0 {
                stats.phi_mean /= stats.phi_scored as f64;
            }
            for (sum, n) in stats.metrics.values_mut() {
                if *n > 0 {
                    *sum /= *n as f64;
                }
            }
        }
        let mut disagreements = Vec::new();
        for ((event_id, variant), by_metric) in &verdicts {
            let Some(&ex) = by_metric.get(Metric::Ex.as_str()) else {
                continue;
            };
            for other_metric in [Metric::Flex, Metric::Rose, Metric::TsEx] {
                if let Some(&other) = by_metric.get(other_metric.as_str())
                    && other != ex
                    // ts_ex: only EX = 1 items a counterexample refutes (not EX = 0 ones, and
                    // not those the real database already refutes).
                    && (other_metric != Metric::TsEx
                        || (ex && counterexamples.contains_key(&(event_id.clone(), variant.clone()))))
                {
                    let texts = detail_sql.get(event_id).or_else(|| sql.get(event_id));
                    disagreements.push(Disagreement {
                        event_id: event_id.clone(),
                        variant: variant.clone(),
                        ex,
                        other_metric,
                        other,
                        sql: texts.and_then(|t| t.sql.clone()),
                        gold_sql: texts.and_then(|t| t.gold_sql.clone()),
                        counterexample: (other_metric == Metric::TsEx)
                            .then(|| {
                                counterexamples
                                    .get(&(event_id.clone(), variant.clone()))
                                    .cloned()
                            })
                            .flatten(),
                    });
                }
            }
        }
        let comparisons = compare(&variants, &scored_by_event);
        Ok(RunReport {
            run_id: run_id.to_string(),
            rows: rows.len(),
            variants,
            disagreements,
            comparisons,
        })
    }

    /// The terminal summary.
    pub fn terminal_summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "sqlgrade report — run {} ({} rows)",
            self.run_id, self.rows
        );
        let metrics: Vec<StoredMetric> = {
            let mut all: Vec<StoredMetric> = self
                .variants
                .values()
                .flat_map(|v| v.metrics.keys().cloned())
                .collect();
            all.sort();
            all.dedup();
            all
        };
        let _ = write!(out, "{:<28} {:>7} {:>7}", "variant", "events", "Φ mean");
        for tier in TIERS {
            let _ = write!(out, " {:>9}", tier);
        }
        for m in &metrics {
            if *m != Metric::Stef {
                let _ = write!(out, " {:>9}", m);
            }
        }
        out.push('\n');
        for (name, v) in &self.variants {
            let _ = write!(
                out,
                "{:<28} {:>7} {:>7.1}",
                truncate(name, 28),
                v.events,
                v.phi_mean
            );
            for tier in TIERS {
                let share = share(v.tiers.get(tier).copied().unwrap_or(0), v.events);
                let _ = write!(out, " {:>8.1}%", share * 100.0);
            }
            for m in &metrics {
                if *m == Metric::Stef {
                    continue;
                }
                match v.metrics.get(m) {
                    Some((mean, _)) => {
                        let _ = write!(out, " {:>9.3}", mean);
                    }
                    None => {
                        let _ = write!(out, " {:>9}", "—");
                    }
                }
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "Means over scored rows, 95% interval (Wilson for verdict metrics), coverage = scored / rows:"
        );
        for (name, v) in &self.variants {
            for m in &metrics {
                if let Some(line) = v.metric_line(m.as_str()) {
                    let _ = writeln!(out, "  {:<28} {:<10} {line}", truncate(name, 28), m);
                }
            }
        }
        self.write_findings_estimates_and_comparisons(&mut out);
        self.write_disagreements(&mut out);
        out
    }

    /// The terminal summary's STEF findings per variant, the judge's calibrated estimates and
    /// the paired comparisons.
    fn write_findings_estimates_and_comparisons(&self, out: &mut String) {
        if self.variants.values().any(|v| !v.findings.is_empty()) {
            let _ = writeln!(
                out,
                "STEF findings (line-rate rows that raised each code, errors and warnings):"
            );
            for (name, v) in &self.variants {
                if v.findings.is_empty() {
                    continue;
                }
                let listed: Vec<String> = v
                    .findings
                    .iter()
                    .map(|(code, n)| format!("{code} {n} ({:.1}%)", share(*n, v.events) * 100.0))
                    .collect();
                let _ = writeln!(out, "  {:<28} {}", truncate(name, 28), listed.join(", "));
            }
        }
        let estimated: Vec<(&String, crate::sampling::Estimate)> = self
            .variants
            .iter()
            .filter_map(|(name, v)| Some((name, v.estimate.phi()?)))
            .collect();
        if !estimated.is_empty() {
            let _ = writeln!(
                out,
                "LLM judge over all scored events (calibrated, PPI; 95% interval; n = judged \
                 uniform slice):"
            );
            for (name, e) in estimated {
                let interval = match (e.lower, e.upper) {
                    (Some(lo), Some(hi)) => format!("[{lo:.2}, {hi:.2}]"),
                    _ => "[n<2]".into(),
                };
                let _ = writeln!(
                    out,
                    "  {:<28} line-rate Φ {:>6.2}  estimated Φ {:>6.2} {interval}  n {}",
                    truncate(name, 28),
                    e.line_rate_mean,
                    e.mean,
                    e.judged
                );
            }
        }
        if !self.comparisons.is_empty() {
            let _ = writeln!(
                out,
                "Paired comparisons on the items both variants scored (McNemar exact for verdicts, \
                 Wilcoxon signed-rank for continuous values; two-sided p):"
            );
            for c in &self.comparisons {
                let _ = writeln!(
                    out,
                    "  A = {} vs B = {}  {:<10} {}",
                    truncate(&c.a, 24),
                    truncate(&c.b, 24),
                    c.metric,
                    c.describe()
                );
            }
        }
    }

    /// The terminal summary's EX disagreements, and the first `ts_ex` counterexamples that
    /// refute an EX = 1.
    fn write_disagreements(&self, out: &mut String) {
        let refuted = self
            .disagreements
            .iter()
            .filter(|d| d.other_metric == Metric::TsEx)
            .count();
        let _ = writeln!(
            out,
            "EX vs FLEX/ROSE disagreements: {}",
            self.disagreements.len() - refuted
        );
        if refuted > 0 {
            let _ = writeln!(out, "EX = 1 refuted by a ts_ex counterexample: {refuted}");
            for d in self
                .disagreements
                .iter()
                .filter(|d| d.other_metric == Metric::TsEx)
                .take(5)
            {
                // The size line and both results; the script is in the HTML report.
                let cx = d.counterexample.as_deref().unwrap_or("");
                let size = cx.lines().next().unwrap_or("").trim_start_matches("-- ");
                let results: Vec<&str> = cx
                    .lines()
                    .filter(|l| l.starts_with("-- gold:") || l.starts_with("-- pred:"))
                    .map(|l| l.trim_start_matches("-- "))
                    .collect();
                let _ = writeln!(
                    out,
                    "  {} ({}): {}; {}",
                    d.event_id,
                    d.variant,
                    size,
                    results.join("; ")
                );
            }
        }
    }
}

/// A counterexample from a `ts_ex` row's details, as text: the script, then both results.
fn render_counterexample(cx: &Value) -> String {
    let mut out = String::new();
    let rows = cx.get("rows").and_then(Value::as_u64).unwrap_or(0);
    let _ = writeln!(
        out,
        "-- a database with {rows} rows on which the results differ"
    );
    out.push_str(cx.get("script").and_then(Value::as_str).unwrap_or(""));
    let result = |v: Option<&Value>| -> String {
        match v {
            Some(Value::Object(m)) if m.contains_key("Err") => {
                format!("error: {}", m["Err"].as_str().unwrap_or(""))
            }
            Some(Value::Object(m)) if m.contains_key("Ok") => result_text(&m["Ok"]),
            Some(other) => result_text(other),
            None => String::new(),
        }
    };
    let _ = writeln!(out, "-- gold: {}", result(cx.get("gold")));
    let _ = writeln!(out, "-- pred: {}", result(cx.get("pred")));
    // What the database keeps (constrained suites) or breaks (strict ones).
    for (key, label) in [("assumed", "assumes"), ("violates", "breaks")] {
        let listed: Vec<&str> = cx
            .get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !listed.is_empty() {
            let _ = writeln!(out, "-- {label}: {}", listed.join("; "));
        }
    }
    out
}

fn result_text(v: &Value) -> String {
    let rows: Vec<String> = v
        .get("rows")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let cells: Vec<String> = r
                        .as_array()
                        .map(|c| {
                            c.iter()
                                .map(|x| x.as_str().unwrap_or("").to_string())
                                .collect()
                        })
                        .unwrap_or_default();
                    format!("({})", cells.join(", "))
                })
                .collect()
        })
        .unwrap_or_default();
    let count = v.get("row_count").and_then(Value::as_u64).unwrap_or(0);
    format!("{count} rows {}", rows.join(" "))
}

pub(super) fn share(count: usize, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        count as f64 / total as f64
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> StoredRow {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn ex_and_judge_disagreements_are_joined_per_event() {
        let rows = vec![
            parse(
                r#"{"event_id":"1","agent_id":"sys","run_id":"r","metric":"ex","value":1.0,"verdict":true,"status":"ok","details":{}}"#,
            ),
            parse(
                r#"{"event_id":"1","agent_id":"sys","run_id":"r","metric":"flex","value":0.0,"verdict":false,"status":"ok","details":{}}"#,
            ),
            parse(
                r#"{"event_id":"2","agent_id":"sys","run_id":"r","metric":"ex","value":1.0,"verdict":1,"status":"ok","details":"{}"}"#,
            ),
            parse(
                r#"{"event_id":"2","agent_id":"sys","run_id":"r","metric":"rose","value":1.0,"verdict":1,"status":"ok","details":"{}"}"#,
            ),
        ];
        let mut sql = HashMap::new();
        sql.insert(
            "1".to_string(),
            EventSql {
                sql: Some("SELECT a FROM t".into()),
                gold_sql: Some("SELECT b FROM t".into()),
            },
        );
        let report = RunReport::build("r", &rows, &sql).unwrap();
        assert_eq!(report.disagreements.len(), 1);
        let d = &report.disagreements[0];
        assert_eq!((d.event_id.as_str(), d.ex, d.other), ("1", true, false));
        assert_eq!(d.other_metric.as_str(), "flex");
        assert_eq!(d.sql.as_deref(), Some("SELECT a FROM t"));
        let page = super::super::html::render(&report);
        assert!(page.contains("SELECT a FROM t"));
        assert!(page.contains(
            "EX vs FLEX/ROSE disagreements, and EX matches refuted by a counterexample (1)"
        ));
    }

    #[test]
    fn ex_matches_refuted_by_a_counterexample_are_listed_with_it() {
        let cx = serde_json::json!({
            "script": "INSERT INTO \"t\" (\"a\") VALUES (NULL);\n",
            "truncated": false,
            "rows": 1,
            "gold": {"columns": ["n"], "rows": [["0"]], "row_count": 1},
            "pred": {"Ok": {"columns": ["n"], "rows": [["1"]], "row_count": 1}},
            "assumed": ["t.id NOT NULL (declared)", "t.a IN (1, 2) (observed)"],
            "violates": [],
        });
        let refuted = serde_json::json!({
            "event_id": "1", "agent_id": "sys", "run_id": "r", "metric": "ts_ex", "value": 0.0,
            "verdict": false, "status": "ok", "details": {"counterexample": cx},
        });
        let rows = vec![
            parse(
                r#"{"event_id":"1","agent_id":"sys","run_id":"r","metric":"ex","value":1.0,"verdict":true,"status":"ok","details":{}}"#,
            ),
            parse(&refuted.to_string()),
            // EX = 0 and ts_ex = 0: not a refutation.
            parse(
                r#"{"event_id":"2","agent_id":"sys","run_id":"r","metric":"ex","value":0.0,"verdict":false,"status":"ok","details":{}}"#,
            ),
            parse(
                r#"{"event_id":"2","agent_id":"sys","run_id":"r","metric":"ts_ex","value":0.0,"verdict":false,"status":"ok","details":{"differs_on":"real"}}"#,
            ),
        ];
        let report = RunReport::build("r", &rows, &HashMap::new()).unwrap();
        assert_eq!(report.disagreements.len(), 1);
        let d = &report.disagreements[0];
        assert_eq!(
            (d.other_metric.as_str(), d.ex, d.other),
            ("ts_ex", true, false)
        );
        let cx = d.counterexample.as_deref().unwrap();
        assert!(
            cx.contains("VALUES (NULL)")
                && cx.contains("-- gold: 1 rows (0)")
                && cx.contains("-- pred: 1 rows (1)")
                && cx.contains("-- assumes: t.id NOT NULL (declared); t.a IN (1, 2) (observed)")
                && !cx.contains("-- breaks"),
            "{cx}"
        );
        let text = report.terminal_summary();
        assert!(
            text.contains("EX = 1 refuted by a ts_ex counterexample: 1"),
            "{text}"
        );
        let page = super::super::html::render(&report);
        assert!(page.contains("VALUES (NULL)"));
    }

    #[test]
    fn findings_are_counted_per_variant_once_per_row() {
        let rows = vec![
            parse(
                r#"{"event_id":"1","agent_id":"a","run_id":"r","metric":"stef","value":50,"status":"ok","details":{"findings":[{"code":"empty_result","severity":"warning"},{"code":"empty_result","severity":"warning"},{"code":"count_fan_out","severity":"info"}]}}"#,
            ),
            parse(
                r#"{"event_id":"2","agent_id":"a","run_id":"r","metric":"stef","value":0,"status":"ok","details":"{\"findings\":[{\"code\":\"query_fails\",\"severity\":\"error\"}]}"}"#,
            ),
            parse(
                r#"{"event_id":"3","agent_id":"a","run_id":"r","metric":"stef","value":90,"status":"ok","details":{}}"#,
            ),
        ];
        let report = RunReport::build("r", &rows, &HashMap::new()).unwrap();
        let v = report.variants.values().next().unwrap();
        let counted: Vec<(&str, usize)> =
            v.findings.iter().map(|(c, n)| (c.as_str(), *n)).collect();
        assert_eq!(counted, [("empty_result", 1), ("query_fails", 1)]);
        let text = report.terminal_summary();
        assert!(
            text.contains("empty_result 1 (33.3%), query_fails 1 (33.3%)"),
            "{text}"
        );
        let page = super::super::html::render(&report);
        assert!(
            page.contains("<table id=\"findings\">") && page.contains("<code>query_fails</code>")
        );
    }

    #[test]
    fn html_escapes_untrusted_text() {
        assert_eq!(
            super::super::html::escape("<b>\"x\" & 'y'"),
            "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn empty_run_is_an_error() {
        assert!(matches!(
            RunReport::build("nope", &[], &HashMap::new()),
            Err(ReportError::EmptyRun(_))
        ));
    }
}
