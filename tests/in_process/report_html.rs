//! `sqlgrade report` on a real scored run: two agent versions answering BIRD (SuperSQL's and
//! DAIL-SQL's predictions), STEF rows from the scorer plus `ex` rows carrying the benchmark's
//! execution verdicts. Checks the terminal summary, the HTML, and — when Debian's `chromium` is
//! installed — that the page renders in headless Chromium (screenshot kept under target/).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::evaluation::{EvaluationRow, Metric, RowStatus};
use sqlgrade::score::Scorer;

async fn run_rows(
    system: &str,
    version: &str,
) -> (Vec<EvaluationRow>, Vec<sqlgrade::event::Event>) {
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let mut events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions").join(format!("{system}.jsonl")),
        Some("nightly-42"),
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
    let scorer = Scorer::deterministic();
    let mut rows = Vec::new();
    for event in &mut events {
        event.event_id = format!("{version}-{}", event.event_id);
        event.agent_version = Some(version.into());
        rows.extend(scorer.score_at(event, "2026-11-21T00:00:00Z").await);
        let qid = event
            .event_id
            .trim_start_matches(&format!("{version}-"))
            .to_string();
        let mut row = EvaluationRow::for_event(event, "2026-11-21T00:00:00Z", Metric::Ex);
        row.verdict = Some(ex[&qid]);
        row.value = f64::from(u8::from(ex[&qid]));
        rows.push(row);
    }
    (rows, events)
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")?
                .to_str()?
                .split(':')
                .map(|d| Path::new(d).join(name))
                .find(|p| p.is_file())
        })
}

#[tokio::test]
async fn report_command_writes_terminal_summary_and_html() {
    let (mut rows, mut events) = run_rows("SuperSQL", "2026.11.2").await;
    let (rows_b, events_b) = run_rows("DAIL-SQL", "2026.11.3").await;
    rows.extend(rows_b);
    events.extend(events_b);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("evaluations.jsonl");
    let mut text = String::new();
    for row in &rows {
        text.push_str(&serde_json::to_string(row).unwrap());
        text.push('\n');
    }
    // ESM rows for 15 SuperSQL events: 5 scored (all correct) and 10 whose gold query the
    // metric cannot parse — not scored, so the mean is 1.000 over 5 with coverage 5/15.
    for (i, base) in rows
        .iter()
        .filter(|r| r.metric == Metric::Ex && r.agent_version.as_deref() == Some("2026.11.2"))
        .take(15)
        .enumerate()
    {
        let mut esm = base.clone();
        esm.metric = Metric::Esm;
        if i < 5 {
            (esm.value, esm.verdict, esm.status) = (1.0, Some(true), RowStatus::Ok);
        } else {
            (esm.value, esm.verdict, esm.status) = (0.0, None, RowStatus::GoldParseError);
        }
        text.push_str(&serde_json::to_string(&esm).unwrap());
        text.push('\n');
    }
    // A row of another run must be ignored.
    let mut other = rows[0].clone();
    other.run_id = Some("other-run".into());
    text.push_str(&serde_json::to_string(&other).unwrap());
    text.push('\n');
    std::fs::write(&input, text).unwrap();
    let html_path = dir.path().join("report.html");

    let stdout = sqlgrade_testkit::bin::run_ok(
        Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
            .args(["report", "--run-id", "nightly-42", "--input"])
            .arg(&input)
            .arg("--out")
            .arg(&html_path),
    );
    eprintln!("{stdout}");
    assert!(stdout.contains("run nightly-42 (1743 rows)"), "{stdout}");
    let line = |v: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(v))
            .unwrap()
            .to_string()
    };
    // EX means computed from the reference verdicts: 308/432 and 274/432.
    assert!(line("2026.11.2").contains("0.713"), "{stdout}");
    assert!(line("2026.11.3").contains("0.634"), "{stdout}");
    assert!(line("2026.11.2").contains(" 432 "));
    // Means over scored rows with their interval and coverage.
    let esm = stdout
        .lines()
        .find(|l| l.contains("2026.11.2") && l.contains(" esm "))
        .unwrap_or_else(|| panic!("no esm interval line: {stdout}"));
    assert!(
        esm.contains("1.000 [") && esm.contains("scored 5/15 (33.3%)"),
        "{esm}"
    );
    let ex = stdout
        .lines()
        .find(|l| l.contains("2026.11.2") && l.contains(" ex "))
        .unwrap();
    assert!(
        ex.contains("0.713 [0.669, 0.754]  scored 432/432 (100.0%)"),
        "{ex}"
    );

    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("aria-label=\"Φ histogram").count(), 2);
    assert!(html.contains("aria-label=\"tier shares\""));
    assert!(html.contains("aria-label=\"metric comparison\""));
    // Self-contained: no external resources.
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http") && !html.contains("<script")
    );

    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED: chromium not installed (apt-get install -y chromium); HTML not rendered"
        );
        return;
    };
    let shot_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let png = shot_dir.join("report.png");
    let _ = std::fs::remove_file(&png);
    std::fs::copy(&html_path, shot_dir.join("report.html")).unwrap();
    let status = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--window-size=1280,2200",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html_path.display()))
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 20_000,
        "screenshot suspiciously small: {} bytes",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());
}

/// Two systems backfilled over the same BIRD questions (same `event_id`, different agent): the
/// report compares them pairwise. The McNemar p-value is checked against the exact binomial tail
/// computed here in integers from the official evaluator's verdicts.
#[test]
fn report_compares_two_systems_on_the_same_items() {
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let verdicts = |system: &str| -> HashMap<String, bool> {
        std::fs::read_to_string(bird.join("reference").join(format!("ex_{system}.jsonl")))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["question_id"].to_string(), v["ex"].as_i64().unwrap() == 1)
            })
            .collect()
    };
    let (a, b) = (verdicts("SuperSQL"), verdicts("DAIL-SQL"));
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("evaluations.jsonl");
    let mut text = String::new();
    for (system, ex) in [("SuperSQL", &a), ("DAIL-SQL", &b)] {
        for (qid, ok) in ex {
            let row = serde_json::json!({
                "event_id": qid, "ts": "2026-11-21T00:00:00Z", "agent_id": system,
                "run_id": "cmp", "metric": "ex", "value": if *ok { 1.0 } else { 0.0 },
                "verdict": ok, "status": "ok", "details": {}
            });
            text.push_str(&row.to_string());
            text.push('\n');
        }
    }
    std::fs::write(&input, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
        .args(["report", "--run-id", "cmp", "--input"])
        .arg(&input)
        .arg("--out")
        .arg(dir.path().join("cmp.html"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    // Variants in name order: A = DAIL-SQL, B = SuperSQL.
    let dail_only = a.iter().filter(|(q, ok)| !**ok && b[*q]).count() as u32;
    let super_only = a.iter().filter(|(q, ok)| **ok && !b[*q]).count() as u32;
    let n = dail_only + super_only;
    assert!(n <= 120, "exact check needs u128: n = {n}");
    let choose = |n: u32, k: u32| -> u128 {
        (0..k).fold(1u128, |acc, i| acc * u128::from(n - i) / u128::from(i + 1))
    };
    let tail: u128 = (0..=dail_only.min(super_only)).map(|k| choose(n, k)).sum();
    let p = (2.0 * (tail as f64) / 2f64.powi(n as i32)).min(1.0);
    let want = if p < 1e-4 {
        "p = < 0.0001".to_string()
    } else {
        format!("p = {p:.4}")
    };
    let line = stdout
        .lines()
        .find(|l| l.contains("A = DAIL-SQL vs B = SuperSQL") && l.contains(" ex "))
        .unwrap_or_else(|| panic!("no comparison line: {stdout}"));
    assert!(line.contains("0.634 vs 0.713 on 432 items"), "{line}");
    assert!(line.contains(&want), "{line} vs {want}");
    assert!(
        line.contains(&format!(
            "right for A only {dail_only}, right for B only {super_only}"
        )),
        "{line}"
    );
    let html = std::fs::read_to_string(dir.path().join("cmp.html")).unwrap();
    assert!(html.contains("Paired comparisons") && html.contains("McNemar exact"));
}
