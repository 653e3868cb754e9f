//! Run summary: what a `run` or `backfill` wrote, printed as a table at the end.
//!
//! Memory stays constant however long the daemon runs: Φ goes into a fixed histogram at the
//! 0.01 resolution Φ is rounded to, so mean, P50 and P90 are exact. LLM usage ([`LlmUsage`]:
//! each client's totals, and per LLM-judged gold metric the judge calls, cache hits and avoided
//! calls) is taken from the scorer when the run ends.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::evaluation::{DeadLetter, EvaluationRow, Metric};
use crate::judge::JudgeTotals;
use crate::metrics::avoid::MetricCalls;

/// Φ buckets: 0.00 … 100.00 in steps of 0.01.
const PHI_BUCKETS: usize = 10_001;

/// Statistics of the STEF rows.
#[derive(Debug, Clone, PartialEq)]
pub struct StefStats {
    /// STEF rows seen.
    pub count: u64,
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
}

impl Default for StefStats {
    fn default() -> Self {
        StefStats {
            count: 0,
            sum: 0.0,
            histogram: vec![0; PHI_BUCKETS],
            tiers: BTreeMap::new(),
            filter_statuses: BTreeMap::new(),
            verdicts: BTreeMap::new(),
            statuses: BTreeMap::new(),
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
        self.sum += phi;
        let bucket = ((phi * 100.0).round() as usize).min(PHI_BUCKETS - 1);
        if let Some(slot) = self.histogram.get_mut(bucket) {
            *slot += 1;
        }
        *self.statuses.entry(row.status.as_str().into()).or_default() += 1;
        if let Some(stef) = &row.stef {
            *self.tiers.entry(stef.quality_tier.clone()).or_default() += 1;
            *self
                .filter_statuses
                .entry(stef.filter_status.clone())
                .or_default() += 1;
            *self
                .verdicts
                .entry(stef.semantic_verdict.clone())
                .or_default() += 1;
        }
    }

    /// Mean Φ (`None` without rows).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// Nearest-rank percentile of Φ, `p` in (0, 100] (`None` without rows).
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
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

/// Statistics of one non-STEF metric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricStats {
    /// Rows.
    pub count: u64,
    sum: f64,
    /// Rows with a verdict.
    pub verdicts: u64,
    /// Rows whose verdict is true.
    pub verdicts_true: u64,
    /// Rows per row status.
    pub statuses: BTreeMap<String, u64>,
    /// (rows, sum of values) per benchmark difficulty / hardness (`details.difficulty`, else
    /// `details.hardness`).
    pub by_difficulty: BTreeMap<String, (u64, f64)>,
}

impl MetricStats {
    /// Mean value (`None` without rows).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// Φ per agent label (`agent_id agent_version model`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupStats {
    /// STEF rows.
    pub count: u64,
    sum: f64,
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
                    totals: totals_since(&c.totals, &earlier),
                    ..c.clone()
                }
            })
            .collect();
        let judged = self
            .judged
            .iter()
            .map(|(m, c)| {
                let earlier = before.judged.get(m).cloned().unwrap_or_default();
                (*m, calls_since(c, &earlier))
            })
            .collect();
        LlmUsage { clients, judged }
    }
}

fn totals_since(now: &JudgeTotals, before: &JudgeTotals) -> JudgeTotals {
    JudgeTotals {
        assessments: now.assessments.saturating_sub(before.assessments),
        cache_hits: now.cache_hits.saturating_sub(before.cache_hits),
        durable_hits: now.durable_hits.saturating_sub(before.durable_hits),
        llm_calls: now.llm_calls.saturating_sub(before.llm_calls),
        http_requests: now.http_requests.saturating_sub(before.http_requests),
        retries: now.retries.saturating_sub(before.retries),
        repairs: now.repairs.saturating_sub(before.repairs),
        prompt_tokens: now.prompt_tokens.saturating_sub(before.prompt_tokens),
        completion_tokens: now
            .completion_tokens
            .saturating_sub(before.completion_tokens),
        failures: now.failures.saturating_sub(before.failures),
    }
}

fn calls_since(now: &MetricCalls, before: &MetricCalls) -> MetricCalls {
    MetricCalls {
        events: now.events.saturating_sub(before.events),
        llm_calls: now.llm_calls.saturating_sub(before.llm_calls),
        cache_hits: now.cache_hits.saturating_sub(before.cache_hits),
        avoided: now
            .avoided
            .iter()
            .map(|(why, n)| {
                (
                    *why,
                    n.saturating_sub(before.avoided.get(why).copied().unwrap_or(0)),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect(),
    }
}

/// Everything a run wrote (counted when the sink accepted it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
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
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

impl Summary {
    /// Count one row.
    pub fn observe_row(&mut self, row: &EvaluationRow) {
        self.rows += 1;
        if row.metric == Metric::Stef {
            self.stef.observe(row);
            let label = agent_label(row);
            let group = self.by_agent.entry(label).or_default();
            group.count += 1;
            group.sum += if row.value.is_finite() {
                row.value
            } else {
                0.0
            };
        } else {
            let stats = self.metrics.entry(row.metric.as_str().into()).or_default();
            stats.count += 1;
            stats.sum += if row.value.is_finite() {
                row.value
            } else {
                0.0
            };
            if let Some(verdict) = row.verdict {
                stats.verdicts += 1;
                stats.verdicts_true += u64::from(verdict);
            }
            *stats
                .statuses
                .entry(row.status.as_str().into())
                .or_default() += 1;
            let difficulty = row
                .details
                .get("difficulty")
                .or_else(|| row.details.get("hardness"))
                .and_then(|v| v.as_str());
            if let Some(difficulty) = difficulty {
                let entry = stats
                    .by_difficulty
                    .entry(difficulty.to_string())
                    .or_default();
                entry.0 += 1;
                entry.1 += if row.value.is_finite() {
                    row.value
                } else {
                    0.0
                };
            }
        }
    }

    /// Count one dead letter.
    pub fn observe_dead_letter(&mut self, dead_letter: &DeadLetter) {
        self.dead_letters += 1;
        let reason = dead_letter
            .reason
            .split_once(':')
            .map_or(dead_letter.reason.as_str(), |(head, _)| head)
            .trim()
            .to_string();
        *self.dead_letter_reasons.entry(reason).or_default() += 1;
    }

    /// The summary as a plain-text table (`title` is the first line).
    pub fn render(&self, title: &str) -> String {
        let mut out = String::new();
        let secs = self.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.messages as f64 / secs
        } else {
            0.0
        };
        let _ = writeln!(out, "{title}");
        let _ = writeln!(out, "  {:<18}{}", "messages", self.messages);
        let _ = writeln!(out, "  {:<18}{}", "events scored", self.events);
        let _ = writeln!(out, "  {:<18}{}", "rows written", self.rows);
        let _ = writeln!(out, "  {:<18}{}", "dead letters", self.dead_letters);
        for (reason, n) in &self.dead_letter_reasons {
            let _ = writeln!(out, "    {n:>6}  {reason}");
        }
        let _ = writeln!(out, "  {:<18}{secs:.2} s ({rate:.0} messages/s)", "elapsed");
        let stef = &self.stef;
        if stef.count > 0 {
            let _ = writeln!(
                out,
                "STEF Φ              count {}  mean {}  P50 {}  P90 {}",
                stef.count,
                fmt2(stef.mean()),
                fmt2(stef.percentile(50.0)),
                fmt2(stef.percentile(90.0))
            );
            let _ = writeln!(
                out,
                "  {:<18}{}",
                "quality tier",
                shares(
                    &stef.tiers,
                    &["excellent", "good", "marginal", "poor"],
                    stef.count
                )
            );
            let _ = writeln!(
                out,
                "  {:<18}{}",
                "filter status",
                shares(
                    &stef.filter_statuses,
                    &[
                        "fully_applied",
                        "fully_applied_with_extras",
                        "partially_applied",
                        "not_applied"
                    ],
                    stef.count
                )
            );
            let _ = writeln!(
                out,
                "  {:<18}{}",
                "verdict",
                shares(
                    &stef.verdicts,
                    &[
                        "correct",
                        "likely_correct",
                        "potentially_incorrect",
                        "incorrect"
                    ],
                    stef.count
                )
            );
            let _ = writeln!(out, "  {:<18}{}", "status", counts(&stef.statuses));
            if self.by_agent.len() > 1 {
                let _ = writeln!(out, "  by agent");
                for (label, group) in &self.by_agent {
                    let _ = writeln!(
                        out,
                        "    {label:<40} n={:<6} mean Φ {}",
                        group.count,
                        fmt2(group.mean())
                    );
                }
            }
        }
        for (name, m) in &self.metrics {
            let verdict = if m.verdicts > 0 {
                format!(
                    "  verdict true {:.1}%",
                    100.0 * m.verdicts_true as f64 / m.verdicts as f64
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{name:<20}count {}  mean {}{verdict}  status {}",
                m.count,
                m.mean().map_or("-".into(), |v| format!("{v:.4}")),
                counts(&m.statuses)
            );
            for (difficulty, (n, sum)) in &m.by_difficulty {
                let _ = writeln!(
                    out,
                    "    {difficulty:<16}n={n:<6} mean {:.4}",
                    if *n > 0 { sum / *n as f64 } else { 0.0 }
                );
            }
        }
        self.render_llm(&mut out);
        out
    }

    fn render_llm(&self, out: &mut String) {
        for client in &self.llm.clients {
            let t = &client.totals;
            let _ = writeln!(out, "LLM judge {} ({})", client.judge, client.role);
            let _ = writeln!(
                out,
                "  {:<18}{}  cache hits {} ({})  durable hits {}  failures {}",
                "calls requested",
                t.assessments,
                t.cache_hits,
                percent(t.cache_hits, t.assessments),
                t.durable_hits,
                t.failures
            );
            let _ = writeln!(
                out,
                "  {:<18}{}  HTTP requests {}  retries {}  repairs {}  tokens {} prompt + {} completion",
                "LLM calls",
                t.llm_calls,
                t.http_requests,
                t.retries,
                t.repairs,
                t.prompt_tokens,
                t.completion_tokens
            );
        }
        if self.llm.judged.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "LLM-judged metrics  judge calls (per event), answered from cache, sent to the LLM, avoided"
        );
        for (metric, c) in &self.llm.judged {
            let avoided: u64 = c.avoided.values().sum();
            let reasons = c
                .avoided
                .iter()
                .map(|(why, n)| format!("{} {n}", why.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            let per_event = if c.events > 0 {
                c.llm_calls as f64 / c.events as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  {:<18}events {}  judge calls {} ({per_event:.3}/event)  cache hits {} ({})  to the LLM {}  avoided {avoided}{}",
                metric.as_str(),
                c.events,
                c.llm_calls,
                c.cache_hits,
                percent(c.cache_hits, c.llm_calls),
                c.llm_calls.saturating_sub(c.cache_hits),
                if reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({reasons})")
                }
            );
        }
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

fn agent_label(row: &EvaluationRow) -> String {
    let mut parts = vec![row.agent_id.as_deref().unwrap_or("(no agent)")];
    if let Some(version) = row.agent_version.as_deref() {
        parts.push(version);
    }
    let mut label = parts.join(" ");
    if let Some(model) = row.model.as_deref() {
        let _ = write!(label, " ({model})");
    }
    label
}

fn fmt2(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// `a 60.0%  b 40.0%` in the given order first, then any other keys.
fn shares(map: &BTreeMap<String, u64>, order: &[&str], total: u64) -> String {
    let total = total.max(1) as f64;
    let mut parts: Vec<String> = order
        .iter()
        .map(|k| {
            let n = map.get(*k).copied().unwrap_or(0);
            format!("{k} {:.1}%", 100.0 * n as f64 / total)
        })
        .collect();
    parts.extend(
        map.iter()
            .filter(|(k, _)| !order.contains(&k.as_str()))
            .map(|(k, n)| format!("{k} {:.1}%", 100.0 * *n as f64 / total)),
    );
    parts.join("  ")
}

fn counts(map: &BTreeMap<String, u64>) -> String {
    map.iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join("  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::{RowStatus, StefColumns};
    use crate::event::Event;

    fn stef_row(phi: f64, tier: &str, agent: &str) -> EvaluationRow {
        let e = Event::decode(
            format!(r#"{{"question":"q","sql":"s","agent_id":"{agent}"}}"#).as_bytes(),
        )
        .unwrap();
        let mut row = EvaluationRow::for_event(&e, "2026-01-01T00:00:00Z", Metric::Stef);
        row.value = phi;
        row.stef = Some(StefColumns {
            quality_tier: tier.into(),
            filter_status: "fully_applied".into(),
            semantic_verdict: "correct".into(),
            confidence: 0.7,
            confidence_tier: "moderate".into(),
            sigma_filters: 5,
            sigma_verdict: 5,
            leniency: 0,
            rules_fired: vec![],
            enrichment_status: "absent".into(),
            judge: "deterministic".into(),
            judge_cached: false,
            prompt_version: None,
            rules_version: "default".into(),
            prompt_tokens: 0,
            completion_tokens: 0,
            latency_us: 1,
        });
        row
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut s = Summary::default();
        for (i, phi) in [10.0, 48.0, 80.0, 100.0, 100.0].iter().enumerate() {
            let tier = if *phi >= 90.0 { "excellent" } else { "poor" };
            s.observe_row(&stef_row(*phi, tier, if i % 2 == 0 { "a" } else { "b" }));
        }
        assert_eq!(s.stef.count, 5);
        assert_eq!(s.stef.mean(), Some(67.6));
        assert_eq!(s.stef.percentile(50.0), Some(80.0));
        assert_eq!(s.stef.percentile(90.0), Some(100.0));
        assert_eq!(s.stef.percentile(20.0), Some(10.0));
        let text = s.render("t");
        assert!(text.contains("excellent 40.0%"), "{text}");
        assert!(text.contains("by agent"), "{text}");
    }

    #[test]
    fn llm_usage_is_reported_per_run() {
        use crate::metrics::avoid::Avoidance;
        let calls = |events, llm_calls, cache_hits, avoided: &[(Avoidance, u64)]| MetricCalls {
            events,
            llm_calls,
            cache_hits,
            avoided: avoided.iter().copied().collect(),
        };
        let usage = |assessments, hits, flex: MetricCalls| LlmUsage {
            clients: vec![ClientUsage {
                role: "STEF judge + gold metrics".into(),
                judge: "llm:m".into(),
                totals: JudgeTotals {
                    assessments,
                    cache_hits: hits,
                    llm_calls: assessments - hits,
                    http_requests: assessments - hits,
                    prompt_tokens: 100 * (assessments - hits),
                    ..JudgeTotals::default()
                },
            }],
            judged: [(Metric::Flex, flex)].into_iter().collect(),
        };
        let before = usage(10, 2, calls(4, 3, 1, &[(Avoidance::EsmPlusEquivalent, 1)]));
        let after = usage(
            16,
            8,
            calls(
                8,
                6,
                4,
                &[
                    (Avoidance::EsmPlusEquivalent, 2),
                    (Avoidance::PredictionFailed, 1),
                ],
            ),
        );
        let run = after.since(&before);
        let t = run.clients[0].totals;
        assert_eq!((t.assessments, t.cache_hits, t.llm_calls), (6, 6, 0));
        assert_eq!(t.prompt_tokens, 0);
        let flex = &run.judged[&Metric::Flex];
        assert_eq!((flex.events, flex.llm_calls, flex.cache_hits), (4, 3, 3));
        assert_eq!(flex.avoided[&Avoidance::EsmPlusEquivalent], 1);
        assert_eq!(flex.avoided[&Avoidance::PredictionFailed], 1);

        let summary = Summary {
            llm: run,
            ..Summary::default()
        };
        let text = summary.render("t");
        assert!(
            text.contains("LLM judge llm:m (STEF judge + gold metrics)"),
            "{text}"
        );
        assert!(
            text.contains("calls requested   6  cache hits 6 (100.0%)"),
            "{text}"
        );
        assert!(
            text.contains(
                "flex              events 4  judge calls 3 (0.750/event)  cache hits 3 (100.0%)  \
                 to the LLM 0  avoided 2 (esm_plus_equivalent 1, prediction_failed 1)"
            ),
            "{text}"
        );
        assert!(!Summary::default().render("t").contains("LLM"));
    }

    #[test]
    fn other_metrics_and_dead_letters_are_counted() {
        let mut s = Summary::default();
        let e = Event::decode(br#"{"question":"q","sql":"s"}"#).unwrap();
        for v in [true, false, true] {
            let mut row = EvaluationRow::for_event(&e, "2026-01-01T00:00:00Z", Metric::Ex);
            row.value = f64::from(u8::from(v));
            row.verdict = Some(v);
            s.observe_row(&row);
        }
        let mut row = EvaluationRow::for_event(&e, "2026-01-01T00:00:00Z", Metric::Ex);
        row.status = RowStatus::ExecError;
        s.observe_row(&row);
        s.observe_dead_letter(&DeadLetter::new("x", "malformed JSON: eof", b"{"));
        s.observe_dead_letter(&DeadLetter::new("x", "malformed JSON: trailing", b"{"));
        let ex = &s.metrics["ex"];
        assert_eq!((ex.count, ex.verdicts, ex.verdicts_true), (4, 3, 2));
        assert_eq!(s.dead_letter_reasons["malformed JSON"], 2);
        let text = s.render("t");
        assert!(text.contains("exec_error 1"), "{text}");
        assert!(text.contains("     2  malformed JSON"), "{text}");
        assert!(text.contains("verdict true 66.7%"), "{text}");
        assert!(s.stef.percentile(50.0).is_none());
    }
}
