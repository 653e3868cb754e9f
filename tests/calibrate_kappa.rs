//! `calibrate` on a small labelled file with hand-computed κ (library and CLI).

use std::path::Path;
use std::process::Command;

use serde_json::json;
use sqlgrade::calibrate::{calibrate, read_labels, read_rows};
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
