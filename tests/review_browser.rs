//! The review page in a real browser: Debian's headless Chromium driven over WebDriver
//! (Debian's `chromedriver`, the `fantoccini` client).
//!
//! A live run (`sqlgrade run`, file source, JSONL sink, alerts on) replays BIRD-dev events of
//! one agent version that turns bad halfway (SuperSQL's SQL for the *wrong* question of the
//! same database), so a real score-drop alert fires and the alert service appends it to the
//! JSONL directory. One event is hostile (a `<script>` question, SQL holding HTML). Then, in
//! the browser: open the overview, follow the alert to its events, open an event, label five
//! events with the keyboard only (c / x), see that the hostile event's question and SQL are
//! shown as text, and check that `sqlgrade calibrate --dir` picks the labels up. Screenshots go
//! to `target/review-screenshots/` (test artefacts).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::actions::{InputSource as _, KeyAction, KeyActions};
use fantoccini::{Client, ClientBuilder, Locator};
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade_testkit::servers as support;

const TEST: &str = "review_page_in_chromium";
const HOSTILE_QUESTION: &str = "<script>window.pwned = 1</script> How many <b>heroes</b>?";
const HOSTILE_SQL: &str = "SELECT '<img src=x onerror=\"window.pwned=2\">' AS x FROM superhero";

fn which(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|dir| Path::new(dir).join(name))
            .find(|p| p.is_file())
    })
}

/// BIRD-dev events over the last ten minutes: 300 right answers of version v1 then 300 answers to the wrong question by
/// v2 after 300 right ones, and the hostile event.
fn write_events(path: &Path) {
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions/SuperSQL.jsonl"),
        None,
    )
    .unwrap()
    .events;
    let mut text = String::new();
    let n = events.len();
    let start = chrono::Utc::now() - chrono::Duration::seconds(601);
    for i in 0..600 {
        let mut e = events[i % n].clone();
        if i >= 300 {
            // The SQL of another question: the agent answers the wrong question.
            e.sql = events[(i * 7 + 13) % n].sql.clone();
        }
        e.event_id = format!("live-{i:04}");
        e.app_id = Some("bird-assistant".into());
        e.agent_id = Some("agent-a".into());
        e.agent_version = Some("v2".into());
        e.model = Some("gpt-4o".into());
        e.run_id = None;
        e.gold = None;
        // The last ten minutes, one event a second: the alert fires (at processing time) where
        // the events end, so the charts show it.
        e.ts = Some(rfc3339(start + chrono::Duration::seconds(i as i64)));
        text.push_str(&serde_json::to_string(&e).unwrap());
        text.push('\n');
    }
    let hostile = serde_json::json!({
        "event_id": "hostile-1", "ts": rfc3339(start), "app_id": "bird-assistant",
        "agent_id": "agent-b", "agent_version": "v1", "question": HOSTILE_QUESTION,
        "sql": HOSTILE_SQL,
    });
    text.push_str(&hostile.to_string());
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

fn rfc3339(time: chrono::DateTime<chrono::Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

const CONFIG: &str = r#"
[source]
kind = "file"
path = "EVENTS"

[sink]
kind = "jsonl"
dir = "OUT"

[alerts]
enabled = true

[alerts.defaults]
recent_window = 100
baseline_window = 200
min_samples = 80
evaluate_every = 10
alpha = 0.0001
fire_after = 3
resolve_after = 3
metrics = ["stef"]
stef_min_drop = 5.0
poor_share_min_increase = 0.0
judge_fallback_min_increase = 0.0
dead_letter_min_increase = 0.0
"#;

/// chromedriver and the Chromium it starts. Dropping it (also when an assertion fails midway,
/// before the WebDriver session is closed) kills chromedriver and every process whose command
/// line names this test's profile directory, so no browser outlives the test.
struct Driver {
    chromedriver: Child,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.chromedriver.kill();
        let _ = self.chromedriver.wait();
        let needle = self.profile.to_string_lossy().into_owned();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

async fn press(client: &Client, key: char) {
    let keys = KeyActions::new("keyboard".to_string())
        .then(KeyAction::Down { value: key })
        .then(KeyAction::Up { value: key });
    client.perform_actions(keys).await.unwrap();
}

/// Wait until the browser lands on a page other than `from` after a label (the POST, then the
/// redirect to the next event with `saved=`).
async fn wait_for_next_event(client: &Client, from: &str) -> String {
    for _ in 0..100 {
        let now = client.current_url().await.unwrap().to_string();
        if now != from && now.contains("saved=") {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = client.source().await.unwrap_or_default();
    panic!("the page did not move on from {from}: {body}");
}

async fn screenshot(client: &Client, dir: &Path, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert!(png.len() > 1000, "{name}: an empty screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// chromedriver and a headless Chromium session with its profile under `dir`.
async fn start_browser(chromium: &Path, chromedriver: &Path, dir: &Path) -> (Driver, Client) {
    let port = support::free_port();
    let profile = dir.join("chromium-profile");
    let driver = Driver {
        chromedriver: Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        profile: profile.clone(),
    };
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     "--window-size=1400,1000",
                     format!("--user-data-dir={}", profile.display())],
        }),
    );
    let mut client = None;
    for _ in 0..50 {
        match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let client = client.expect("chromedriver did not start a session");
    (driver, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_page_in_chromium() {
    let (Some(chromium), Some(chromedriver)) = (
        which(&["chromium", "chromium-browser"]),
        which(&["chromedriver"]),
    ) else {
        return support::skip(TEST, "chromium and chromedriver are not installed");
    };
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let out = dir.path().join("out");
    write_events(&events);
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        CONFIG
            .replace("EVENTS", events.to_str().unwrap())
            .replace("OUT", out.to_str().unwrap()),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_sqlgrade");
    sqlgrade_testkit::bin::run_ok(
        Command::new(bin)
            .args(["run", "--config", config.to_str().unwrap()])
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    );
    let alerts = std::fs::read_to_string(out.join("alerts.jsonl")).expect("an alert fired");
    assert!(alerts.contains("[FIRING]"), "{alerts}");

    // The review page over the run's JSONL directory.
    let store = std::sync::Arc::new(sqlgrade::stores::JsonlStore::new(&out));
    let state = std::sync::Arc::new(sqlgrade::review_page::ReviewState::new(store, None));
    let server = sqlgrade::review_page::serve("127.0.0.1:0", state)
        .await
        .unwrap();
    let base = format!("http://{}", server.local_addr);

    let (driver, client) = start_browser(&chromium, &chromedriver, dir.path()).await;
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/review-screenshots");
    std::fs::create_dir_all(&shots).unwrap();

    // Overview: the series and the firing alert.
    client.goto(&base).await.unwrap();
    let series = client.find(Locator::Css("#series")).await.unwrap();
    assert!(series.text().await.unwrap().contains("agent-a"));
    // The score-drop alert is a marker on every chart.
    let markers = client
        .find_all(Locator::Css("svg#chart-phi line.alert-marker"))
        .await
        .unwrap();
    assert!(!markers.is_empty(), "no alert marker on the Φ chart");
    screenshot(&client, &shots, "1-overview").await;
    // Follow the alert to its events.
    client
        .find(Locator::Css("a.alert-events"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let queue = client.find(Locator::Css("#queue")).await.unwrap();
    let queue_text = queue.text().await.unwrap();
    assert!(
        queue_text.contains("in a firing alert's window"),
        "{queue_text}"
    );
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .contains("alert=")
    );
    screenshot(&client, &shots, "2-alert-queue").await;
    // Open the first event; name the reviewer once.
    client
        .find(Locator::Css("a.event-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client.find(Locator::Id("question")).await.unwrap();
    client
        .find(Locator::Id("reviewer"))
        .await
        .unwrap()
        .send_keys("ana")
        .await
        .unwrap();
    screenshot(&client, &shots, "3-event").await;
    // Label five events with the keyboard alone.
    let mut labelled = Vec::new();
    for (i, key) in ['c', 'x', 'c', 'x', 'x'].into_iter().enumerate() {
        // Leave the name field so the shortcut reaches the page.
        client
            .find(Locator::Css("h1"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let id = client
            .find(Locator::Id("event-id"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let before = client.current_url().await.unwrap().to_string();
        press(&client, key).await;
        let after = wait_for_next_event(&client, &before).await;
        assert!(
            !after.contains(&format!("/event/{id}?")),
            "label {i}: still on {id}: {after}"
        );
        labelled.push((id, key));
    }
    screenshot(&client, &shots, "4-after-five-labels").await;
    let message = client
        .find(Locator::Id("message"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(message.contains(&labelled[4].0), "{message}");

    // The line-rate verdict learned from people: each event page says why its p_correct is
    // what it is; the overview plots p_correct against the five labels and shows the share
    // correct from the line rate beside the LLM's.
    let mut explained = 0;
    for (id, _) in &labelled {
        client.goto(&format!("{base}/event/{id}")).await.unwrap();
        client.find(Locator::Css(".p-correct")).await.unwrap();
        if let Ok(why) = client.find(Locator::Id("contributions")).await {
            let text = why.text().await.unwrap();
            assert!(
                text.contains("why p_correct is") && text.contains("pc-"),
                "{text}"
            );
            explained += 1;
        }
    }
    assert!(
        explained > 0,
        "no labelled event page explains its p_correct"
    );
    client.goto(&base).await.unwrap();
    let points = client
        .find_all(Locator::Css("#reliability circle.bin"))
        .await
        .unwrap();
    assert!(!points.is_empty(), "the reliability plot has no point");
    let bins = client
        .find(Locator::Css("#reliability-bins"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(bins.contains("share correct"), "{bins}");
    client
        .find(Locator::Css("td.people-estimate"))
        .await
        .unwrap();
    screenshot(&client, &shots, "4b-overview-reliability").await;

    // Hostile content is text, and no injected script ran.
    client
        .goto(&format!("{base}/event/hostile-1"))
        .await
        .unwrap();
    let question = client.find(Locator::Id("question")).await.unwrap();
    assert_eq!(question.text().await.unwrap(), HOSTILE_QUESTION);
    let sql = client.find(Locator::Id("sql")).await.unwrap();
    assert_eq!(sql.text().await.unwrap(), HOSTILE_SQL);
    let pwned = client
        .execute(
            "return [window.pwned === undefined, document.scripts.length]",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(pwned, serde_json::json!([true, 1]));
    screenshot(&client, &shots, "5-hostile-event").await;
    client.close().await.unwrap();
    drop(driver);
    server.stop();

    // The labels are data: five lines in labels.jsonl, and calibrate reads them directly.
    let labels = std::fs::read_to_string(out.join("labels.jsonl")).unwrap();
    assert_eq!(labels.lines().count(), 5, "{labels}");
    for (id, key) in &labelled {
        let verdict = if *key == 'c' { "correct" } else { "incorrect" };
        assert!(
            labels.contains(&format!(
                "\"event_id\":\"{id}\",\"reviewer\":\"ana\",\"verdict\":\"{verdict}\""
            )),
            "{id} {verdict}: {labels}"
        );
    }
    let text = sqlgrade_testkit::bin::run_ok(Command::new(bin).args([
        "calibrate",
        "--dir",
        out.to_str().unwrap(),
        "--metric",
        "stef",
    ]));
    assert!(text.contains("labels: 5 (matched 5"), "{text}");
    assert!(text.contains("reviewer ana: 5 pairs"), "{text}");
}

/// The overview as a monitor, on the embedded example (`sqlgrade run` with its defaults) written
/// to a JSONL directory and to ClickHouse: the ClickHouse store's rollup gives the same hourly
/// cells and finding counts as the JSONL rows, and in Chromium both pages draw a line per series
/// (nine) on each of the three charts and compare each app's agent versions. Screenshots go to
/// `target/review-screenshots/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_in_chromium_on_jsonl_and_clickhouse() {
    const TEST: &str = "monitor_in_chromium_on_jsonl_and_clickhouse";
    let (Some(chromium), Some(chromedriver)) = (
        which(&["chromium", "chromium-browser"]),
        which(&["chromedriver"]),
    ) else {
        return support::skip(TEST, "chromium and chromedriver are not installed");
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let bin = env!("CARGO_BIN_EXE_sqlgrade");
    // The main job as a newcomer runs it (the embedded default), into a JSONL directory.
    sqlgrade_testkit::bin::run_ok(
        Command::new(bin)
            .arg("run")
            .env("SQLGRADE__SINK__DIR", &out)
            .env_remove("SQLGRADE__SINK__KIND")
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    );
    let jsonl: std::sync::Arc<dyn sqlgrade::stores::ReviewStore> =
        std::sync::Arc::new(sqlgrade::stores::JsonlStore::new(&out));

    // The same run into ClickHouse.
    let clickhouse = support::ClickHouse::start_in(dir.path());
    let clickhouse_store: Option<std::sync::Arc<dyn sqlgrade::stores::ReviewStore>> =
        match &clickhouse {
            Ok(ch) => {
                let settings = sqlgrade::stores::clickhouse::config::ClickHouseConfig {
                    url: Some(ch.url()),
                    database: "sg_monitor".into(),
                    ..Default::default()
                };
                sqlgrade::stores::clickhouse::migrate::migrate(&settings, None)
                    .await
                    .unwrap();
                sqlgrade_testkit::bin::run_ok(
                    Command::new(bin)
                        .arg("run")
                        .env("SQLGRADE__SINK__KIND", "clickhouse")
                        .env("SQLGRADE__CLICKHOUSE__URL", ch.url())
                        .env("SQLGRADE__CLICKHOUSE__DATABASE", "sg_monitor")
                        .current_dir(env!("CARGO_MANIFEST_DIR")),
                );
                Some(std::sync::Arc::new(sqlgrade::stores::ClickHouseStore::new(
                    &settings, 5_000,
                )))
            }
            Err(e) => {
                support::skip(TEST, &format!("the ClickHouse half: {e}"));
                None
            }
        };
    let from_rows = jsonl.monitor().await.unwrap();
    if let Some(store) = &clickhouse_store {
        let rolled_up = store.monitor().await.unwrap();
        assert_same_monitor(&from_rows, &rolled_up);
        // The breakdowns' rollups (migration 018) hold the rows' cells too.
        let from_rows = jsonl.breakdown().await.unwrap();
        assert!(!from_rows.cells.is_empty() && !from_rows.findings.is_empty());
        assert_same_breakdown(&from_rows, &store.breakdown().await.unwrap());
    }

    let (driver, client) = start_browser(&chromium, &chromedriver, dir.path()).await;
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/review-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut stores = vec![("jsonl", jsonl)];
    stores.extend(clickhouse_store.map(|s| ("clickhouse", s)));
    for (name, store) in stores {
        let state = std::sync::Arc::new(sqlgrade::review_page::ReviewState::new(store, None));
        let server = sqlgrade::review_page::serve("127.0.0.1:0", state)
            .await
            .unwrap();
        let base = format!("http://{}", server.local_addr);
        client.goto(&base).await.unwrap();
        for chart in ["chart-phi", "chart-flagged", "chart-correct"] {
            let lines = client
                .find_all(Locator::Css(&format!("svg#{chart} path.series-line")))
                .await
                .unwrap();
            assert_eq!(lines.len(), 9, "{name}: {chart}");
        }
        let comparisons = client
            .find_all(Locator::Css("table.comparison"))
            .await
            .unwrap();
        assert_eq!(comparisons.len(), 3, "{name}: one per app's sql-copilot");
        let text = comparisons[0].text().await.unwrap();
        assert!(
            text.contains("2026.11.1") && text.contains("2026.11.2") && text.contains("Δ"),
            "{name}: {text}"
        );
        screenshot(&client, &shots, &format!("6-monitor-{name}")).await;
        // Where it goes wrong: tables, columns and question types, ranked, each with its
        // sparkline and a link to its events in the queue.
        let tables = client.find_all(Locator::Css("table.where")).await.unwrap();
        assert_eq!(tables.len(), 3, "{name}");
        let rows = client
            .find_all(Locator::Css("table.where[data-by=table] tr.where-row"))
            .await
            .unwrap();
        assert!(!rows.is_empty(), "{name}: no table flagged");
        let spark = client
            .find(Locator::Css("table.where tr.where-row svg.sparkline path"))
            .await
            .unwrap();
        assert!(
            spark
                .attr("d")
                .await
                .unwrap()
                .is_some_and(|d| d.starts_with('M')),
            "{name}"
        );
        let link = client
            .find(Locator::Css("table.where[data-by=table] tr.where-row a"))
            .await
            .unwrap();
        let href = link.attr("href").await.unwrap().unwrap();
        assert!(href.starts_with("/queue?element=table%3A"), "{href}");
        link.click().await.unwrap();
        let queued = client
            .find_all(Locator::Css("table#queue a.event-link"))
            .await
            .unwrap();
        assert!(!queued.is_empty(), "{name}: {href} lists no event");
        client.goto(&base).await.unwrap();
        // The filters apply to the charts: one app, three series.
        client
            .goto(&format!("{base}/?app=toxicology-lab"))
            .await
            .unwrap();
        let lines = client
            .find_all(Locator::Css("svg#chart-phi path.series-line"))
            .await
            .unwrap();
        assert_eq!(lines.len(), 3, "{name}: filtered");
        let series = client.find(Locator::Css("#series")).await.unwrap();
        assert!(!series.text().await.unwrap().contains("superhero-analytics"));
        server.stop();
    }
    client.close().await.unwrap();
    drop(driver);
}

/// The ClickHouse breakdown rollups' cells and finding counts equal the JSONL rows' (sums to
/// rounding).
fn assert_same_breakdown(
    rows: &sqlgrade::stores::breakdown::BreakdownData,
    rollup: &sqlgrade::stores::breakdown::BreakdownData,
) {
    let key = |c: &sqlgrade::stores::breakdown::BreakdownCell| {
        (
            c.hour,
            c.app.clone(),
            c.agent.clone(),
            c.version.clone(),
            c.dimension.clone(),
            c.element.clone(),
        )
    };
    let mut a: Vec<_> = rows.cells.iter().collect();
    let mut b: Vec<_> = rollup.cells.iter().collect();
    a.sort_by_key(|c| key(c));
    b.sort_by_key(|c| key(c));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(key(x), key(y));
        assert_eq!(
            (x.events, x.scored, x.flagged),
            (y.events, y.scored, y.flagged),
            "{x:?}"
        );
        assert!((x.p_sum - y.p_sum).abs() < 1e-6, "{x:?} {y:?}");
    }
    let sorted = |f: &[sqlgrade::stores::breakdown::BreakdownFinding]| {
        let mut f = f.to_vec();
        f.sort_by(|p, q| {
            (
                p.hour,
                &p.app,
                &p.agent,
                &p.version,
                &p.dimension,
                &p.element,
                &p.code,
            )
                .cmp(&(
                    q.hour,
                    &q.app,
                    &q.agent,
                    &q.version,
                    &q.dimension,
                    &q.element,
                    &q.code,
                ))
        });
        f
    };
    let (a, b) = (sorted(&rows.findings), sorted(&rollup.findings));
    let only_rows: Vec<_> = a.iter().filter(|f| !b.contains(f)).collect();
    let only_rollup: Vec<_> = b.iter().filter(|f| !a.contains(f)).collect();
    assert!(
        only_rows.is_empty() && only_rollup.is_empty(),
        "only in the rows: {only_rows:#?}\nonly in the rollup: {only_rollup:#?}"
    );
}

/// The ClickHouse rollup's cells equal the JSONL rows' (sums to rounding).
fn assert_same_monitor(
    rows: &sqlgrade::review_page::monitor::MonitorData,
    rollup: &sqlgrade::review_page::monitor::MonitorData,
) {
    let key = |c: &sqlgrade::review_page::monitor::MonitorCell| {
        (c.hour, c.app.clone(), c.agent.clone(), c.version.clone())
    };
    let mut a: Vec<_> = rows.cells.iter().collect();
    let mut b: Vec<_> = rollup.cells.iter().collect();
    a.sort_by_key(|c| key(c));
    b.sort_by_key(|c| key(c));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(key(x), key(y));
        assert_eq!(
            (x.events, x.scored, x.flagged),
            (y.events, y.scored, y.flagged),
            "{x:?}"
        );
        for (m, n) in [
            (&x.estimate.phi, &y.estimate.phi),
            (&x.estimate.correct, &y.estimate.correct),
            (&x.estimate.phi_correction, &y.estimate.phi_correction),
            (
                &x.estimate.correct_correction,
                &y.estimate.correct_correction,
            ),
        ] {
            assert_eq!(m.n, n.n, "{x:?}");
            assert!(
                (m.sum - n.sum).abs() < 1e-6 && (m.sum_sq - n.sum_sq).abs() < 1e-6,
                "{x:?} {y:?}"
            );
        }
    }
    let mut f = rows.findings.clone();
    let mut g = rollup.findings.clone();
    f.sort_by(|p, q| {
        (&p.app, &p.agent, &p.version, &p.code).cmp(&(&q.app, &q.agent, &q.version, &q.code))
    });
    g.sort_by(|p, q| {
        (&p.app, &p.agent, &p.version, &p.code).cmp(&(&q.app, &q.agent, &q.version, &q.code))
    });
    assert_eq!(f, g);
}
