//! Pipeline behaviour on real events (BIRD predictions): acknowledgements only after the sink
//! wrote, out-of-order completion, batching, judge fallback, panics turned into dead letters,
//! sink failures, graceful shutdown of a followed file, and the gold-metrics hook.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::config::{PipelineConfig, SinkConfig};
use sqlgrade::evaluation::{EvaluationRow, Metric, RowStatus};
use sqlgrade::event::{Event, Gold};
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::judge::{Judge, JudgeAssessment, JudgeError, JudgeRequest};
use sqlgrade::pipeline::{Pipeline, PipelineError};
use sqlgrade::score::{GoldMetrics, Scorer, ScorerOptions, SingleProfile};
use sqlgrade::sources::{AckCounter, FileSource, MemorySource};
use sqlgrade::stores::{Batch, Sink, SinkError};
use sqlgrade_testkit::data::data_dir;
use tokio::sync::watch;

fn bird_events(predictions: &str) -> Vec<Event> {
    let bird = data_dir().join("bird");
    benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions").join(predictions),
        None,
    )
    .unwrap()
    .events
}

fn payloads(events: &[Event]) -> Vec<Vec<u8>> {
    events
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap())
        .collect()
}

/// Records batches; checks at each write that nothing of this batch was acknowledged yet.
#[derive(Clone, Default)]
struct RecordingSink {
    batches: Arc<Mutex<Vec<Batch>>>,
    acks: Option<Arc<AckCounter>>,
    written_messages: Arc<AtomicU64>,
    fail_on_write: Option<usize>,
    writes: Arc<AtomicUsize>,
}

#[async_trait]
impl Sink for RecordingSink {
    async fn write(&mut self, batch: Batch) -> Result<(), SinkError> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.fail_on_write == Some(n) {
            return Err(SinkError::Store("injected failure".into()));
        }
        if let Some(acks) = &self.acks {
            assert_eq!(
                acks.acked(),
                self.written_messages.load(Ordering::SeqCst),
                "a message was acknowledged before the sink wrote it"
            );
        }
        let messages = batch.dead_letters.len()
            + batch
                .rows
                .iter()
                .filter(|r| r.metric == Metric::Stef)
                .count();
        self.written_messages
            .fetch_add(messages as u64, Ordering::SeqCst);
        self.batches.lock().unwrap().push(batch);
        Ok(())
    }
}

impl RecordingSink {
    fn all(&self) -> Batch {
        let mut out = Batch::default();
        for b in self.batches.lock().unwrap().iter() {
            out.rows.extend(b.rows.iter().cloned());
            out.dead_letters.extend(b.dead_letters.iter().cloned());
        }
        out
    }
}

/// `[pipeline]` and `[sink]` (batching) settings of a test run.
struct Options {
    pipeline: PipelineConfig,
    sink: SinkConfig,
}

fn options(workers: usize, batch_rows: usize) -> Options {
    Options {
        pipeline: PipelineConfig {
            workers: std::num::NonZeroUsize::new(workers).expect("at least one worker"),
            channel_capacity: std::num::NonZeroUsize::new(16).unwrap(),
            ..PipelineConfig::default()
        },
        sink: SinkConfig {
            batch_rows,
            ..SinkConfig::default()
        },
    }
}

fn scorer_with(judge: Arc<dyn Judge>) -> Arc<Scorer> {
    Arc::new(Scorer::new(
        judge,
        Arc::new(SingleProfile::default()),
        ScorerOptions::default(),
    ))
}

/// Delegates to the deterministic judge after a pseudo-random delay, so completions reorder.
struct SlowJudge;

#[async_trait]
impl Judge for SlowJudge {
    fn kind(&self) -> String {
        "deterministic".into()
    }
    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        let id: u64 = request.event.event_id.parse().unwrap_or(0);
        tokio::time::sleep(Duration::from_micros((id * 7919) % 3000)).await;
        DeterministicJudge.assess(request).await
    }
}

/// Fails every call, like an LLM endpoint that is down.
struct DownJudge;

#[async_trait]
impl Judge for DownJudge {
    fn kind(&self) -> String {
        "llm:test-model".into()
    }
    async fn assess(&self, _request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        Err(JudgeError::Http {
            status: 503,
            body: "upstream unavailable".into(),
        })
    }
}

/// Panics on one event.
struct PanickyJudge(String);

#[async_trait]
impl Judge for PanickyJudge {
    fn kind(&self) -> String {
        "deterministic".into()
    }
    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        if request.event.event_id == self.0 {
            panic!("judge bug on {}", self.0);
        }
        DeterministicJudge.assess(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_written_once_and_acked_after_the_write() {
    let events = bird_events("SuperSQL.jsonl");
    let mut input = payloads(&events);
    input.insert(10, b"{broken".to_vec());
    input.insert(200, b"42".to_vec());
    let source = MemorySource::new("mem", input);
    let acks = source.acks();
    let sink = RecordingSink {
        acks: Some(acks.clone()),
        ..RecordingSink::default()
    };
    let (_tx, rx) = watch::channel(false);
    let summary = Pipeline::new(
        Box::new(source),
        Box::new(sink.clone()),
        scorer_with(Arc::new(SlowJudge)),
        &options(8, 50).pipeline,
        &options(8, 50).sink,
    )
    .run(rx)
    .await
    .unwrap();

    let all = sink.all();
    let ids: Vec<&str> = all.rows.iter().map(|r| r.event_id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), events.len(), "one STEF row per event");
    assert_eq!(unique.len(), events.len());
    let expected: HashSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(unique, expected);
    assert_eq!(all.dead_letters.len(), 2);
    assert_eq!(acks.acked(), events.len() as u64 + 2);
    assert_eq!(summary.messages, events.len() as u64 + 2);
    assert_eq!(summary.events, events.len() as u64);
    assert!(
        sink.batches.lock().unwrap().len() >= events.len() / 50,
        "batches are cut by batch_rows"
    );
    for batch in sink.batches.lock().unwrap().iter() {
        let entries = batch.rows.len() + batch.dead_letters.len();
        assert!(
            entries <= 50,
            "a batch of {entries} entries: scoring tasks hand over several events at once, \
             but no batch exceeds batch_rows"
        );
    }
    let in_order: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_ne!(
        ids, in_order,
        "with 8 workers and uneven judge latency rows finish out of order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_judge_falls_back_with_the_error_kept() {
    let events: Vec<Event> = bird_events("DAIL-SQL.jsonl").into_iter().take(40).collect();
    let sink = RecordingSink::default();
    let (_tx, rx) = watch::channel(false);
    Pipeline::new(
        Box::new(MemorySource::new("mem", payloads(&events))),
        Box::new(sink.clone()),
        scorer_with(Arc::new(DownJudge)),
        &options(4, 100).pipeline,
        &options(4, 100).sink,
    )
    .run(rx)
    .await
    .unwrap();
    let rows = sink.all().rows;
    assert_eq!(rows.len(), 40);
    let scorable: Vec<_> = rows
        .iter()
        .filter(|r| {
            !matches!(
                r.status,
                RowStatus::ParseError
                    | RowStatus::NotAQuery
                    | RowStatus::MultipleStatements
                    | RowStatus::SqlTooLarge
            )
        })
        .collect();
    assert!(!scorable.is_empty());
    for row in scorable {
        assert_eq!(row.status, RowStatus::JudgeFallback, "{row:?}");
        assert_eq!(row.stef.as_ref().unwrap().judge, "deterministic");
        let details = row.details.to_value();
        let error = details["judge_error"].as_str().unwrap();
        assert!(error.contains("503"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_while_scoring_dead_letters_only_that_event() {
    let events: Vec<Event> = bird_events("SuperSQL.jsonl").into_iter().take(30).collect();
    let victim = events[7].event_id.clone();
    let sink = RecordingSink::default();
    let (_tx, rx) = watch::channel(false);
    let summary = Pipeline::new(
        Box::new(MemorySource::new("mem", payloads(&events))),
        Box::new(sink.clone()),
        scorer_with(Arc::new(PanickyJudge(victim.clone()))),
        &options(4, 100).pipeline,
        &options(4, 100).sink,
    )
    .run(rx)
    .await
    .unwrap();
    let all = sink.all();
    assert_eq!(all.rows.len(), 29);
    assert_eq!(all.dead_letters.len(), 1);
    let dl = &all.dead_letters[0];
    assert!(dl.reason.contains("scoring panicked"), "{}", dl.reason);
    assert!(dl.reason.contains(&victim));
    let original = Event::decode(&dl.payload_bytes()).unwrap();
    assert_eq!(
        original.event_id, victim,
        "the dead letter keeps the original event"
    );
    assert_eq!(summary.messages, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_failure_stops_the_run_without_acking() {
    let events: Vec<Event> = bird_events("SuperSQL.jsonl")
        .into_iter()
        .take(100)
        .collect();
    let source = MemorySource::new("mem", payloads(&events));
    let acks = source.acks();
    let sink = RecordingSink {
        fail_on_write: Some(1),
        ..RecordingSink::default()
    };
    let (_tx, rx) = watch::channel(false);
    let result = Pipeline::new(
        Box::new(source),
        Box::new(sink.clone()),
        scorer_with(Arc::new(DeterministicJudge)),
        &options(2, 10).pipeline,
        &options(2, 10).sink,
    )
    .run(rx)
    .await;
    assert!(matches!(result, Err(PipelineError::Sink(_))), "{result:?}");
    assert_eq!(
        acks.acked(),
        10,
        "only the first (written) batch is acknowledged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followed_file_flushes_on_time_and_drains_on_shutdown() {
    let events: Vec<Event> = bird_events("CHESS-GPT-4o-mini.jsonl")
        .into_iter()
        .take(25)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jsonl");
    let mut text = String::new();
    for e in &events[..20] {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    std::fs::write(&path, &text).unwrap();
    let source =
        FileSource::new(&path, true, 1 << 20).with_poll_interval(Duration::from_millis(10));
    let sink = RecordingSink::default();
    let (tx, rx) = watch::channel(false);
    let mut opts = options(2, 1000);
    opts.sink.flush_interval_ms = 50;
    let run = tokio::spawn(
        Pipeline::new(
            Box::new(source),
            Box::new(sink.clone()),
            scorer_with(Arc::new(DeterministicJudge)),
            &opts.pipeline,
            &opts.sink,
        )
        .run(rx),
    );
    // The batch (far below batch_rows) is written by the flush interval while the run goes on.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while sink.all().rows.len() < 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "rows not flushed in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Appended lines (one written in two parts) are picked up.
    let tail: String = events[20..]
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
    let (first, second) = tail.split_at(tail.len() / 2);
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(first.as_bytes()).unwrap();
    f.flush().unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    f.write_all(second.as_bytes()).unwrap();
    f.flush().unwrap();
    while sink.all().rows.len() < 25 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "appended rows missing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.send(true).unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("shutdown drains promptly")
        .unwrap()
        .unwrap();
    assert_eq!(summary.messages, 25);
    assert_eq!(sink.all().rows.len(), 25);
    assert!(
        sink.all().dead_letters.is_empty(),
        "no line was split into garbage"
    );
}

/// Exact-string match of predicted and gold SQL: a minimal gold metric to test the hook wiring.
struct ExactMatch;

#[async_trait]
impl GoldMetrics for ExactMatch {
    async fn score(&self, event: &Event, gold: &Gold, ts: &str) -> Vec<EvaluationRow> {
        let mut row = EvaluationRow::for_event(event, ts, Metric::Ex);
        let same = gold.sql.as_deref().map(str::trim) == Some(event.sql.trim());
        row.verdict = Some(same);
        row.value = f64::from(u8::from(same));
        vec![row]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gold_hook_rows_follow_the_stef_row() {
    let mut events: Vec<Event> = bird_events("SuperSQL.jsonl").into_iter().take(50).collect();
    events[3].gold = None;
    let sink = RecordingSink::default();
    let scorer = Scorer::new(
        Arc::new(DeterministicJudge),
        Arc::new(SingleProfile::default()),
        ScorerOptions::default(),
    )
    .with_gold(Arc::new(ExactMatch));
    let (_tx, rx) = watch::channel(false);
    let summary = Pipeline::new(
        Box::new(MemorySource::new("mem", payloads(&events))),
        Box::new(sink.clone()),
        Arc::new(scorer),
        &options(2, 100).pipeline,
        &options(2, 100).sink,
    )
    .run(rx)
    .await
    .unwrap();
    let rows = sink.all().rows;
    let stef = rows.iter().filter(|r| r.metric == Metric::Stef).count();
    let ex: Vec<_> = rows.iter().filter(|r| r.metric == Metric::Ex).collect();
    assert_eq!(stef, 50);
    assert_eq!(ex.len(), 49, "no gold rows for the event without gold");
    assert!(ex.iter().all(|r| r.event_id != events[3].event_id));
    let exact = events
        .iter()
        .filter(|e| {
            e.gold
                .as_ref()
                .and_then(|g| g.sql.as_deref())
                .map(str::trim)
                == Some(e.sql.trim())
        })
        .count();
    assert_eq!(ex.iter().filter(|r| r.verdict == Some(true)).count(), exact);
    assert_eq!(summary.events, 50);
    assert_eq!(summary.rows, 99);
    assert_eq!(summary.metrics["ex"].count, 49);
    assert!(summary.render("t").contains("ex "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_failure_ends_a_run_whose_source_never_ends() {
    let events: Vec<Event> = bird_events("SuperSQL.jsonl").into_iter().take(5).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jsonl");
    let text: String = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
    std::fs::write(&path, text).unwrap();
    // A followed file idles at EOF forever; the failed sink must still end the run.
    let source =
        FileSource::new(&path, true, 1 << 20).with_poll_interval(Duration::from_millis(10));
    let sink = RecordingSink {
        fail_on_write: Some(0),
        ..RecordingSink::default()
    };
    let mut opts = options(2, 1000);
    opts.sink.flush_interval_ms = 20;
    let (_tx, rx) = watch::channel(false);
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        Pipeline::new(
            Box::new(source),
            Box::new(sink),
            scorer_with(Arc::new(DeterministicJudge)),
            &opts.pipeline,
            &opts.sink,
        )
        .run(rx),
    )
    .await
    .expect("the run ends after the sink failed");
    assert!(matches!(result, Err(PipelineError::Sink(_))), "{result:?}");
}

/// A sink whose writers run concurrently; the first write is slow, so the second finishes first.
#[derive(Clone)]
struct ConcurrentSink {
    acks: Arc<AckCounter>,
    writes: Arc<AtomicUsize>,
    running: Arc<AtomicUsize>,
    most_running: Arc<AtomicUsize>,
    /// (write number, messages acknowledged when that write finished).
    finished: Arc<Mutex<Vec<(usize, u64)>>>,
    fail_on_write: Option<usize>,
}

#[async_trait]
impl Sink for ConcurrentSink {
    async fn write(&mut self, _batch: Batch) -> Result<(), SinkError> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        let running = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(running, Ordering::SeqCst);
        if n == 0 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.finished.lock().unwrap().push((n, self.acks.acked()));
        if self.fail_on_write == Some(n) {
            return Err(SinkError::Store("injected failure".into()));
        }
        Ok(())
    }

    fn concurrent_writer(&self) -> Option<Box<dyn Sink>> {
        Some(Box::new(self.clone()))
    }
}

async fn run_concurrent(fail_on_write: Option<usize>) -> (ConcurrentSink, Result<u64, String>) {
    let events: Vec<Event> = bird_events("SuperSQL.jsonl")
        .into_iter()
        .take(100)
        .collect();
    let source = MemorySource::new("mem", payloads(&events));
    let sink = ConcurrentSink {
        acks: source.acks(),
        writes: Arc::default(),
        running: Arc::default(),
        most_running: Arc::default(),
        finished: Arc::default(),
        fail_on_write,
    };
    let mut opts = options(2, 10);
    opts.sink.inflight_batches = 2;
    let (_tx, rx) = watch::channel(false);
    let result = Pipeline::new(
        Box::new(source),
        Box::new(sink.clone()),
        scorer_with(Arc::new(DeterministicJudge)),
        &opts.pipeline,
        &opts.sink,
    )
    .run(rx)
    .await
    .map(|s| s.messages)
    .map_err(|e| e.to_string());
    (sink, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_in_flight_together_are_acknowledged_in_order() {
    let (sink, result) = run_concurrent(None).await;
    assert_eq!(result, Ok(100));
    assert_eq!(sink.acks.acked(), 100, "every message acknowledged once");
    assert_eq!(
        sink.most_running.load(Ordering::SeqCst),
        2,
        "two batches were written at once"
    );
    let finished = sink.finished.lock().unwrap().clone();
    let second = finished
        .iter()
        .find(|(n, _)| *n == 1)
        .expect("a second write");
    let first_done = finished.iter().position(|(n, _)| *n == 0).unwrap();
    let second_done = finished.iter().position(|(n, _)| *n == 1).unwrap();
    assert!(second_done < first_done, "the second write finished first");
    assert_eq!(
        second.1, 0,
        "nothing is acknowledged while an earlier batch is still being written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_in_flight_leaves_it_and_later_batches_unacknowledged() {
    // The second write fails while the first is still being written: the first batch is
    // acknowledged once stored, nothing after it.
    let (sink, result) = run_concurrent(Some(1)).await;
    assert!(result.is_err(), "{result:?}");
    assert_eq!(
        sink.acks.acked(),
        10,
        "only the first batch is acknowledged"
    );
}
