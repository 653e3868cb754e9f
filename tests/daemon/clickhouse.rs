//! ClickHouse side against a real server (Debian's 18.16 here): migrations apply once and are
//! idempotent, the sink stores batches idempotently, holds a batch while the server is down and
//! finishes it after a restart, and every query the project ships (Grafana dashboard) runs and
//! reads deduplicated data.

use sqlgrade_testkit::servers as support;

use sqlgrade_testkit::dashboard;

use std::time::Duration;

use sqlgrade::config::ClickHouseConfig;
use sqlgrade::evaluation::{DeadLetter, EvaluationRow, Metric, RowStatus, StefColumns};
use sqlgrade::event::Event;
use sqlgrade::stores::clickhouse::judge_cache::JudgeCacheStore;
use sqlgrade::stores::clickhouse::migrate::{MIGRATIONS, migrate};
use sqlgrade::stores::clickhouse::sink::ClickHouseSink;
use sqlgrade::stores::{Batch, Sink};
use support::ClickHouse;

fn settings(ch: &ClickHouse, database: &str) -> ClickHouseConfig {
    ClickHouseConfig {
        url: Some(ch.url()),
        database: database.into(),
        retry_initial_ms: 50,
        retry_max_ms: 500,
        ..ClickHouseConfig::default()
    }
}

/// The review page over this server: the store reads rows, an event with its inputs, and
/// writes labels that `labels FINAL` keeps one per (event, reviewer); the pages render and
/// `calibrate`'s ClickHouse path pairs the labels with the rows.
async fn review_page_over_clickhouse(s: &ClickHouseConfig) {
    use sqlgrade::stores::{ClickHouseStore, ReviewStore as _};
    let store = std::sync::Arc::new(ClickHouseStore::new(s, 5_000));
    let rows = store.rows().await.unwrap();
    assert_eq!(rows.len(), 1000);
    let (rows, inputs) = store.event("ev-00003").await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].ts, "2026-11-21T10:00:00Z");
    let inputs = inputs.unwrap();
    assert_eq!(inputs.sql, event_inputs(3).sql);
    assert_eq!(inputs.result, event_inputs(3).result);
    assert!(inputs.result.is_some());
    for (verdict, at) in [
        ("correct", "2026-11-24T10:00:00Z"),
        ("incorrect", "2026-11-24T10:00:05Z"),
    ] {
        let label = sqlgrade::review::HumanLabel::validated(
            "ev-00003",
            "ana",
            verdict,
            "",
            "a <b>note</b>",
            at.into(),
        )
        .unwrap();
        store.add_label(&label).await.unwrap();
    }
    let labels = store.labels().await.unwrap();
    assert_eq!(labels.len(), 1, "{labels:?}");
    assert_eq!(labels[0].verdict, sqlgrade::review::LabelVerdict::Incorrect);
    assert_eq!(labels[0].labelled_at, "2026-11-24T10:00:05Z");
    let paired = store.rows_of(&["ev-00003".to_string()]).await.unwrap();
    assert!(!paired.is_empty());
    assert!(paired.iter().all(|r| r.known_metric().is_some()));
    // `calibrate --config` reads the labels table and the labelled events' rows directly.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ch.toml");
    std::fs::write(
        &config,
        format!(
            "[sink]\nkind = \"clickhouse\"\n[clickhouse]\nurl = {:?}\ndatabase = {:?}\n",
            s.url.clone().unwrap(),
            s.database
        ),
    )
    .unwrap();
    let text = sqlgrade_testkit::bin::run_ok(
        std::process::Command::new(env!("CARGO_BIN_EXE_sqlgrade")).args([
            "calibrate",
            "--config",
            config.to_str().unwrap(),
            "--metric",
            "stef",
        ]),
    );
    assert!(
        text.contains("labels: 1 (matched 1, no row 0, unscored 0)"),
        "{text}"
    );
    assert!(text.contains("reviewer ana: 1 pairs"), "{text}");
    let state = std::sync::Arc::new(sqlgrade::review_page::ReviewState::new(store, None));
    let server = sqlgrade::review_page::serve("127.0.0.1:0", state)
        .await
        .unwrap();
    let base = format!("http://{}", server.local_addr);
    let http = reqwest::Client::new();
    for path in ["/", "/queue", "/event/ev-00003"] {
        let page = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(page.status(), 200, "{path}");
        let text = page.text().await.unwrap();
        assert!(!text.contains("<b>note"), "{path}: the note is escaped");
    }
    let event = http
        .get(format!("{base}/event/ev-00003"))
        .send()
        .await
        .unwrap();
    let text = event.text().await.unwrap();
    assert!(text.contains("a &lt;b&gt;note"), "{text}");
    assert!(text.contains("id=\"result-rows\""), "{text}");
    assert!(text.contains("2 row(s)") && text.contains("7 ms"), "{text}");
    assert!(
        text.contains("&lt;script&gt;x&lt;&#x2f;script&gt;") && !text.contains("<script>x"),
        "{text}"
    );
    assert!(
        text.contains("<td>NULL</td>") && text.contains("<td>2.5</td>"),
        "{text}"
    );
    server.stop();
}

fn event_inputs(i: usize) -> sqlgrade::review::EventInputs {
    let corpus = support::corpus();
    let mut v = corpus[i % corpus.len()].clone();
    v["event_id"] = serde_json::Value::String(format!("ev-{i:05}"));
    if i == 3 {
        // The agent's own result, with a hostile cell: stored, read back, shown escaped.
        v["result"] = serde_json::json!({"row_count": 2, "columns": ["name", "n"],
            "rows": [["<script>x</script>", 1], [null, 2.5]], "elapsed_ms": 7});
    }
    sqlgrade::review::EventInputs::from_event(Event::from_value(v).unwrap(), "2026-11-21T10:00:00Z")
}

fn stef_row(i: usize) -> EvaluationRow {
    let corpus = support::corpus();
    let mut v = corpus[i % corpus.len()].clone();
    v["event_id"] = serde_json::Value::String(format!("ev-{i:05}"));
    let event = Event::from_value(v).unwrap();
    let mut row = EvaluationRow::for_event(&event, "2026-11-21T10:00:00Z", Metric::Stef);
    row.value = (i % 101) as f64;
    row.verdict = Some(i.is_multiple_of(2));
    row.status = if i.is_multiple_of(7) {
        RowStatus::ParseError
    } else if i.is_multiple_of(11) {
        RowStatus::SqlTooLarge
    } else {
        RowStatus::Ok
    };
    // Both forms of `details`: a value tree, and JSON text rendered once (the line-rate row's).
    row.details = if i.is_multiple_of(2) {
        serde_json::json!({"i": i}).into()
    } else {
        sqlgrade::evaluation::Details::rendered(&serde_json::json!({"i": i}))
    };
    row.stef = Some(StefColumns {
        quality_tier: sqlgrade::stef::QualityTier::ALL[i % 4],
        filter_status: "fully_applied".into(),
        semantic_verdict: "correct".into(),
        confidence: 0.9,
        confidence_tier: sqlgrade::stef::ConfidenceTier::High,
        sigma_filters: 5,
        sigma_verdict: 5,
        leniency: 0,
        rules_fired: vec!["safety_limit".into()],
        enrichment_status: "absent".into(),
        judge: "deterministic".into(),
        judge_cached: i.is_multiple_of(3),
        prompt_version: None,
        judge_identity: "deterministic sqlgrade=0.1.0 rules=r1".into(),
        rules_version: "r1".into(),
        prompt_tokens: 0,
        completion_tokens: 0,
        latency_us: 120,
        p_correct: Some((i % 10) as f64 / 10.0),
    });
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_schema_sink_and_dashboard_queries() {
    let _servers = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let mut ch = match ClickHouse::start_in(dir.path()) {
        Ok(ch) => ch,
        Err(e) => return support::skip("clickhouse_schema_sink_and_dashboard_queries", &e),
    };

    let t0 = std::time::Instant::now();
    // Migrations: first run applies everything, second run nothing.
    let s = settings(&ch, "sg_test");
    let first = migrate(&s, None).await.unwrap();
    assert_eq!(first.applied.len(), MIGRATIONS.len());
    let second = migrate(&s, None).await.unwrap();
    assert!(second.applied.is_empty());
    assert_eq!(second.already_applied.len(), MIGRATIONS.len());
    assert_eq!(
        ch.count("SELECT count() FROM sg_test.schema_migrations"),
        MIGRATIONS.len() as u64
    );

    eprintln!("migrations: {:?}", t0.elapsed());
    // Sink: 1,000 rows + 3 dead letters, then the same batch again (redelivery).
    let mut sink = ClickHouseSink::new(&s);
    let batch = Batch {
        rows: (0..1000).map(stef_row).collect(),
        inputs: (0..1000).map(event_inputs).collect(),
        dead_letters: vec![
            DeadLetter::new("kafka:t/0@1", "malformed JSON: x", b"{oops"),
            DeadLetter::new("kafka:t/0@2", "missing required field `question`", b"{}"),
            DeadLetter::new("kafka:t/1@7", "payload is not valid UTF-8", b"\xff\xfe"),
        ],
    };
    sink.write(batch.clone()).await.unwrap();
    sink.write(batch).await.unwrap();
    eprintln!("writes: {:?}", t0.elapsed());
    assert_eq!(
        ch.count("SELECT count() FROM sg_test.evaluations FINAL WHERE metric = 'stef'"),
        1000
    );
    assert_eq!(
        ch.count("SELECT uniqExact(event_id) FROM sg_test.evaluations FINAL WHERE metric = 'stef'"),
        1000
    );
    assert_eq!(
        ch.count("SELECT count() FROM sg_test.dead_letters FINAL"),
        3
    );
    // Each event's inputs, once (the redelivered batch collapses), with its SQL verbatim.
    assert_eq!(
        ch.count("SELECT count() FROM sg_test.event_inputs FINAL"),
        1000
    );
    let stored = ch.query(
        "SELECT sql, question FROM sg_test.event_inputs FINAL WHERE event_id = 'ev-00003' \
         FORMAT JSONEachRow",
    );
    let stored: serde_json::Value = serde_json::from_str(stored.trim()).unwrap();
    assert_eq!(stored["sql"], event_inputs(3).sql.as_str());
    assert_eq!(stored["question"], event_inputs(3).question.as_str());
    review_page_over_clickhouse(&s).await;
    let not_utf8 = ch.query("SELECT payload_encoding, payload FROM sg_test.dead_letters FINAL WHERE source = 'kafka:t/1@7'");
    assert_eq!(not_utf8.trim(), "base64\t//4=");
    // Columns round-trip (Nullable, Array, UInt8 flags).
    let row = ch.query("SELECT event_id, metric, value, verdict, status, quality_tier, rules_fired, judge_cached FROM sg_test.evaluations FINAL WHERE event_id = 'ev-00007'");
    assert_eq!(
        row.trim(),
        "ev-00007\tstef\t7\t0\tparse_error\tpoor\t['safety_limit']\t0"
    );
    // The line-rate row's p_correct (migration 016) round-trips, and the estimates view reads it.
    assert_eq!(
        ch.query("SELECT p_correct, revised_p_correct, revised_correct FROM sg_test.evaluations FINAL WHERE event_id = 'ev-00007'").trim(),
        "0.7\t\\N\t\\N"
    );
    let mean_p = ch.query(
        "SELECT round(sum(events * mean_p_correct) / sum(events), 6) FROM sg_test.stef_estimates_hourly",
    );
    let detail_p = ch.query(
        "SELECT round(avg(p_correct), 6) FROM sg_test.evaluations FINAL WHERE metric = 'stef' AND status IN ('ok', 'judge_fallback')",
    );
    assert_eq!(mean_p.trim(), detail_p.trim());
    // `details` is stored as the same JSON text whichever form the row held it in.
    let details = ch.query("SELECT event_id, details FROM sg_test.evaluations FINAL WHERE event_id IN ('ev-00007', 'ev-00008') ORDER BY event_id");
    assert_eq!(details.trim(), "ev-00007\t{\"i\":7}\nev-00008\t{\"i\":8}");
    // The rollup counts distinct events, so the redelivered batch is not double counted.
    assert_eq!(
        ch.count("SELECT uniqMerge(events) FROM sg_test.evaluations_hourly WHERE metric = 'stef'"),
        1000
    );
    assert_eq!(
        ch.count(
            "SELECT uniqIfMerge(tier_poor) FROM sg_test.evaluations_hourly WHERE metric = 'stef'"
        ),
        250
    );
    // The scored rollup (migration 009) leaves the 78 sql_too_large rows out of the mean and
    // agrees with the detail table.
    assert_eq!(
        ch.count("SELECT uniqIfMerge(scored) FROM sg_test.evaluations_scored_hourly WHERE metric = 'stef'"),
        922
    );
    let rollup = ch.query(
        "SELECT round(avgIfMerge(value_avg), 6) FROM sg_test.evaluations_scored_hourly WHERE metric = 'stef'",
    );
    let detail = ch.query(
        "SELECT round(avg(value), 6) FROM sg_test.evaluations FINAL WHERE metric = 'stef' AND status != 'sql_too_large'",
    );
    assert_eq!(rollup.trim(), detail.trim());

    // Two benchmark runs over the same question keep their own rows (run_key in the sorting
    // key, migration 010); a redelivered row of one run still collapses.
    let run_row = |run: &str, value: f64| {
        let mut row = stef_row(1);
        row.event_id = "question-195".into();
        row.metric = Metric::Ex;
        row.stef = None;
        row.run_id = Some(run.into());
        row.value = value;
        row
    };
    for rows in [
        vec![run_row("SuperSQL", 1.0), run_row("DAIL-SQL", 0.0)],
        vec![run_row("SuperSQL", 1.0)],
    ] {
        sink.write(Batch {
            rows,
            inputs: vec![],
            dead_letters: vec![],
        })
        .await
        .unwrap();
    }
    assert_eq!(
        ch.query("SELECT groupArray(run_id) FROM (SELECT run_id FROM sg_test.evaluations FINAL WHERE event_id = 'question-195' ORDER BY run_id)").trim(),
        "['DAIL-SQL','SuperSQL']"
    );

    // Every query in the Grafana dashboard runs on this server.
    let queries = dashboard::dashboard_queries();
    for q in &queries {
        let sql = dashboard::grafana_to_sql(q);
        let result = support::http_post(ch.http_port, "/?database=sg_test", &sql);
        assert!(result.is_ok(), "dashboard query failed: {sql}\n{result:?}");
        assert!(
            dashboard::reads_deduplicated(q),
            "dashboard reads a table without FINAL: {q}"
        );
    }

    // The judge views (migration 015): identities kept on insert, agreement with labels.
    assert_eq!(
        ch.query(
            "SELECT judge_identity, countMerge(rows) >= 1000 FROM sg_test.judge_identities \
             WHERE metric = 'stef' GROUP BY judge_identity"
        )
        .trim(),
        "deterministic sqlgrade=0.1.0 rules=r1\t1"
    );
    // Labels on three more events (the review store's test above labelled some already): the
    // view's counts grow by exactly their pairs. The judge's side is the row's boolean `verdict`
    // (migration 016): ev-00101 and ev-00103 (odd) are flagged, ev-00102 is not, so the two
    // labelled correct are false negatives and the one labelled incorrect a false positive;
    // `unsure` never enters.
    let counts = || -> Vec<u64> {
        let text = ch.query(
            "SELECT sum(labelled), sum(tp), sum(fp), sum(fn), sum(tn) FROM sg_test.judge_agreement_daily \
             WHERE metric = 'stef'",
        );
        text.split_whitespace()
            .map(|n| n.parse().unwrap_or(0))
            .collect()
    };
    let before = counts();
    support::http_post(
        ch.http_port,
        "/?database=sg_test",
        "INSERT INTO labels (event_id, reviewer, verdict, category, note, labelled_at) VALUES \
         ('ev-00101', 'ann', 'correct', '', '', now()), ('ev-00102', 'ann', 'incorrect', '', '', now()), \
         ('ev-00103', 'ann', 'correct', '', '', now()), ('ev-00103', 'bob', 'unsure', '', '', now())",
    )
    .unwrap();
    let after = counts();
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(delta, vec![3, 0, 1, 2, 0], "{before:?} → {after:?}");
    let kappa = ch.query(
        "SELECT count(), countIf(isNaN(kappa) OR (kappa >= -1 AND kappa <= 1 AND accuracy_lower <= accuracy \
         AND accuracy <= accuracy_upper)) FROM sg_test.judge_agreement_daily",
    );
    let parts: Vec<&str> = kappa.split_whitespace().collect();
    assert_eq!(
        parts[0], parts[1],
        "κ and accuracy intervals in range: {kappa}"
    );

    // The durable judge cache: miss, put, hit; a newer put for the same key wins.
    let cache = JudgeCacheStore::new(&s);
    assert_eq!(cache.get("k1").await.unwrap(), None);
    cache
        .put("k1", r#"{"verdict":"correct","it's":"quoted"}"#)
        .await
        .unwrap();
    cache.put("k2", r#"{"verdict":"incorrect"}"#).await.unwrap();
    assert_eq!(
        cache.get("k1").await.unwrap().as_deref(),
        Some(r#"{"verdict":"correct","it's":"quoted"}"#)
    );
    assert_eq!(
        cache.get("k' OR 1=1 --").await.unwrap(),
        None,
        "keys are bound, not spliced"
    );
    cache.put("k2", r#"{"verdict":"correct"}"#).await.unwrap();
    assert_eq!(
        cache.get("k2").await.unwrap().as_deref(),
        Some(r#"{"verdict":"correct"}"#)
    );
    assert_eq!(ch.count("SELECT count() FROM sg_test.judge_cache FINAL"), 2);
    // Several keys in one query: the newest entry of each key present; absent keys (and hostile
    // ones: bound, not spliced) are left out.
    let many = cache
        .get_many(&["k1", "k2", "k3", "k' OR 1=1 --"])
        .await
        .unwrap();
    assert_eq!(many.len(), 2, "{many:?}");
    assert_eq!(many["k1"], r#"{"verdict":"correct","it's":"quoted"}"#);
    assert_eq!(many["k2"], r#"{"verdict":"correct"}"#);
    assert!(cache.get_many(&[]).await.unwrap().is_empty());

    // Transient failure: the server goes away mid-write; the write holds the batch and finishes
    // once it is back.
    ch.stop();
    let rows: Vec<EvaluationRow> = (1000..1500).map(stef_row).collect();
    let writer = tokio::spawn(async move {
        sink.write(Batch {
            rows,
            inputs: vec![],
            dead_letters: vec![],
        })
        .await
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!writer.is_finished(), "write must wait for the server");
    tokio::task::block_in_place(|| ch.start_again());
    tokio::time::timeout(Duration::from_secs(60), writer)
        .await
        .expect("write finishes after the restart")
        .unwrap()
        .unwrap();
    assert_eq!(
        ch.count("SELECT count() FROM sg_test.evaluations FINAL WHERE metric = 'stef'"),
        1500
    );
    rows_encoded_on_several_threads_land_as_on_one(&ch, &s).await;
}

/// The sink's RowBinary body encoded and compressed on rayon's pool (what it does from 4 cores
/// on; this machine may have fewer) stores the same rows, column for column, as the body encoded
/// on the writing task: 3,000 rows with ~1 KiB of details each, so each of the pool's slices
/// makes several compressed chunks.
async fn rows_encoded_on_several_threads_land_as_on_one(ch: &ClickHouse, s: &ClickHouseConfig) {
    let rows_of = |run: &str| -> Vec<EvaluationRow> {
        (0..3000)
            .map(|i| {
                let mut row = stef_row(i);
                row.event_id = format!("threads-{i:05}").into();
                row.run_id = Some(run.into());
                row.details = serde_json::json!({"i": i, "pad": "x".repeat(1000 + i % 7)}).into();
                row
            })
            .collect()
    };
    for (run, parallel) in [("one-thread", false), ("pool", true)] {
        let mut sink = ClickHouseSink::new(s).with_parallel_encoding(parallel);
        sink.write(Batch {
            rows: rows_of(run),
            inputs: vec![],
            dead_letters: vec![],
        })
        .await
        .unwrap();
    }
    let columns = ch.query(
        "SELECT name FROM system.columns WHERE database = 'sg_test' AND table = 'evaluations' \
         AND name NOT IN ('run_id', 'run_key', 'scored_at') ORDER BY name FORMAT TSV",
    );
    let columns: Vec<&str> = columns.lines().collect();
    assert!(columns.contains(&"details") && columns.contains(&"finding_codes"));
    let stored = |run: &str| {
        ch.query(&format!(
            "SELECT {} FROM sg_test.evaluations FINAL WHERE run_key = '{run}' \
             ORDER BY event_id FORMAT TSV",
            columns.join(", ")
        ))
    };
    let one_thread = stored("one-thread");
    assert_eq!(one_thread.lines().count(), 3000);
    assert!(one_thread.contains(&"x".repeat(1006)));
    assert!(
        one_thread == stored("pool"),
        "rows encoded on the pool differ from rows encoded on one thread"
    );
}
