//! `sqlgrade backfill` evaluates the alert rules over the replayed rows.
//!
//! The replay: one production series (`agent_version` 2026.11.3) answers BIRD-dev questions
//! with SuperSQL's real SQL, then for a stretch with the SQL SuperSQL wrote for *another*
//! question of the same database (an agent answering the wrong question — the kind of
//! regression schema-free STEF Φ sees; mean Φ ≈ 9 instead of ≈ 69), then correctly again. A
//! control series (2026.11.2) stays correct throughout. Exactly one Φ `score_drop` alert must
//! fire for the affected series within a recent window of the switch and resolve after the
//! switch back — through the library (`BackfillPlan::run_with_alerts`) and printed by the
//! binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use sqlgrade::alerts::{AlertState, RuleKind, RuleSet};
use sqlgrade::commands::backfill::{
    BackfillFormat, BackfillPlan, BackfillRequest, benchmark_events,
};
use sqlgrade::config::{Config, SinkKind};
use sqlgrade::event::Event;
use sqlgrade_testkit::rng::SplitMix;

/// Observations per phase of the affected series.
const PHASE: usize = 600;
const RECENT: usize = 100;

/// SuperSQL's BIRD events, and the same questions paired with the SQL of the next question on
/// the same database.
fn correct_and_wrong_question() -> (Vec<Event>, Vec<Event>) {
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let correct = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions/SuperSQL.jsonl"),
        None,
    )
    .unwrap()
    .events;
    let mut by_db: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, e) in correct.iter().enumerate() {
        by_db.entry(e.app_id.clone().unwrap()).or_default().push(i);
    }
    let mut wrong = correct.clone();
    for indices in by_db.values() {
        for (k, &i) in indices.iter().enumerate() {
            wrong[i].sql = correct[indices[(k + 1) % indices.len()]].sql.clone();
        }
    }
    (correct, wrong)
}

/// The replay as JSONL events (no gold block: the live STEF path only).
fn write_replay(path: &Path) -> usize {
    let (correct, wrong) = correct_and_wrong_question();
    let mut rng = SplitMix(11);
    let mut text = String::new();
    let mut n = 0;
    for phase in [&correct, &wrong, &correct] {
        for _ in 0..PHASE {
            for (version, pool) in [("2026.11.3", phase), ("2026.11.2", &correct)] {
                let mut e = pool[rng.below(pool.len())].clone();
                e.event_id = format!("replay-{n}");
                e.app_id = Some("bird-assistant".into());
                e.agent_id = Some("agent-a".into());
                e.agent_version = Some(version.into());
                e.model = Some("gpt-4o".into());
                e.run_id = None;
                e.gold = None;
                text.push_str(&serde_json::to_string(&e).unwrap());
                text.push('\n');
                n += 1;
            }
        }
    }
    std::fs::write(path, text).unwrap();
    n
}

fn rules() -> RuleSet {
    RuleSet {
        recent_window: RECENT,
        baseline_window: 300,
        min_samples: 80,
        evaluate_every: 10,
        alpha: 1e-4,
        fire_after: 3,
        resolve_after: 3,
        metrics: vec!["stef".into()],
        stef_min_drop: 5.0,
        poor_share_min_increase: 0.0,
        judge_fallback_min_increase: 0.0,
        dead_letter_min_increase: 0.0,
        ..RuleSet::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_replay_fires_once_on_phi_and_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("replay.jsonl");
    let events = write_replay(&input);
    let mut config = Config::default();
    config.sink.kind = SinkKind::jsonl(dir.path().join("out"));
    config.rules.reload_interval_ms = 0;
    config.alerts.defaults = rules();
    assert!(
        !config.alerts.enabled,
        "evaluated even when live alerting is off"
    );
    let request = BackfillRequest {
        input,
        format: BackfillFormat::Events,
        predictions: None,
        run_id: Some("replay".into()),
        judge: sqlgrade::commands::backfill::PlanMode::Census,
    };
    let plan = BackfillPlan::prepare(&request, &config).unwrap();
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    let report = plan.run_with_alerts(&config, shutdown, None).await.unwrap();
    assert_eq!(report.summary.events, events as u64);
    for n in &report.alerts {
        eprintln!(
            "{} at observation {}: {}",
            n.state.as_str(),
            n.observations,
            n.summary
        );
    }
    let states: Vec<AlertState> = report.alerts.iter().map(|n| n.state).collect();
    assert_eq!(
        states,
        vec![AlertState::Firing, AlertState::Resolved],
        "{:#?}",
        report.alerts
    );
    let (fire, resolve) = (&report.alerts[0], &report.alerts[1]);
    assert_eq!(fire.rule, RuleKind::ScoreDrop);
    assert_eq!(fire.metric, "stef");
    assert_eq!(fire.labels["agent_version"], "2026.11.3");
    assert_eq!(fire.alert_id, resolve.alert_id);
    assert!(fire.baseline - fire.observed >= 5.0, "{fire:#?}");
    // Workers finish events slightly out of order, hence a little slack around the windows.
    // Resolving needs a recent window of correct answers again (RECENT observations), then
    // `resolve_after` consecutive calm evaluations against the baseline frozen at firing; a
    // 100-sample mean of Φ wanders by a few points, so that can take up to two more windows.
    let (switch, back) = (PHASE as u64, 2 * PHASE as u64);
    assert!(
        fire.observations > switch && fire.observations <= switch + RECENT as u64,
        "fired at {}, switch at {switch}",
        fire.observations
    );
    assert!(
        resolve.observations > back && resolve.observations <= back + 3 * RECENT as u64,
        "resolved at {}, switch back at {back}",
        resolve.observations
    );
}

#[test]
fn backfill_command_prints_the_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("replay.jsonl");
    write_replay(&input);
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[sink]
kind = "jsonl"
dir = "{}"

[alerts.defaults]
recent_window = {RECENT}
baseline_window = 300
min_samples = 80
evaluate_every = 10
alpha = 1e-4
metrics = ["stef"]
poor_share_min_increase = 0.0
judge_fallback_min_increase = 0.0
dead_letter_min_increase = 0.0
"#,
            dir.path().join("out").display()
        ),
    )
    .unwrap();
    let stdout = sqlgrade_testkit::bin::run_ok(
        Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("RUST_LOG", "error")
            .args(["backfill", "--input"])
            .arg(&input)
            .arg("--config")
            .arg(&config),
    );
    eprintln!("{stdout}");
    assert!(stdout.contains("alerts: 1 fired, 1 resolved"), "{stdout}");
    let firing = stdout
        .lines()
        .find(|l| l.contains("[FIRING]"))
        .expect("a firing line");
    assert!(
        firing.contains("score_drop: mean stef dropped")
            && firing.contains("agent_version=2026.11.3"),
        "{firing}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("[RESOLVED]") && l.contains("agent_version=2026.11.3")),
        "{stdout}"
    );
}
