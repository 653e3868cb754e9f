//! The agreement monitor of `sqlgrade run`: reads the human labels of the review store (made on
//! the review page or imported into `labels.jsonl` / ClickHouse `labels`), pairs each new or
//! changed label with the judge rows of its event, and hands the pairs on — to the alert engine
//! (`judge_agreement`, [`crate::alerts::AlertInput::Agreement`]) and to an [`AgreementBoard`] that
//! telemetry and the summary read.
//!
//! Incremental: a label already paired (same event, reviewer and `labelled_at`) is not paired
//! again, and only the rows of the labelled events are read (ClickHouse: through
//! `evaluations_by_event`, never a scan of `evaluations`). The exception: a label paired with
//! its event's line-rate row but not (yet) with an LLM-judged row is looked at again, since the
//! second pass writes its row after the line rate: on every poll for the judged-row window
//! ([`AgreementMonitor::with_judged_row_window`]: how late the second pass can write a row —
//! `sqlgrade run` sets it from the judge's `max_wait_ms`, its longest call and the sink's flush
//! interval, and longer by however long the sink was down since the label was paired:
//! [`AgreementMonitor::with_sink_outage`]), and on at least [`JUDGED_ROW_POLLS`] polls
//! whatever the window; and once more by
//! the run's last poll, so a second pass lagging further behind still has its rows paired by
//! the end. A label whose event has no judge row yet (labels imported ahead of a replay, a label
//! racing its row into the sink) waits and is retried on the next poll. Each poll reads at most [`MAX_EVENTS_PER_POLL`] events' rows; the
//! rest wait for the next poll. Labels are what people make — thousands — so the monitor keeps
//! one small entry per label.
//!
//! A label changed to `unsure` leaves the earlier pair counted (agreement never drops a pair);
//! ClickHouse's `judge_agreement_daily` and the review page recompute from the stored labels
//! and do not have this limitation.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::view::agreement_pairs;
use crate::alerts::{AlertHandle, AlertInput};
use crate::review::HumanLabel;
use crate::sampling::agreement::{AgreementRow, AgreementTracker, PairChange};
use crate::stores::{ReviewStore, StoreError};

/// Labelled events whose rows one poll reads at most.
pub const MAX_EVENTS_PER_POLL: usize = 2_000;

/// Polls on which a label paired with its line-rate row only is looked at again for the
/// LLM-judged row of its event at least, however short the judged-row window (most events are
/// never judged: then it is settled after these and the window).
pub const JUDGED_ROW_POLLS: u32 = 10;

/// The judged-row window of a monitor that is not told one: the judge's default `max_wait_ms`
/// (10 minutes) and its default longest call (60 s), with a minute for the sink's write.
pub const DEFAULT_JUDGED_ROW_WINDOW: Duration = Duration::from_secs(12 * 60);

/// Event ids per `rows_of` query.
const IDS_PER_QUERY: usize = 200;

/// The agreement per (judge metric, identity, series) as of the last poll.
#[derive(Debug, Default)]
pub struct AgreementBoard {
    rows: Mutex<Vec<AgreementRow>>,
}

impl AgreementBoard {
    /// The agreement rows as of the last poll.
    pub fn rows(&self) -> Vec<AgreementRow> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn publish(&self, rows: Vec<AgreementRow>) {
        *self.rows.lock().unwrap_or_else(|p| p.into_inner()) = rows;
    }
}

/// What one poll did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollReport {
    /// Labels that were new or changed since the last poll.
    pub new_labels: usize,
    /// Pairs (label × judge row) handed on.
    pub pairs: usize,
    /// Labels still waiting for their event's judge rows.
    pub waiting: usize,
}

/// The monitor (module docs).
pub struct AgreementMonitor {
    store: Arc<dyn ReviewStore>,
    alerts: Option<AlertHandle>,
    board: Arc<AgreementBoard>,
    tracker: AgreementTracker,
    /// Each (event, reviewer) label already paired.
    paired: HashMap<(String, String), Paired>,
    /// How long after its first pairing a label is still looked at for the judged row.
    judged_row_window: Duration,
    /// The sink's outage time so far (`with_sink_outage`): the window grows by the time the sink
    /// was down after a label was paired.
    sink_outage: Option<SinkOutage>,
}

/// The sink's total outage time so far (e.g. the health registry's `clickhouse` clock).
type SinkOutage = Arc<dyn Fn() -> Duration + Send + Sync>;

/// What the monitor knows of a label it paired.
#[derive(Debug, Clone)]
struct Paired {
    labelled_at: String,
    /// Paired with an LLM-judged row too.
    judged: bool,
    /// Polls left on which to look for the LLM-judged row, whatever the window.
    rechecks_left: u32,
    /// When it was first paired (with the line-rate row): the judged-row window counts from here.
    first_paired: Instant,
    /// The sink's outage time when it was first paired.
    sink_outage_at_pairing: Duration,
}

impl Paired {
    /// Whether a poll looks at this label again for its LLM-judged row: `window` after its
    /// first pairing, plus however long the sink has been down since (`sink_outage`: the
    /// sink's outage time now), which delays the judged row as long.
    fn recheck(&self, window: Duration, sink_outage: Duration, last: bool) -> bool {
        let window = window.saturating_add(sink_outage.saturating_sub(self.sink_outage_at_pairing));
        !self.judged && (last || self.rechecks_left > 0 || self.first_paired.elapsed() < window)
    }
}

impl AgreementMonitor {
    /// A monitor over `store`; pairs go to `alerts` when set. `window`: labels in each
    /// identity's recent agreement (`[alerts.defaults] agreement_window`).
    pub fn new(
        store: Arc<dyn ReviewStore>,
        alerts: Option<AlertHandle>,
        window: usize,
    ) -> AgreementMonitor {
        AgreementMonitor {
            store,
            alerts,
            board: Arc::new(AgreementBoard::default()),
            tracker: AgreementTracker::new(window),
            paired: HashMap::new(),
            judged_row_window: DEFAULT_JUDGED_ROW_WINDOW,
            sink_outage: None,
        }
    }

    /// Where the sink's outage time comes from (`sqlgrade run`: the health registry's clock of
    /// the ClickHouse sink). A judged row waits in the pipeline while the sink is down, so every
    /// second of outage after a label was paired adds a second to its judged-row window.
    pub fn with_sink_outage(
        mut self,
        outage: impl Fn() -> Duration + Send + Sync + 'static,
    ) -> AgreementMonitor {
        self.sink_outage = Some(Arc::new(outage));
        self
    }

    /// How long after a label is first paired with its event's line-rate row the monitor still
    /// looks for the event's LLM-judged row on every poll: as late as the second pass can write
    /// one (its queue's `max_wait_ms`, its longest call, the sink's flush). Default
    /// [`DEFAULT_JUDGED_ROW_WINDOW`].
    pub fn with_judged_row_window(mut self, window: Duration) -> AgreementMonitor {
        self.judged_row_window = window;
        self
    }

    /// The board this monitor publishes to.
    pub fn board(&self) -> Arc<AgreementBoard> {
        Arc::clone(&self.board)
    }

    /// Read the labels, pair the new and changed ones, hand the pairs on.
    pub async fn poll(&mut self) -> Result<PollReport, StoreError> {
        self.poll_labels(false).await
    }

    /// [`poll`](Self::poll) at the end of a run: every label still without an LLM-judged
    /// pair is looked at again, however long ago it was paired, so a second pass that lagged
    /// beyond the judged-row window still has its last rows paired.
    pub async fn poll_last(&mut self) -> Result<PollReport, StoreError> {
        self.poll_labels(true).await
    }

    async fn poll_labels(&mut self, last: bool) -> Result<PollReport, StoreError> {
        let labels = self.store.labels().await?;
        let sink_outage = self.sink_outage.as_ref().map_or(Duration::ZERO, |f| f());
        let mut report = PollReport::default();
        let mut todo: Vec<HumanLabel> = Vec::new();
        for label in labels {
            let known = self
                .paired
                .get(&(label.event_id.clone(), label.reviewer.clone()))
                .filter(|p| p.labelled_at == label.labelled_at);
            match known {
                None => {
                    report.new_labels += 1;
                    todo.push(label);
                }
                Some(p) if p.recheck(self.judged_row_window, sink_outage, last) => todo.push(label),
                Some(_) => {}
            }
        }
        // Oldest first, so that a backlog is paired in the order people labelled.
        todo.sort_by(|a, b| a.labelled_at.cmp(&b.labelled_at));
        let mut events: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for label in &todo {
            if events.len() >= MAX_EVENTS_PER_POLL {
                break;
            }
            if seen.insert(label.event_id.as_str()) {
                events.push(label.event_id.clone());
            }
        }
        let mut rows = Vec::new();
        for chunk in events.chunks(IDS_PER_QUERY) {
            rows.extend(self.store.rows_of(chunk).await?);
        }
        let read: HashSet<&str> = events.iter().map(String::as_str).collect();
        let (pairs, missing) = agreement_pairs(
            &rows,
            todo.iter().filter(|l| read.contains(l.event_id.as_str())),
        );
        let missing: HashSet<String> = missing.into_iter().collect();
        let judged: HashSet<(&str, &str)> = pairs
            .iter()
            .filter(|(_, p)| p.key.metric == crate::evaluation::Metric::StefJudged)
            .map(|(_, p)| (p.event_id.as_str(), p.reviewer.as_str()))
            .collect();
        for label in &todo {
            if !read.contains(label.event_id.as_str()) || missing.contains(&label.event_id) {
                report.waiting += 1;
                continue;
            }
            let key = (label.event_id.clone(), label.reviewer.clone());
            let (rechecks_left, first_paired, sink_outage_at_pairing) = match self.paired.get(&key)
            {
                Some(p) if p.labelled_at == label.labelled_at => (
                    p.rechecks_left.saturating_sub(1),
                    p.first_paired,
                    p.sink_outage_at_pairing,
                ),
                _ => (JUDGED_ROW_POLLS, Instant::now(), sink_outage),
            };
            self.paired.insert(
                key,
                Paired {
                    labelled_at: label.labelled_at.clone(),
                    judged: judged.contains(&(label.event_id.as_str(), label.reviewer.as_str())),
                    rechecks_left,
                    first_paired,
                    sink_outage_at_pairing,
                },
            );
        }
        // Only what changed goes on: a pair seen before (a label looked at again) is not.
        let pairs: Vec<_> = pairs
            .into_iter()
            .map(|(_, pair)| pair)
            .filter(|pair| self.tracker.add(pair.clone()) != PairChange::Unchanged)
            .collect();
        report.pairs = pairs.len();
        self.board.publish(self.tracker.snapshot());
        if let Some(alerts) = &self.alerts
            && !pairs.is_empty()
        {
            alerts.submit(AlertInput::Agreement(pairs)).await;
        }
        if report.new_labels > 0 {
            tracing::debug!(?report, "agreement monitor paired labels");
        }
        Ok(report)
    }

    /// Poll every `every` until `stop` turns `true`, then poll once more (what the run wrote
    /// last) and end, releasing the alert handle.
    pub fn spawn(
        mut self,
        every: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let stopping = tokio::select! {
                    () = tokio::time::sleep(every) => *stop.borrow(),
                    changed = stop.changed() => changed.is_err() || *stop.borrow(),
                };
                let polled = if stopping {
                    self.poll_last().await
                } else {
                    self.poll().await
                };
                if let Err(error) = polled {
                    tracing::warn!(%error, "agreement monitor could not read labels or rows; retrying");
                }
                if stopping {
                    break;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::stores::JsonlStore;

    fn row_line(metric: &str, verdict: &str) -> String {
        serde_json::json!({
            "event_id": "e1", "ts": "2026-01-01T00:00:01Z", "app_id": "shop", "agent_id": "a",
            "agent_version": "v1", "metric": metric, "value": 80.0, "status": "ok",
            "details": {}, "semantic_verdict": verdict, "confidence_tier": "high",
            "quality_tier": "good",
        })
        .to_string()
    }

    fn append(path: &std::path::Path, line: &str) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }

    /// A store with the line-rate row of `e1` and a label on it, and the rows file.
    async fn labelled_store() -> (tempfile::TempDir, std::path::PathBuf, Arc<JsonlStore>) {
        let dir = tempfile::tempdir().unwrap();
        let rows = dir.path().join("evaluations.jsonl");
        append(&rows, &row_line("stef", "correct"));
        let store = Arc::new(JsonlStore::new(dir.path()));
        let label = HumanLabel::validated(
            "e1",
            "ana",
            "correct",
            "",
            "",
            "2026-01-01T00:00:05Z".into(),
        )
        .unwrap();
        store.add_label(&label).await.unwrap();
        (dir, rows, store)
    }

    /// The first poll pairs the label with its line-rate row; the next [`JUDGED_ROW_POLLS`]
    /// (at once, no time passing) find no judged row and use up the label's rechecks.
    async fn pair_and_use_up_the_rechecks(monitor: &mut AgreementMonitor) {
        assert_eq!(monitor.poll().await.unwrap().pairs, 1, "the line-rate row");
        for _ in 0..JUDGED_ROW_POLLS {
            assert_eq!(monitor.poll().await.unwrap().pairs, 0);
        }
    }

    /// A monitor over `store` whose judged-row window is 10 minutes.
    fn ten_minute_monitor(store: Arc<JsonlStore>) -> AgreementMonitor {
        AgreementMonitor::new(store, None, 60).with_judged_row_window(Duration::from_secs(600))
    }

    #[tokio::test(start_paused = true)]
    async fn a_judged_row_within_the_window_is_paired_after_the_polls_counted() {
        let (_dir, rows, store) = labelled_store().await;
        let mut monitor = ten_minute_monitor(store);
        assert_eq!(monitor.poll().await.unwrap().pairs, 1, "the line-rate row");
        // More polls than the count, all inside the window (one every 40 s).
        for _ in 0..=JUDGED_ROW_POLLS {
            tokio::time::advance(Duration::from_secs(40)).await;
            assert_eq!(monitor.poll().await.unwrap().pairs, 0);
        }
        append(&rows, &row_line("stef_judged", "incorrect"));
        tokio::time::advance(Duration::from_secs(40)).await;
        assert_eq!(
            monitor.poll().await.unwrap().pairs,
            1,
            "a running poll, not only the last, pairs the judged row"
        );
        assert_eq!(monitor.poll().await.unwrap().pairs, 0, "paired once");
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_window_and_the_polls_counted_only_the_last_poll_looks() {
        let (_dir, rows, store) = labelled_store().await;
        let mut monitor = ten_minute_monitor(store);
        pair_and_use_up_the_rechecks(&mut monitor).await;
        tokio::time::advance(Duration::from_secs(601)).await;
        append(&rows, &row_line("stef_judged", "incorrect"));
        assert_eq!(monitor.poll().await.unwrap().pairs, 0, "settled");
        assert_eq!(monitor.poll_last().await.unwrap().pairs, 1, "the last poll");
    }

    #[tokio::test(start_paused = true)]
    async fn a_sink_outage_after_the_pairing_lengthens_the_window_by_its_length() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let (_dir, rows, store) = labelled_store().await;
        let outage_secs = Arc::new(AtomicU64::new(30));
        let clock = Arc::clone(&outage_secs);
        let mut monitor = ten_minute_monitor(store)
            .with_sink_outage(move || Duration::from_secs(clock.load(Ordering::SeqCst)));
        pair_and_use_up_the_rechecks(&mut monitor).await;
        // The sink is down for 15 minutes after the pairing (30 s of outage before it do not
        // count): the judged row lands 20 minutes after the pairing, inside 10 + 15 minutes.
        outage_secs.store(30 + 15 * 60, Ordering::SeqCst);
        tokio::time::advance(Duration::from_secs(20 * 60)).await;
        append(&rows, &row_line("stef_judged", "incorrect"));
        assert_eq!(
            monitor.poll().await.unwrap().pairs,
            1,
            "a running poll pairs it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn outage_before_the_pairing_does_not_lengthen_the_window() {
        let (_dir, rows, store) = labelled_store().await;
        let mut monitor = ten_minute_monitor(store).with_sink_outage(|| Duration::from_secs(3600));
        pair_and_use_up_the_rechecks(&mut monitor).await;
        tokio::time::advance(Duration::from_secs(601)).await;
        append(&rows, &row_line("stef_judged", "incorrect"));
        assert_eq!(monitor.poll().await.unwrap().pairs, 0, "settled");
    }

    #[tokio::test]
    async fn the_last_poll_pairs_a_judged_row_that_came_after_the_rechecks() {
        let (_dir, rows, store) = labelled_store().await;
        let mut monitor =
            AgreementMonitor::new(store, None, 60).with_judged_row_window(Duration::ZERO);
        pair_and_use_up_the_rechecks(&mut monitor).await;
        // The second pass writes its row only now: the rechecks are used up…
        append(&rows, &row_line("stef_judged", "incorrect"));
        assert_eq!(monitor.poll().await.unwrap().pairs, 0);
        // …but the run's last poll looks again, once.
        assert_eq!(
            monitor.poll_last().await.unwrap().pairs,
            1,
            "the judged row"
        );
        assert_eq!(monitor.poll_last().await.unwrap().pairs, 0, "paired once");
    }
}
