//! `calibrate` on a small labelled file with hand-computed κ (library and CLI).

use std::path::Path;
use std::process::Command;

use serde_json::json;
use sqlgrade::commands::calibrate::{calibrate, read_labels, read_rows};
use sqlgrade::evaluation::Metric;

/// Labels e1–e6 true, e7–e10 false; FLEX verdicts T T T T F F T F F F → TP 4, FN 2, FP 1,
/// TN 3: p_o = 0.7, p_e = (5·6 + 5·4)/100 = 0.5, κ = 0.4. Hybrid-EX values
/// 1.0 .95 .9 .85 .5 .4 | .92 .3 .2 .1: the best cut-off is 0.4 (TP 6, FP 1, TN 3:
/// p_o = 0.9, p_e = (7·6 + 3·4)/100 = 0.54, κ = 0.36/0.46 = 18/23).
fn write_inputs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let labels: Vec<bool> = (1..=10).map(|i| i <= 6).collect();
    let flex = [
        true, true, true, true, false, false, true, false, false, false,
    ];
    let hybrid = [1.0, 0.95, 0.9, 0.85, 0.5, 0.4, 0.92, 0.3, 0.2, 0.1];
    let mut label_lines: Vec<String> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| json!({"event_id": format!("e{}", i + 1), "label": l}).to_string())
        .collect();
    label_lines.push(json!({"question_id": 11, "label": true}).to_string()); // judge error row
    label_lines.push(json!({"event_id": "missing", "label": false}).to_string()); // no row
    let mut rows = Vec::new();
    let row = |id: &str, metric: &str, value: f64, verdict: Option<bool>, status: &str| {
        json!({"event_id": id, "ts": "2026-01-01T00:00:00Z", "app_id": null, "agent_id": null,
            "agent_version": null, "model": null, "run_id": "r", "metric": metric,
            "value": value, "verdict": verdict, "status": status, "details": {}})
        .to_string()
    };
    for i in 0..10 {
        let id = format!("e{}", i + 1);
        rows.push(row(
            &id,
            "flex",
            if flex[i] { 1.0 } else { 0.0 },
            Some(flex[i]),
            "ok",
        ));
        rows.push(row(
            &id,
            "hybrid_ex",
            hybrid[i],
            Some(hybrid[i] >= 0.9),
            "ok",
        ));
    }
    rows.push(row("bird-11", "flex", 0.0, None, "judge_error"));
    let lp = dir.join("labels.jsonl");
    let rp = dir.join("rows.jsonl");
    std::fs::write(&lp, label_lines.join("\n")).unwrap();
    std::fs::write(&rp, rows.join("\n")).unwrap();
    (lp, rp)
}

#[test]
fn binary_metric_kappa_and_confusion() {
    let dir = tempfile::tempdir().unwrap();
    let (lp, rp) = write_inputs(dir.path());
    let r = calibrate(
        &read_labels(&lp).unwrap(),
        &read_rows(&rp).unwrap(),
        Metric::Flex,
        None,
        None,
    );
    assert_eq!(
        (
            r.confusion.tp,
            r.confusion.fn_,
            r.confusion.fp,
            r.confusion.tn
        ),
        (4, 2, 1, 3)
    );
    assert!((r.kappa.unwrap() - 0.4).abs() < 1e-12);
    assert!((r.accuracy.unwrap() - 0.7).abs() < 1e-12);
    assert!((r.precision.unwrap() - 0.8).abs() < 1e-12);
    assert!((r.recall.unwrap() - 4.0 / 6.0).abs() < 1e-12);
    assert_eq!((r.matched, r.unscored, r.unmatched), (10, 1, 1));
    assert!(r.best_cutoff.is_none());
}

#[test]
fn continuous_metric_best_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let (lp, rp) = write_inputs(dir.path());
    let labels = read_labels(&lp).unwrap();
    let rows = read_rows(&rp).unwrap();
    let r = calibrate(&labels, &rows, Metric::HybridEx, None, None);
    // Verdicts at 0.9: TP 3, FP 1, FN 3, TN 3 → κ = 0.12/0.52.
    assert!((r.kappa.unwrap() - 0.12 / 0.52).abs() < 1e-12);
    let best = r.best_cutoff.unwrap();
    assert_eq!(best.cutoff, 0.4);
    assert!((best.kappa - 18.0 / 23.0).abs() < 1e-12);
    let at = calibrate(&labels, &rows, Metric::HybridEx, Some(0.4), None);
    assert!((at.kappa.unwrap() - 18.0 / 23.0).abs() < 1e-12);
}

#[test]
fn cli_prints_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (lp, rp) = write_inputs(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
        .args(["calibrate", "--labels"])
        .arg(&lp)
        .arg("--rows")
        .arg(&rp)
        .args(["--metric", "flex"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("cohen_kappa: 0.4000"), "{text}");
    assert!(text.contains("accuracy: 0.7000"));
    let out = Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
        .args(["calibrate", "--json", "--labels"])
        .arg(&lp)
        .arg("--rows")
        .arg(&rp)
        .args(["--metric", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// `calibrate --config` reads the labels and rows of the store its `[sink]` names — a JSONL
/// directory here (ClickHouse in `daemon_clickhouse`) — and agrees with `--dir` on it.
#[test]
fn cli_reads_the_configured_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("out");
    std::fs::create_dir_all(&store).unwrap();
    let (_, rp) = write_inputs(dir.path());
    std::fs::copy(&rp, store.join("evaluations.jsonl")).unwrap();
    let labels: String = (1..=10)
        .map(|i| {
            let verdict = if i <= 6 { "correct" } else { "incorrect" };
            format!(
                "{}\n",
                json!({"event_id": format!("e{i}"), "reviewer": "ana", "verdict": verdict,
                    "labelled_at": "2026-01-02T00:00:00Z"})
            )
        })
        .collect();
    std::fs::write(store.join("labels.jsonl"), labels).unwrap();
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        format!(
            "[sink]\nkind = \"jsonl\"\ndir = {:?}\n",
            store.display().to_string()
        ),
    )
    .unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
            .arg("calibrate")
            .args(args)
            .args(["--metric", "flex"])
            .env_remove("SQLGRADE__SINK__KIND")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let from_config = run(&["--config".as_ref(), config.as_os_str()]);
    let from_dir = run(&["--dir".as_ref(), store.as_os_str()]);
    assert!(from_config.contains("cohen_kappa: 0.4000"), "{from_config}");
    assert_eq!(from_config, from_dir);
}

/// Events of the first `n` NL2SQL-Bugs label lines (question + evidence, SQL, `db_id`) and their
/// plain labels: people's verdicts the correctness model can be refit on.
fn label_events(dir: &Path, n: usize) -> (std::path::PathBuf, std::path::PathBuf) {
    let path = sqlgrade_testkit::data::data_dir().join("labels/nl2sql-bugs-dev.jsonl");
    let mut events = String::new();
    let mut labels = String::new();
    for v in sqlgrade_testkit::data::read_jsonl(&path)
        .into_iter()
        .take(n)
    {
        let question = v["question"].as_str().unwrap();
        let evidence = v["evidence"].as_str().unwrap_or_default().trim();
        let id = format!("bugs-{}", v["id"]);
        events.push_str(&format!(
            "{}\n",
            json!({"event_id": id, "ts": "2026-12-01T10:00:00Z", "app_id": "bird",
                "question": question,
                "enriched_question": (!evidence.is_empty()).then(|| format!("{question} {evidence}")),
                "sql": v["sql"], "dialect": "sqlite", "db_id": v["db_id"]})
        ));
        labels.push_str(&format!(
            "{}\n",
            json!({"event_id": id, "label": v["label"]})
        ));
    }
    let ep = dir.join("events.jsonl");
    let lp = dir.join("labels.jsonl");
    std::fs::write(&ep, events).unwrap();
    std::fs::write(&lp, labels).unwrap();
    (ep, lp)
}

fn sqlgrade_cmd(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
        .args(args)
        .env_remove("SQLGRADE__SINK__KIND")
        .env_remove("SQLGRADE__STEF__MODEL")
        .output()
        .unwrap()
}

fn config_with_model(
    dir: &Path,
    name: &str,
    events: &Path,
    out: &Path,
    model: &Path,
) -> std::path::PathBuf {
    let tables = sqlgrade_testkit::data::data_dir().join("bird/tables.json");
    let config = dir.join(name);
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"file\"\npath = {:?}\n[sink]\nkind = \"jsonl\"\ndir = {:?}\n\
             [stef]\ncatalogues = [{:?}]\nmodel = {:?}\n",
            events.display().to_string(),
            out.display().to_string(),
            tables.display().to_string(),
            model.display().to_string()
        ),
    )
    .unwrap();
    config
}

/// The refit loop as a deployment runs it: rows scored under a model that knows nothing (every
/// `p_correct` 0.5), people's labels, `calibrate --fit --write` — which writes a model only
/// when it beats the current one on held-out folds with enough labels — and a `run` under the
/// written model, whose version the rows' judge identity names. Then the refusals: too few
/// labels of a kind, and model files that are missing, malformed or weigh an unknown feature
/// stop `run` and `check-config` with the path and the reason.
#[test]
fn fit_writes_a_better_model_and_run_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let (events, labels) = label_events(dir.path(), 800);
    let neutral = dir.path().join("neutral.json");
    std::fs::write(
        &neutral,
        r#"{"format": 1, "target_flag_rate": 0.1, "threshold": 0.5, "intercept": 0.0, "weights": {}}"#,
    )
    .unwrap();
    let out1 = dir.path().join("out1");
    let config = config_with_model(dir.path(), "neutral.toml", &events, &out1, &neutral);
    let run = sqlgrade_cmd(&["run".as_ref(), "--config".as_ref(), config.as_os_str()]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = read_rows(&out1.join("evaluations.jsonl")).unwrap();
    assert!(rows.iter().all(|r| r.p_correct == Some(0.5)));
    let neutral_version = rows[0].judge_identity.clone();

    let written = dir.path().join("ours.json");
    let fit = sqlgrade_cmd(&[
        "calibrate".as_ref(),
        "--fit".as_ref(),
        "--labels".as_ref(),
        labels.as_os_str(),
        "--rows".as_ref(),
        out1.join("evaluations.jsonl").as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
        "--write".as_ref(),
        written.as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&fit.stdout);
    assert!(
        fit.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&fit.stderr)
    );
    assert!(text.contains("800 labelled events"), "{text}");
    assert!(
        text.contains("refit (cross-validated)") && text.contains("beats"),
        "{text}"
    );
    let model = sqlgrade::stef::correctness::VerdictModel::parse(
        &std::fs::read_to_string(&written).unwrap(),
    )
    .expect("the written model is valid");
    assert_eq!(model.file().sources[0].name, "labels.jsonl");
    assert_eq!(model.file().sources[0].items, 800);

    let out2 = dir.path().join("out2");
    let config = config_with_model(dir.path(), "ours.toml", &events, &out2, &written);
    let run = sqlgrade_cmd(&["run".as_ref(), "--config".as_ref(), config.as_os_str()]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = read_rows(&out2.join("evaluations.jsonl")).unwrap();
    let identity = &rows[0].judge_identity;
    assert!(
        identity.ends_with(&format!("verdict={}", model.version())),
        "{identity}"
    );
    assert_ne!(identity, &neutral_version);
    let flagged = rows.iter().filter(|r| r.verdict == Some(false)).count();
    assert!(flagged > 0 && flagged < rows.len(), "{flagged} flagged");

    // Too few labels of a kind: reported, not written, exit 1.
    let refused = dir.path().join("refused.json");
    let fit = sqlgrade_cmd(&[
        "calibrate".as_ref(),
        "--fit".as_ref(),
        "--labels".as_ref(),
        labels.as_os_str(),
        "--rows".as_ref(),
        out1.join("evaluations.jsonl").as_os_str(),
        "--min-per-class".as_ref(),
        "1000".as_ref(),
        "--write".as_ref(),
        refused.as_os_str(),
    ]);
    assert_eq!(fit.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&fit.stdout).contains("not enough labels"));
    assert!(!refused.exists());

    // Model files the build cannot use stop `run` and `check-config`, naming path and reason.
    let missing = dir.path().join("missing.json");
    let malformed = dir.path().join("malformed.json");
    std::fs::write(&malformed, "{\"format\": 1,").unwrap();
    let unknown = dir.path().join("unknown.json");
    std::fs::write(
        &unknown,
        r#"{"format": 1, "target_flag_rate": 0.1, "threshold": 0.5, "intercept": 0.0, "weights": {"finding:no_such_code": -1.0}}"#,
    )
    .unwrap();
    for (model, reason) in [
        (&missing, "cannot read it"),
        (&malformed, "not a correctness model file"),
        (&unknown, "finding:no_such_code"),
    ] {
        let config = config_with_model(dir.path(), "bad.toml", &events, &out2, model);
        for command in ["run", "check-config"] {
            let out = sqlgrade_cmd(&[command.as_ref(), "--config".as_ref(), config.as_os_str()]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{command} with {}", model.display());
            assert!(
                stderr.contains(&model.display().to_string()) && stderr.contains(reason),
                "{command}: {stderr}"
            );
        }
    }
}
