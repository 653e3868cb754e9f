//! Replays of real BIRD predictions through the alert engine.
//!
//! Rows per question: the STEF row from the real scorer (deterministic judge) on the system's
//! prediction, and an `ex` row carrying the benchmark's own execution verdict for that prediction
//! (`shared/data/bird/reference/ex_<system>.jsonl`; the gold-metric executor lives on another
//! branch). Streams are resampled from these rows with a fixed-seed generator.

use std::collections::HashMap;

use chrono::Utc;
use sqlgrade::alerts::engine::{AlertEngine, AlertInput, AlertNotification, AlertState, RuleKind};
use sqlgrade::alerts::{AlertsConfig, RuleSet};
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::evaluation::{EvaluationRow, Metric};
use sqlgrade::score::Scorer;
use sqlgrade_testkit::rng::SplitMix;

/// One system's rows per question: [stef, ex].
async fn system_rows(system: &str) -> Vec<Vec<EvaluationRow>> {
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions").join(format!("{system}.jsonl")),
        None,
    )
    .unwrap()
    .events;
    let reference =
        std::fs::read_to_string(bird.join("reference").join(format!("ex_{system}.jsonl"))).unwrap();
    let ex: HashMap<String, bool> = reference
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["question_id"].to_string(), v["ex"].as_i64().unwrap() == 1)
        })
        .collect();
    assert_eq!(ex.len(), events.len());
    let scorer = Scorer::deterministic();
    let mut out = Vec::with_capacity(events.len());
    for event in &events {
        let mut rows = scorer.score_at(event, "2026-11-21T00:00:00Z").await;
        rows.retain(|r| r.metric == Metric::Stef);
        let verdict = ex[&event.event_id];
        let mut ex_row = EvaluationRow::for_event(event, "2026-11-21T00:00:00Z", Metric::Ex);
        ex_row.value = f64::from(u8::from(verdict));
        ex_row.verdict = Some(verdict);
        rows.push(ex_row);
        out.push(rows);
    }
    out
}

/// A resampled event's rows relabelled as one production series.
fn relabel(rows: &[EvaluationRow], n: usize, version: &str) -> Vec<EvaluationRow> {
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            r.event_id = format!("replay-{n}").into();
            r.app_id = Some("bird-assistant".into());
            r.agent_id = Some("agent-a".into());
            r.agent_version = Some(version.into());
            r.model = Some("gpt-4o".into());
            r
        })
        .collect()
}

fn replay_rules() -> AlertsConfig {
    AlertsConfig {
        enabled: true,
        defaults: RuleSet {
            recent_window: 1000,
            baseline_window: 3000,
            min_samples: 500,
            evaluate_every: 20,
            alpha: 1e-4,
            fire_after: 3,
            resolve_after: 3,
            resolve_ratio: 0.5,
            metrics: vec!["stef".into(), "ex".into()],
            stef_min_drop: 5.0,
            gold_min_drop: 0.05,
            ..RuleSet::default()
        },
        ..AlertsConfig::default()
    }
}

#[tokio::test]
async fn version_switching_to_a_worse_system_fires_once_and_resolves() {
    let super_sql = system_rows("SuperSQL").await;
    let dail = system_rows("DAIL-SQL").await;
    // Why the alert is on EX and not on Φ: with the deterministic judge STEF Φ barely differs
    // between the two systems (69.2 vs 68.3, far below the 5-point minimum drop), while EX
    // drops from 0.713 to 0.634.
    for (name, rows) in [("SuperSQL", &super_sql), ("DAIL-SQL", &dail)] {
        let mean = |metric: Metric| {
            let values: Vec<f64> = rows
                .iter()
                .flatten()
                .filter(|r| r.metric == metric)
                .map(|r| r.value)
                .collect();
            values.iter().sum::<f64>() / values.len() as f64
        };
        eprintln!(
            "{name}: mean Φ {:.2}, mean EX {:.3}",
            mean(Metric::Stef),
            mean(Metric::Ex)
        );
    }
    let config = replay_rules();
    let window = config.defaults.recent_window as u64;
    let mut engine = AlertEngine::new(config);
    let mut rng = SplitMix(7);
    let phase = 6000usize;
    let mut notes: Vec<AlertNotification> = Vec::new();
    let mut n = 0;
    let now = Utc::now();
    for source in [&super_sql, &dail, &super_sql] {
        for _ in 0..phase {
            // The affected series, and a control series that never changes.
            let rows = relabel(&source[rng.below(source.len())], n, "2026.11.3");
            notes.extend(engine.observe(&AlertInput::Rows(rows), now));
            let control = relabel(&super_sql[rng.below(super_sql.len())], n, "2026.11.2");
            notes.extend(engine.observe(&AlertInput::Rows(control), now));
            n += 1;
        }
    }
    for note in &notes {
        eprintln!(
            "{} at observation {}: {}",
            note.state.as_str(),
            note.observations,
            note.summary
        );
    }
    let firing: Vec<_> = notes
        .iter()
        .filter(|n| n.state == AlertState::Firing)
        .collect();
    let resolved: Vec<_> = notes
        .iter()
        .filter(|n| n.state == AlertState::Resolved)
        .collect();
    assert_eq!(firing.len(), 1, "exactly one firing alert: {notes:#?}");
    assert_eq!(resolved.len(), 1, "exactly one resolve: {notes:#?}");
    let (fire, resolve) = (firing[0], resolved[0]);
    assert_eq!(fire.rule, RuleKind::ScoreDrop);
    assert_eq!(fire.metric, "ex");
    assert_eq!(fire.labels["agent_version"], "2026.11.3");
    assert_eq!(fire.alert_id, resolve.alert_id);
    let switch = phase as u64;
    assert!(
        fire.observations > switch && fire.observations <= switch + window,
        "fired at {} — not within the {window}-event window after the switch at {switch}",
        fire.observations
    );
    let back = 2 * phase as u64;
    assert!(
        resolve.observations > back && resolve.observations <= back + 2 * window,
        "resolved at {}, switch back at {back}",
        resolve.observations
    );
    assert!(fire.baseline - fire.observed >= 0.05);
}

#[tokio::test]
async fn long_stable_stream_raises_no_alert() {
    let super_sql = system_rows("SuperSQL").await;
    let mut engine = AlertEngine::new(replay_rules());
    let mut rng = SplitMix(42);
    let now = Utc::now();
    let events = 25_000;
    let mut false_alarms = Vec::new();
    for n in 0..events {
        let rows = relabel(&super_sql[rng.below(super_sql.len())], n, "2026.11.3");
        false_alarms.extend(engine.observe(&AlertInput::Rows(rows), now));
    }
    let stats = engine.stats();
    eprintln!(
        "stable stream: {events} events, {} detectors, false alarms: {}",
        stats.detectors,
        false_alarms.len()
    );
    assert_eq!(stats.inputs, events as u64);
    assert!(false_alarms.is_empty(), "false alarms: {false_alarms:#?}");
}
