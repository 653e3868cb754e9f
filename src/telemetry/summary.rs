//! Run summary: the table a `run` or `backfill` prints at the end, rendered from the run's
//! statistics ([`RunStats`], counted in one place — `crate::telemetry::stats` — as the sink accepts rows).

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use crate::telemetry::stats::{
    ClientUsage, GroupStats, LlmUsage, MetricStats, RunStats, StefStats,
};

/// The summary of a run is its statistics; [`RunStats::render`] prints them.
pub type Summary = RunStats;

impl RunStats {
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
        if let (Some(line), Some(_)) = (self.line_rate_elapsed, &self.judge_pass) {
            let _ = writeln!(
                out,
                "  {:<18}{:.2} s (the judge stage drained after it)",
                "line-rate pass",
                line.as_secs_f64()
            );
        }
        for (label, text) in &self.source {
            let _ = writeln!(out, "  {label:<18}{text}");
        }
        if !self.outages.is_empty() {
            let outages: Vec<String> = self
                .outages
                .iter()
                .map(|(component, o)| {
                    format!(
                        "{component} {}× {:.1} s (longest {:.1} s, {} failed attempt(s))",
                        o.episodes,
                        o.total.as_secs_f64(),
                        o.longest.as_secs_f64(),
                        o.failures
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  {:<18}{} (degraded or failed; retried, nothing lost)",
                "outages",
                outages.join(", ")
            );
        }
        if let Some(e) = &self.evaluation_events {
            let _ = writeln!(
                out,
                "  {:<18}{} of {} sent to the collector ({} dropped: {} queue full, {} refused, {} at shutdown; {} failed attempt(s) retried)",
                "evaluation events",
                e.sent,
                e.submitted,
                e.dropped(),
                e.dropped_queue_full,
                e.refused,
                e.dropped_at_shutdown,
                e.failed_attempts
            );
        }
        self.render_stef(&mut out);
        self.render_metrics(&mut out);
        if self.probes.probes > 0 {
            let p = &self.probes;
            let _ = writeln!(
                out,
                "STEF probes         {} run  answered {}  failed {}  inconclusive {}",
                p.probes, p.answered, p.failed, p.inconclusive
            );
        }
        self.render_llm(&mut out);
        self.render_judge_pass(&mut out);
        out
    }

    /// The line-rate STEF section: Φ, tiers, filter statuses, verdicts, the correctness
    /// model's flags, statuses, and Φ by agent when there are several.
    fn render_stef(&self, out: &mut String) {
        let stef = &self.stef;
        if stef.count > 0 {
            let _ = writeln!(
                out,
                "STEF Φ              count {}  mean {}  P50 {}  P90 {}{}",
                stef.count,
                fmt2(stef.mean()),
                fmt2(stef.percentile(50.0)),
                fmt2(stef.percentile(90.0)),
                coverage(stef.scored, stef.count)
            );
            let _ = writeln!(
                out,
                "  {:<18}{}",
                "quality tier",
                shares(&stef.tiers, &crate::stef::QualityTier::NAMES, stef.count)
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
            if stef.p_correct.n > 0 {
                let _ = writeln!(
                    out,
                    "  {:<18}flags {} of {} scored ({})  mean p_correct {:.3}  (correctness model {}; the mean is the model's own estimate of the share correct: people's labels on the review page's calibration slice, or `report --labels`, rectify it)",
                    "line-rate verdict",
                    stef.flagged,
                    stef.scored,
                    percent(stef.flagged, stef.scored),
                    stef.p_correct.mean().unwrap_or_default(),
                    stef.model_version.as_deref().unwrap_or("?"),
                );
            }
            let _ = writeln!(out, "  {:<18}{}", "status", counts(&stef.statuses));
            if stef.results_ignored > 0 {
                let _ = writeln!(
                    out,
                    "  {:<18}{} event(s) scored without their malformed `result` (details.result_ignored)",
                    "result ignored", stef.results_ignored
                );
            }
            if self.by_agent.len() > 1 {
                let _ = writeln!(out, "  by agent");
                for (label, group) in &self.by_agent {
                    let _ = writeln!(
                        out,
                        "    {label:<40} n={:<6} mean Φ {}  mean p_correct {}",
                        group.count,
                        fmt2(group.mean()),
                        group
                            .p_correct
                            .mean()
                            .map_or("-".to_string(), |p| format!("{p:.3}"))
                    );
                }
            }
        }
    }

    /// One line per other metric (gold metrics), with its mean by difficulty.
    fn render_metrics(&self, out: &mut String) {
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
                "{name:<20}count {}  mean {}{}{verdict}  status {}",
                m.count,
                m.mean().map_or("-".into(), |v| format!("{v:.4}")),
                coverage(m.scored, m.count),
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
    }

    fn render_judge_pass(&self, out: &mut String) {
        let Some(pass) = &self.judge_pass else {
            return;
        };
        let _ = writeln!(out, "LLM judge, second pass (rows: stef_judged)");
        let reasons: Vec<String> = pass
            .reasons
            .iter()
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        let _ = writeln!(
            out,
            "  {:<18}{} (uniform slice {}; by reason: {})",
            "selected",
            pass.selected,
            pass.selected_uniform,
            if reasons.is_empty() {
                "-".to_string()
            } else {
                reasons.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "  {:<18}{}  cache hits {}  failures {}",
            "judged", pass.judged, pass.cache_hits, pass.failures
        );
        let shed: Vec<String> = pass
            .shed
            .iter()
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        let _ = writeln!(
            out,
            "  {:<18}{}{}",
            "shed",
            pass.shed_total(),
            if shed.is_empty() {
                String::new()
            } else {
                format!(" ({})", shed.join(", "))
            }
        );
        if pass.left_in_topic > 0 {
            let _ = writeln!(
                out,
                "  {:<18}{} (in the Kafka work topic, for the next start)",
                "left unjudged", pass.left_in_topic
            );
        }
        if pass.paused > 0 || pass.put_back > 0 {
            let _ = writeln!(
                out,
                "  {:<18}{} time(s); {} judgment(s) put back to wait for it (the judge was unreachable)",
                "judge paused", pass.paused, pass.put_back
            );
        }
        let spent = &pass.spent;
        let _ = writeln!(
            out,
            "  {:<18}requests {}  tokens {} (prompt {}, completion {})  cost {:.4}",
            "spent",
            spent.requests,
            spent.tokens(),
            spent.prompt_tokens,
            spent.completion_tokens,
            spent.cost
        );
        let (requests, tokens, cost) = pass.left_today;
        if requests.is_some() || tokens.is_some() || cost.is_some() {
            let mut left = Vec::new();
            if let Some(n) = requests {
                left.push(format!("requests {n}"));
            }
            if let Some(n) = tokens {
                left.push(format!("tokens {n}"));
            }
            if let Some(c) = cost {
                left.push(format!("cost {c:.4}"));
            }
            let _ = writeln!(out, "  {:<18}{}", "left today", left.join("  "));
        }
        self.render_estimates(out);
    }

    fn render_estimates(&self, out: &mut String) {
        if self.estimates.series.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "Calibrated estimates: what the LLM judge would say about all scored events \
             (PPI over the line rate's Φ and p_correct, 95% interval; n = judged uniform slice)"
        );
        let _ = writeln!(
            out,
            "  {:<44}{:>8}{:>6}  {:>10}  {:<24}{:<24}",
            "series", "events", "n", "line Φ", "estimated Φ [95%]", "share correct [95%]"
        );
        let mut rows: Vec<(String, crate::sampling::SeriesEstimate)> = self
            .estimates
            .series
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if rows.len() > 1 {
            rows.push(("(all series)".to_string(), self.estimates.total()));
        }
        for (series, s) in rows {
            let label = if series.is_empty() {
                "(no labels)".to_string()
            } else {
                series
            };
            let phi = s.phi();
            let share = s.correct_share();
            let _ = writeln!(
                out,
                "  {:<44}{:>8}{:>6}  {:>10}  {:<24}{:<24}",
                label,
                s.phi.n,
                s.phi_correction.n,
                s.phi.mean().map_or("-".into(), |m| format!("{m:.2}")),
                interval(phi, 2, 1.0),
                interval(share, 1, 100.0),
            );
        }
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
            if t.reasoning_tokens > 0 || t.cut_off > 0 {
                let _ = writeln!(
                    out,
                    "  {:<18}reasoning tokens {} (of the completion tokens)  replies cut off at max_tokens {}",
                    "", t.reasoning_tokens, t.cut_off
                );
            }
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

/// `  over S scored (coverage P%)` when some rows were not scored; nothing when all were.
fn coverage(scored: u64, count: u64) -> String {
    if scored == count || count == 0 {
        String::new()
    } else {
        format!(
            "  over {scored} scored (coverage {:.1}%)",
            100.0 * scored as f64 / count as f64
        )
    }
}

/// `mean [lower, upper]` (scaled, with `decimals`), `mean [n<2]` without an interval, `-`
/// without an estimate.
fn interval(e: Option<crate::sampling::Estimate>, decimals: usize, scale: f64) -> String {
    match e {
        None => "-".into(),
        Some(e) => match (e.lower, e.upper) {
            (Some(lo), Some(hi)) => format!(
                "{:.d$} [{:.d$}, {:.d$}]",
                e.mean * scale,
                lo * scale,
                hi * scale,
                d = decimals
            ),
            _ => format!("{:.d$} [n<2]", e.mean * scale, d = decimals),
        },
    }
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
    use crate::evaluation::{DeadLetter, EvaluationRow, Metric, RowStatus, StefColumns};
    use crate::event::Event;
    use crate::judge::JudgeTotals;
    use crate::metrics::avoid::MetricCalls;

    fn stef_row(phi: f64, tier: &str, agent: &str) -> EvaluationRow {
        let e = Event::decode(
            format!(r#"{{"question":"q","sql":"s","agent_id":"{agent}"}}"#).as_bytes(),
        )
        .unwrap();
        let mut row = EvaluationRow::for_event(&e, "2026-01-01T00:00:00Z", Metric::Stef);
        row.value = phi;
        row.stef = Some(StefColumns {
            quality_tier: tier.parse().expect("a tier name"),
            filter_status: "fully_applied".into(),
            semantic_verdict: "correct".into(),
            confidence: 0.7,
            confidence_tier: crate::stef::ConfidenceTier::Moderate,
            sigma_filters: 5,
            sigma_verdict: 5,
            leniency: 0,
            rules_fired: vec![],
            enrichment_status: "absent".into(),
            judge: "deterministic".into(),
            judge_cached: false,
            prompt_version: None,
            judge_identity: "deterministic sqlgrade=0.1.0 rules=default".into(),
            rules_version: "default".into(),
            prompt_tokens: 0,
            completion_tokens: 0,
            latency_us: 1,
            p_correct: None,
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
    fn agent_groups_follow_each_rows_agent() {
        let mut s = Summary::default();
        let mut rows = Vec::new();
        for (agent, version, phi) in [
            ("a", None, 10.0),
            ("a", None, 30.0),
            ("b", None, 50.0),
            ("a", Some("2"), 70.0),
            ("a", None, 20.0),
            ("b", None, 90.0),
        ] {
            let mut row = stef_row(phi, "good", agent);
            row.agent_version = version.map(Into::into);
            rows.push(row);
        }
        let mut gold = stef_row(1.0, "good", "a");
        gold.metric = Metric::Ex;
        gold.stef = None;
        gold.verdict = Some(true);
        rows.insert(2, gold.clone());
        gold.status = RowStatus::GoldError;
        gold.verdict = None;
        rows.push(gold);
        for row in &rows {
            s.observe_row(row);
        }
        let groups: Vec<(&str, u64, Option<f64>)> = s
            .by_agent
            .iter()
            .map(|(label, g)| (label.as_str(), g.count, g.mean()))
            .collect();
        assert_eq!(
            groups,
            [
                ("a", 3, Some(20.0)),
                ("a 2", 1, Some(70.0)),
                ("b", 2, Some(70.0))
            ],
            "the label of each row's own agent, whatever the previous row's"
        );
        let ex = &s.metrics["ex"];
        assert_eq!((ex.count, ex.scored, ex.verdicts), (2, 1, 1));
        assert_eq!(ex.statuses.len(), 2, "{:?}", ex.statuses);
        assert_eq!(s.stef.statuses["ok"], 6);
        assert_eq!(s.stef.tiers["good"], 6);
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
