//! Knowing when a judge drifts, end to end through `sqlgrade run` (file source, JSONL sink, the
//! alert engine, the agreement monitor) with real BIRD predictions and their official EX verdicts
//! standing in for human labels, and the scripted OpenAI-wire server as the LLM judge (it can
//! switch models on demand, which a real server cannot):
//!
//! - the judge turns lenient mid-stream behind another served model id: the identity change is
//!   recorded on the rows, agreement falls, and `judge_agreement` fires within
//!   `agreement_min_labels + fire_after − 1` labels of the new identity; a stable run of the
//!   same length raises no agreement alert;
//! - true quality drops while the line-rate Φ barely moves: `estimate_drop` and
//!   `estimate_low` fire with their intervals, `score_drop` on Φ does not;
//! - labels imported (`import-labels`) for an identity that had none: agreement appears with
//!   its interval (`report --labels`, the review overview).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};
use sqlgrade::event::Event;
use sqlgrade::review_page::view::{CalibrationSample, judges};
use sqlgrade::score::Scorer;
use sqlgrade::stores::{JsonlStore, ReviewStore};
use sqlgrade_testkit::cli::sqlgrade;
use sqlgrade_testkit::data::data_dir;
use sqlgrade_testkit::events::{benchmark_events, stef_reply};
use sqlgrade_testkit::openai_mock::{MockServer, Recorded, Scripted, completion};
use sqlgrade_testkit::otlp::OtlpReceiver;
use sqlgrade_testkit::rng::SplitMix;

/// A BIRD system's events with the official EX verdict of each prediction.
fn bird_events(system: &str) -> Vec<(Event, bool)> {
    let reference = std::fs::read_to_string(
        data_dir()
            .join("bird/reference")
            .join(format!("ex_{system}.jsonl")),
    )
    .unwrap();
    let ex: HashMap<String, bool> = reference
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["question_id"].to_string(), v["ex"] == 1)
        })
        .collect();
    benchmark_events("bird", system)
        .into_iter()
        .map(|e| {
            let qid = e.event_id.rsplit('-').next().unwrap().to_string();
            let truth = ex[&qid];
            (e, truth)
        })
        .collect()
}

/// The question and SQL of a STEF judge request (the prompt's `<data>` blocks, JSON-encoded).
fn question_and_sql(request: &Recorded) -> Option<(String, String)> {
    let user = (0..request.message_count())
        .filter_map(|i| request.message(i))
        .find(|m| m.contains("<data name=\"sql\""))?;
    let block = |open: &str| -> Option<String> {
        let start = user.find(open)?;
        let after = &user[start..];
        let body = &after[after.find('>')? + 1..];
        let text = &body[..body.find("</data>")?];
        serde_json::from_str::<String>(text).ok()
    };
    Some((
        squeeze(&block("<data name=\"question\"")?),
        squeeze(&block("<data name=\"sql\"")?),
    ))
}

/// Text with runs of whitespace as one space and none at the ends (how the event's text and
/// the prompt's are compared).
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A chat completion whose content is a STEF reply with `verdict`, answered by `model`.
fn reply_from(model: &str, request: &Recorded, verdict: &str) -> Scripted {
    let mut body = completion(request.raw.len(), &stef_reply(verdict, 0.9).to_string());
    body["model"] = json!(model);
    Scripted::Raw(body.to_string())
}

/// Events JSONL: `events` in order, one second apart, as one production series.
fn write_events(path: &Path, events: &[Event]) {
    let mut text = String::new();
    for (i, e) in events.iter().enumerate() {
        let mut v = serde_json::to_value(e).unwrap();
        v["ts"] = json!(format!(
            "2026-11-{:02}T{:02}:{:02}:{:02}Z",
            20 + i / 86_400,
            (i / 3600) % 24,
            (i / 60) % 60,
            i % 60
        ));
        v["app_id"] = json!("bird-assistant");
        v["agent_id"] = json!("agent-a");
        v["agent_version"] = json!("v1");
        v["model"] = json!("gpt-4o");
        v["run_id"] = json!("replay");
        text.push_str(&v.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Labels in the review page's format: the EX verdict of each event, by reviewer `expert`.
fn write_labels(path: &Path, labels: &[(String, bool)]) {
    let mut text = String::new();
    for (event_id, truth) in labels {
        text.push_str(
            &json!({
                "event_id": event_id,
                "reviewer": "expert",
                "verdict": if *truth { "correct" } else { "incorrect" },
                "labelled_at": "2026-11-26T09:00:00Z",
            })
            .to_string(),
        );
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// `sqlgrade run` over `events.jsonl` in `dir` with the scripted judge and `alerts` rules.
fn run(dir: &Path, server: &MockServer, alerts: &str, extra: &str) {
    let config = dir.join("sqlgrade.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[source]
kind = "file"
path = {events:?}

[sink]
kind = "jsonl"
dir = {out:?}

[judge]
kind = "llm"
base_url = "{base}"
model = "judge"
api_key_env = ""
max_requests_per_second = 1000.0
max_concurrency = 1
max_retries = 1
timeout_ms = 10000

[judge.budget]
uniform_rate = {uniform}
salt = "drift"
priority_not_correct = false
priority_low_confidence = false
priority_poor_tier = false
priority_new_series = 0
priority_alerting = false

[server]
agreement_poll_ms = 200

[alerts]
enabled = true

{extra}

[alerts.defaults]
{alerts}
"#,
            events = dir.join("events.jsonl").display().to_string(),
            out = dir.join("out").display().to_string(),
            base = server.base_url(),
            uniform = if alerts.contains("estimate_block") {
                "0.5"
            } else {
                "1.0"
            },
        ),
    )
    .unwrap();
    let out = sqlgrade(dir)
        .args(["run", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info,sqlgrade::review_page::agreement=debug")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run failed: {log}");
    // Shown when an assertion below fails.
    println!("{log}");
}

/// Every alert notification of the run (`alerts.jsonl`), with `details` parsed.
fn alerts(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("out/alerts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["details"] = serde_json::from_str(v["details"].as_str().unwrap()).unwrap();
            v
        })
        .collect()
}

fn firing<'a>(alerts: &'a [Value], rule: &str) -> Vec<&'a Value> {
    alerts
        .iter()
        .filter(|a| a["rule"] == rule && a["details"]["state"] == "firing")
        .collect()
}

const AGREEMENT_RULES: &str = r#"metrics = ["stef"]
agreement_kappa_min = 0.4
agreement_min_labels = 30
agreement_window = 60
agreement_judges = ["stef_judged"]
fire_after = 3
resolve_after = 3
judge_disagreement_min_increase = 0.0
estimate_drop = false
"#;

/// (question, SQL) → (position in the stream, truth).
type ByText = HashMap<(String, String), (usize, bool)>;

/// SuperSQL's events with distinct (question, SQL), the truth of each, and a map from
/// (question, SQL) to (position, truth) for the scripted judge.
fn drift_stream() -> (Vec<Event>, Vec<(String, bool)>, ByText) {
    let mut seen = HashSet::new();
    let mut events = Vec::new();
    let mut labels = Vec::new();
    let mut by_text = HashMap::new();
    for (e, truth) in bird_events("SuperSQL") {
        let key = (squeeze(&e.question), squeeze(&e.sql));
        if !seen.insert(key.clone()) {
            continue;
        }
        by_text.insert(key, (events.len(), truth));
        labels.push((e.event_id.clone(), truth));
        events.push(e);
    }
    (events, labels, by_text)
}

/// The good judge: the truth, except for every tenth event (a realistic 90% accuracy).
fn good_verdict(position: usize, truth: bool) -> &'static str {
    if (truth) != (position % 10 == 3) {
        "correct"
    } else {
        "incorrect"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_that_turns_lenient_is_caught_by_agreement_and_a_stable_one_is_not() {
    let (events, labels, by_text) = drift_stream();
    let half = events.len() / 2;
    for switching in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        write_events(&dir.path().join("events.jsonl"), &events);
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        // Labels imported ahead of the replay: pairs form as the rows land.
        write_labels(&dir.path().join("out/labels.jsonl"), &labels);
        let server = MockServer::start().await;
        let texts = by_text.clone();
        server.respond_with(move |request| {
            let Some((position, truth)) =
                question_and_sql(request).and_then(|k| texts.get(&k).copied())
            else {
                return Scripted::status(400);
            };
            if switching && position >= half {
                // Another model behind the same endpoint name, which calls everything correct.
                reply_from("judge-2026-06-lenient", request, "correct")
            } else {
                reply_from("judge-2026-01", request, good_verdict(position, truth))
            }
        });
        // Agreement over OpenTelemetry too.
        let receiver = OtlpReceiver::start().await;
        let telemetry = format!(
            "[telemetry]\nenabled = true\notlp_endpoint = \"{}\"\nexport_interval_ms = 200\n",
            receiver.endpoint()
        );
        run(dir.path(), &server, AGREEMENT_RULES, &telemetry);
        let kappa = receiver.gauge("sqlgrade.judge.agreement.kappa");
        let exported = |identity_part: &str, window: &str| -> Vec<f64> {
            kappa
                .iter()
                .filter(|(attributes, _)| {
                    attributes
                        .iter()
                        .any(|a| a.starts_with("judge_identity=") && a.contains(identity_part))
                        && attributes.contains(&format!("window={window}"))
                        && attributes.contains(&"judge=stef_judged".to_string())
                })
                .map(|(_, v)| *v)
                .collect()
        };
        let good = exported("served=judge-2026-01", "all");
        assert_eq!(good.len(), 1, "{kappa:#?}");
        assert!(good[0] > 0.6, "{good:?}");
        assert!(
            !receiver
                .gauge("sqlgrade.judge.agreement.labelled")
                .is_empty()
                && !receiver
                    .gauge("sqlgrade.judge.agreement.kappa_lower")
                    .is_empty()
        );
        if switching {
            let lenient = exported("lenient", "all");
            assert!(lenient.len() == 1 && lenient[0].abs() < 1e-9, "{kappa:#?}");
        }

        // The identity change is on the rows: every judged event of the first half under one
        // identity, of the second under another (switching), or one identity throughout.
        let rows: Vec<Value> = std::fs::read_to_string(dir.path().join("out/evaluations.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let position: HashMap<&str, usize> = events
            .iter()
            .enumerate()
            .map(|(i, e)| (e.event_id.as_str(), i))
            .collect();
        let mut identities: HashMap<String, Vec<usize>> = HashMap::new();
        for row in rows.iter().filter(|r| r["metric"] == "stef_judged") {
            assert_eq!(row["status"], "ok", "{row}");
            let identity = row["judge_identity"].as_str().unwrap().to_string();
            assert!(
                identity.starts_with("llm model=judge served=judge-2026-"),
                "{identity}"
            );
            assert!(
                identity.contains(" prompt=stef-") && identity.ends_with(" mode=json_schema"),
                "{identity}"
            );
            identities
                .entry(identity)
                .or_default()
                .push(position[row["event_id"].as_str().unwrap()]);
        }
        for row in rows.iter().filter(|r| r["metric"] == "stef") {
            let identity = row["judge_identity"].as_str().unwrap();
            assert!(
                identity.starts_with("deterministic sqlgrade="),
                "{identity}"
            );
        }
        let judged: usize = identities.values().map(Vec::len).sum();
        let scorable = rows
            .iter()
            .filter(|r| r["metric"] == "stef" && r["status"] == "ok")
            .count();
        assert!(scorable > 400, "{scorable}");
        assert_eq!(judged, scorable, "every scorable event judged once");
        let notes = alerts(dir.path());
        let agreement = firing(&notes, "judge_agreement");
        if switching {
            assert_eq!(identities.len(), 2, "{:?}", identities.keys());
            let lenient = identities
                .iter()
                .find(|(k, _)| k.contains("lenient"))
                .unwrap();
            assert!(lenient.1.iter().all(|p| *p >= half));
            assert!(lenient.1.len() > 200, "{}", lenient.1.len());

            // The agreement alert fired once, on the new identity, within min_labels +
            // fire_after − 1 = 32 of its labels, with κ's interval.
            assert_eq!(agreement.len(), 1, "{notes:#?}");
            let a = agreement[0];
            let labels_of_identity = a["details"]["labels"]["judge_identity"].as_str().unwrap();
            assert!(labels_of_identity.contains("lenient"), "{a}");
            let at = a["details"]["recent_samples"].as_u64().unwrap();
            assert!((30..=32).contains(&at), "{a}");
            let (lo, hi) = (
                a["details"]["observed_interval"][0].as_f64().unwrap(),
                a["details"]["observed_interval"][1].as_f64().unwrap(),
            );
            let kappa = a["observed"].as_f64().unwrap();
            assert!(lo <= kappa && kappa <= hi && kappa.abs() < 1e-9, "{a}");
            assert!(a["message"].as_str().unwrap().contains("κ"), "{a}");

            // The overview shows both identities, the second as a judge change, with their
            // agreement and intervals.
            let store = JsonlStore::new(dir.path().join("out"));
            let rows = store.rows().await.unwrap();
            let labels = store.labels().await.unwrap();
            let (views, disagreement) = judges(&rows, &labels, &CalibrationSample::default());
            let llm: Vec<_> = views
                .iter()
                .filter(|v| v.metric.as_str() == "stef_judged")
                .collect();
            assert_eq!(llm.len(), 2);
            let (before, after) = if llm[0].identity.contains("lenient") {
                (llm[1], llm[0])
            } else {
                (llm[0], llm[1])
            };
            assert!(after.replaced_another && !before.replaced_another);
            let good = before.agreement.kappa.unwrap();
            assert!(good > 0.6, "{:?}", before.agreement);
            assert!(before.agreement.kappa_interval.unwrap().0 > 0.4);
            // A judge that calls everything correct agrees with people by chance only: κ = 0.
            assert!(
                after.agreement.kappa.unwrap().abs() < 1e-9,
                "{:?}",
                after.agreement
            );
            assert!(
                after.agreement.kappa_interval.unwrap().1
                    < before.agreement.kappa_interval.unwrap().0
            );
            assert_eq!(disagreement.len(), 1);
        } else {
            assert_eq!(identities.len(), 1, "{:?}", identities.keys());
            assert!(
                agreement.is_empty(),
                "a false alarm on a stable judge: {agreement:#?}"
            );
        }
    }
}

/// Events of the three BIRD systems whose line-rate verdict is correct with Φ = 80, split by
/// the official EX verdict: the line-rate path cannot tell the two pools apart.
async fn pools_the_line_rate_cannot_tell_apart()
-> (Vec<Event>, Vec<Event>, HashMap<(String, String), bool>) {
    let scorer = Scorer::deterministic();
    let (mut right, mut wrong) = (Vec::new(), Vec::new());
    let mut truth: HashMap<(String, String), bool> = HashMap::new();
    let mut conflicting = HashSet::new();
    for system in ["SuperSQL", "DAIL-SQL", "CHESS-GPT-4o-mini"] {
        for (event, ex) in bird_events(system) {
            let rows = scorer.score_at(&event, "2026-11-26T00:00:00Z").await;
            let Some(stef) = rows
                .iter()
                .find(|r| r.metric == sqlgrade::evaluation::Metric::Stef)
            else {
                continue;
            };
            let correct = stef
                .stef
                .as_ref()
                .is_some_and(|s| s.semantic_verdict == "correct");
            // The deterministic judge's best: verdict correct, Φ 80 (611 EX = 1 and 164 EX = 0
            // events of the three runs).
            if !correct || stef.value < 80.0 {
                continue;
            }
            let key = (squeeze(&event.question), squeeze(&event.sql));
            if truth
                .insert(key.clone(), ex)
                .is_some_and(|before| before != ex)
            {
                conflicting.insert(key);
            }
            if ex {
                right.push(event)
            } else {
                wrong.push(event)
            }
        }
    }
    let clean = |pool: Vec<Event>| -> Vec<Event> {
        pool.into_iter()
            .filter(|e| !conflicting.contains(&(squeeze(&e.question), squeeze(&e.sql))))
            .collect()
    };
    (clean(right), clean(wrong), truth)
}

const ESTIMATE_RULES: &str = r#"metrics = ["stef"]
recent_window = 50
baseline_window = 150
min_samples = 40
evaluate_every = 10
fire_after = 2
resolve_after = 3
estimate_block = 50
estimate_recent_blocks = 2
estimate_baseline_blocks = 4
estimate_min_judged = 30
estimate_floor = 0.7
estimate_drop = true
agreement_kappa_min = 0.0
judge_disagreement_min_increase = 0.15
poor_share_min_increase = 0.0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quality_drop_the_line_rate_cannot_see_fires_the_estimate_alerts() {
    let (right, wrong, truth) = pools_the_line_rate_cannot_tell_apart().await;
    assert!(
        right.len() >= 50 && wrong.len() >= 20,
        "{} right, {} wrong",
        right.len(),
        wrong.len()
    );
    const GOOD: usize = 400;
    const BAD: usize = 200;
    let mut rng = SplitMix(7);
    let mut events = Vec::new();
    for i in 0..GOOD + BAD {
        let pool = if i < GOOD { &right } else { &wrong };
        let mut e = pool[rng.below(pool.len())].clone();
        e.event_id = format!("estimate-{i}");
        events.push(e);
    }
    let dir = tempfile::tempdir().unwrap();
    write_events(&dir.path().join("events.jsonl"), &events);
    let server = MockServer::start().await;
    // A judge that knows: the official EX verdict.
    server.respond_with(move |request| {
        match question_and_sql(request).and_then(|k| truth.get(&k).copied()) {
            Some(ex) => reply_from(
                "judge-2026-01",
                request,
                if ex { "correct" } else { "incorrect" },
            ),
            None => Scripted::status(400),
        }
    });
    run(dir.path(), &server, ESTIMATE_RULES, "");

    let rows: Vec<Value> = std::fs::read_to_string(dir.path().join("out/evaluations.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let phi_mean = |range: std::ops::Range<usize>| {
        let ids: HashSet<String> = range.map(|i| format!("estimate-{i}")).collect();
        let phis: Vec<f64> = rows
            .iter()
            .filter(|r| r["metric"] == "stef" && ids.contains(r["event_id"].as_str().unwrap()))
            .map(|r| r["value"].as_f64().unwrap())
            .collect();
        phis.iter().sum::<f64>() / phis.len() as f64
    };
    let (before, after) = (phi_mean(0..GOOD), phi_mean(GOOD..GOOD + BAD));
    println!("line-rate mean Φ: {before:.2} before, {after:.2} after the drop");
    assert!((before - after).abs() < 1.0, "{before} → {after}");

    let notes = alerts(dir.path());
    assert!(
        firing(&notes, "score_drop").is_empty(),
        "Φ did not move: {notes:#?}"
    );
    let drop = firing(&notes, "estimate_drop");
    assert_eq!(drop.len(), 1, "{notes:#?}");
    let d = drop[0];
    let recent = (
        d["details"]["observed_interval"][0].as_f64().unwrap(),
        d["details"]["observed_interval"][1].as_f64().unwrap(),
    );
    let baseline = (
        d["details"]["baseline_interval"][0].as_f64().unwrap(),
        d["details"]["baseline_interval"][1].as_f64().unwrap(),
    );
    assert!(recent.1 < baseline.0, "intervals overlap: {d}");
    let (b, r) = (
        d["baseline"].as_f64().unwrap(),
        d["observed"].as_f64().unwrap(),
    );
    // How far the baseline reaches into the drop depends on how far the judge lags behind the
    // line rate when the windows fill (the windows trail the judge); the drop itself is large.
    assert!(b - r > 0.1, "{d}");
    assert!(
        baseline.1 - baseline.0 > 0.0,
        "a baseline interval of zero width: {d}"
    );
    let message = d["message"].as_str().unwrap();
    assert!(
        message.contains("estimated share correct dropped") && message.contains(" ["),
        "{message}"
    );
    // It fired within the drop: after at most fire_after + recent blocks of it.
    let at = d["details"]["labels"]["agent_version"].as_str().unwrap();
    assert_eq!(at, "v1");
    let low = firing(&notes, "estimate_low");
    assert_eq!(low.len(), 1, "{notes:#?}");
    assert!(low[0]["details"]["observed_interval"][1].as_f64().unwrap() < 0.7);
    // The LLM judge now disagrees with the line rate on most events: an early warning too.
    assert_eq!(firing(&notes, "judge_disagreement").len(), 1, "{notes:#?}");
    for note in &notes {
        println!("{}", note["message"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_labels_give_a_judge_identity_without_labels_its_agreement() {
    let (events, _, by_text) = drift_stream();
    let events: Vec<Event> = events.into_iter().take(120).collect();
    let dir = tempfile::tempdir().unwrap();
    write_events(&dir.path().join("events.jsonl"), &events);
    let server = MockServer::start().await;
    server.respond_with(move |request| {
        match question_and_sql(request).and_then(|k| by_text.get(&k).copied()) {
            Some((position, truth)) => {
                reply_from("judge-2026-11", request, good_verdict(position, truth))
            }
            None => Scripted::status(400),
        }
    });
    run(dir.path(), &server, AGREEMENT_RULES, "");
    let store = JsonlStore::new(dir.path().join("out"));
    let rows = store.rows().await.unwrap();
    let identity_of = |views: &[sqlgrade::review_page::view::JudgeView]| {
        views
            .iter()
            .find(|v| v.metric.as_str() == "stef_judged")
            .cloned()
            .unwrap()
    };
    let (views, _) = judges(&rows, &[], &CalibrationSample::default());
    let before = identity_of(&views);
    assert!(
        before.identity.contains("served=judge-2026-11"),
        "{}",
        before.identity
    );
    assert_eq!(before.agreement.labelled, 0);
    assert_eq!(before.agreement.kappa, None);

    // The benchmark's verdicts as plain labels by question id, plus two for questions the run
    // never saw.
    let mut text = String::new();
    let ex: HashMap<String, bool> = bird_events("SuperSQL")
        .into_iter()
        .map(|(e, truth)| (e.event_id, truth))
        .collect();
    for e in &events {
        let qid = e.event_id.rsplit('-').next().unwrap();
        text.push_str(&json!({"question_id": qid, "label": ex[&e.event_id]}).to_string());
        text.push('\n');
    }
    text.push_str(
        "{\"question_id\": 999999, \"label\": true}\n{\"question_id\": 999998, \"label\": false}\n",
    );
    let labels = dir.path().join("ex-labels.jsonl");
    std::fs::write(&labels, text).unwrap();
    let out = sqlgrade(dir.path())
        .args(["import-labels", "--labels"])
        .arg(&labels)
        .arg("--dir")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "two labels name no event: {stdout}"
    );
    assert!(
        stdout.contains(&format!("imported {} labels", events.len()))
            && stdout.contains("2 named no stored event"),
        "{stdout}"
    );

    // The review store now has them: agreement appears, with its intervals.
    let stored = store.labels().await.unwrap();
    assert_eq!(stored.len(), events.len());
    assert!(stored.iter().all(|l| l.reviewer == "imported"));
    let (views, _) = judges(&rows, &stored, &CalibrationSample::default());
    let after = identity_of(&views);
    let scorable = rows
        .iter()
        .filter(|r| r.metric.as_str() == "stef_judged" && r.status == "ok")
        .count() as u64;
    assert_eq!(after.agreement.labelled, scorable);
    let kappa = after.agreement.kappa.unwrap();
    let (lo, hi) = after.agreement.kappa_interval.unwrap();
    assert!(
        lo < kappa && kappa < hi && kappa > 0.6,
        "{:?}",
        after.agreement
    );
    assert!(after.agreement.accuracy_interval.is_some());
    assert_eq!(after.weeks.len(), 1, "{:?}", after.weeks);

    // `report --labels` prints the same.
    let out = sqlgrade(dir.path())
        .args(["report", "--run-id", "replay", "--input"])
        .arg(dir.path().join("out/evaluations.jsonl"))
        .arg("--labels")
        .arg(&labels)
        .arg("--out")
        .arg(dir.path().join("report.html"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = format!("κ {kappa:.2} [{lo:.2}, {hi:.2}]");
    assert!(
        stdout.contains("judges (agreement with human labels") && stdout.contains(&expected),
        "{expected}\n{stdout}"
    );
    assert!(
        stdout.contains("served=judge-2026-11") && stdout.contains("2 labels name no event"),
        "{stdout}"
    );
}
