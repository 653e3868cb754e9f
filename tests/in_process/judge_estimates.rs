//! Calibrated estimates (prediction-powered inference) through the real pipeline.
//!
//! A scripted judge whose verdict is a known function of the event (it calls a query with a
//! JOIN or a nested SELECT `incorrect`, every other one `correct`) agrees only partly with the
//! deterministic line-rate verdicts. A census run gives each scorable event's line-rate Φ and
//! the judge's Φ, so the true all-traffic mean is known. Then:
//!
//! - over 100 salts (each a different uniform slice, drawn exactly as the planner draws it) the
//!   95% interval covers the true mean at least 90 times;
//! - the interval narrows as the uniform rate grows;
//! - a sampled pipeline run reports the same estimate as the offline computation for its salt,
//!   and switching the priority slices on (more judged events, none of them uniform) leaves it
//!   unchanged.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlgrade::commands::backfill::PlanMode;
use sqlgrade::config::{Config, JudgeConfig, LlmJudgeConfig};
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::judge::{Judge, JudgeAssessment, JudgeError, JudgeRequest};
use sqlgrade::pipeline::Pipeline;
use sqlgrade::sampling::{SeriesEstimate, uniform_draw};
use sqlgrade::score::{Scorer, ScorerOptions, SingleProfile};
use sqlgrade::sources::FileSource;
use sqlgrade::stef::Verdict;
use sqlgrade::stores::JsonlSink;
use sqlgrade::telemetry::summary::Summary;
use sqlgrade_testkit::events::benchmark_events;

/// The scripted judge: the deterministic question understanding, and a verdict that is a known
/// function of the SQL.
struct KnownJudge;

#[async_trait]
impl Judge for KnownJudge {
    fn kind(&self) -> String {
        "llm:known-function".into()
    }

    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        let mut assessment = DeterministicJudge.assess(request).await?;
        let sql = request.event.sql.to_ascii_uppercase();
        let wrong = sql.contains("JOIN") || sql.matches("SELECT").count() > 1;
        assessment.verdict = if wrong {
            Verdict::Incorrect
        } else {
            Verdict::Correct
        };
        assessment.confidence = 0.9;
        assessment.judge = self.kind();
        Ok(assessment)
    }
}

fn events(n: usize) -> Vec<Value> {
    let mut base = benchmark_events("spider", "DAIL-SQL-GPT-4");
    base.extend(benchmark_events("bird", "DAIL-SQL"));
    (0..n)
        .map(|i| {
            let mut v = serde_json::to_value(&base[i % base.len()]).unwrap();
            v["event_id"] = json!(format!("ev-{i}"));
            v["agent_id"] = json!("agent");
            v
        })
        .collect()
}

async fn run_pipeline(
    dir: &Path,
    input: &Path,
    out: &str,
    config: &Config,
    mode: PlanMode,
) -> Summary {
    let scorer = Arc::new(
        Scorer::new(
            Arc::new(DeterministicJudge),
            Arc::new(SingleProfile::default()),
            ScorerOptions::default(),
        )
        .with_judged_pass(Arc::new(KnownJudge)),
    );
    let second = sqlgrade::assembly::build_second_pass(config, &scorer, mode, Arc::default(), None)
        .unwrap()
        .unwrap();
    let pipeline = Pipeline::new(
        Box::new(FileSource::new(input, false, 1 << 20)),
        Box::new(JsonlSink::open(dir.join(out)).await.unwrap()),
        scorer,
        &config.pipeline,
        &config.sink,
    )
    .with_second_pass(second);
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    pipeline.run(shutdown).await.unwrap()
}

/// `event_id → (line-rate Φ, judge Φ)` of every scorable event, from a census run's rows.
fn census_values(dir: &Path) -> BTreeMap<String, (f64, f64)> {
    let text = std::fs::read_to_string(dir.join("evaluations.jsonl")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        if row["metric"] == "stef_judged" && row["status"] == "ok" {
            out.insert(
                row["event_id"].as_str().unwrap().to_string(),
                (
                    row["revised_value"].as_f64().unwrap(),
                    row["value"].as_f64().unwrap(),
                ),
            );
        }
    }
    out
}

/// The estimate the pipeline would report for a uniform slice of `rate` drawn with `salt`.
fn offline(values: &BTreeMap<String, (f64, f64)>, salt: &str, rate: f64) -> SeriesEstimate {
    let mut s = SeriesEstimate::default();
    for (id, (line, judged)) in values {
        s.observe_line(*line, 0.0);
        if uniform_draw(salt, id) < rate {
            s.observe_judged(*judged, false, *line, 0.0);
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppi_intervals_cover_the_truth_and_ignore_priority_picks() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let text: String = events(3000).iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&input, text).unwrap();

    // The truth: every scorable event judged.
    // The second pass's limits and budget are an LLM judge's keys; the judge itself is the
    // known one the scorer is given.
    let mut config = Config {
        judge: JudgeConfig::from(LlmJudgeConfig {
            max_concurrency: 16,
            ..LlmJudgeConfig::default()
        }),
        ..Config::default()
    };
    run_pipeline(dir.path(), &input, "census", &config, PlanMode::Census).await;
    let values = census_values(&dir.path().join("census"));
    assert!(values.len() > 2900, "{}", values.len());
    let truth = values.values().map(|(_, y)| y).sum::<f64>() / values.len() as f64;
    let line = values.values().map(|(f, _)| f).sum::<f64>() / values.len() as f64;
    let disagree = values.values().filter(|(f, y)| (f - y).abs() > 1.0).count();
    assert!(
        (truth - line).abs() > 2.0 && disagree > 300,
        "the judge must disagree with the line rate for the test to mean anything: truth \
         {truth:.2}, line {line:.2}, {disagree} disagreements"
    );

    // Coverage over 100 uniform slices.
    let covered = (0..100)
        .filter(|seed| {
            let e = offline(&values, &format!("seed-{seed}"), 0.1)
                .phi()
                .unwrap();
            e.lower.unwrap() <= truth && truth <= e.upper.unwrap()
        })
        .count();
    eprintln!("truth {truth:.3}, line rate {line:.3}; covered {covered}/100");
    assert!(
        covered >= 90,
        "the 95% interval covered the truth {covered} times in 100"
    );

    // Narrower with a larger uniform slice (mean half width over the same salts).
    let width = |rate: f64| {
        (0..30)
            .map(|seed| {
                offline(&values, &format!("seed-{seed}"), rate)
                    .phi()
                    .unwrap()
                    .half_width()
                    .unwrap()
            })
            .sum::<f64>()
            / 30.0
    };
    let (w05, w10, w30) = (width(0.05), width(0.1), width(0.3));
    eprintln!("mean half width: rate 0.05 {w05:.3}, 0.1 {w10:.3}, 0.3 {w30:.3}");
    assert!(w05 > w10 && w10 > w30, "{w05:.3} {w10:.3} {w30:.3}");

    // The pipeline's own estimate for one salt, priority slices off and on.
    let budget = &mut config.judge.llm_mut().expect("an LLM judge").budget;
    budget.salt = "seed-7".into();
    budget.uniform_rate = 0.1;
    budget.drain_grace_ms = 120_000;
    budget.priority_not_correct = false;
    budget.priority_low_confidence = false;
    budget.priority_poor_tier = false;
    budget.priority_new_series = 0;
    budget.priority_alerting = false;
    let plain = run_pipeline(dir.path(), &input, "plain", &config, PlanMode::Sample).await;
    let budget = &mut config.judge.llm_mut().expect("an LLM judge").budget;
    budget.priority_not_correct = true;
    budget.priority_poor_tier = true;
    budget.priority_new_series = 200;
    let with_priority =
        run_pipeline(dir.path(), &input, "priority", &config, PlanMode::Sample).await;

    let expected = offline(&values, "seed-7", 0.1).phi().unwrap();
    let got = plain.estimates.total().phi().unwrap();
    assert_eq!(got.judged, expected.judged);
    assert!(
        (got.mean - expected.mean).abs() < 1e-9,
        "{got:?} vs {expected:?}"
    );
    let priority = with_priority.estimates.total().phi().unwrap();
    assert!(
        with_priority.judge_pass.as_ref().unwrap().judged
            > plain.judge_pass.as_ref().unwrap().judged,
        "the priority slices judged more events"
    );
    assert_eq!(priority.judged, got.judged);
    assert!(
        (priority.mean - got.mean).abs() < 1e-9,
        "{priority:?} vs {got:?}"
    );
    assert_eq!(priority.lower, got.lower);
}
