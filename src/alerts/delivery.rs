//! Alert delivery: the engine task, and the webhook / ClickHouse / log channels with retries.
//!
//! ```text
//! pipeline batcher ──try_send──▶ [bounded] engine task ──try_send──▶ [bounded] delivery task
//!                  (drops counted)                   (drops counted)       ├─ log (always)
//!                                                                          ├─ webhook (retries)
//!                                                                          └─ ClickHouse `alerts`
//! ```
//!
//! Nothing on the scoring path ever waits: the pipeline hands inputs over with `try_send` and
//! counts what a full queue refused; a slow or failing webhook only delays later notifications.
//!
//! The webhook body is one JSON object that is both a Slack incoming-webhook message (`text`)
//! and an Alertmanager webhook-receiver payload (`version` "4", `status`, `receiver`,
//! `groupLabels`, `commonLabels`, `commonAnnotations`, `externalURL`, `groupKey`,
//! `truncatedAlerts`, `alerts[]` with `status`, `labels`, `annotations`, `startsAt`, `endsAt`,
//! `generatorURL`, `fingerprint`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::config::AlertsConfig;
use super::engine::{AlertEngine, AlertInput, AlertNotification, AlertState};
use crate::stores::{ALERTS_FILE, AlertRecording, Store};

/// Alertmanager's "zero" time, used as `endsAt` of firing alerts.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Counters shared between the pipeline side and the alert tasks.
#[derive(Debug, Default)]
pub struct AlertCounters {
    /// Inputs accepted by the engine queue.
    pub inputs_queued: AtomicU64,
    /// Inputs refused because the engine queue was full (scoring went on).
    pub inputs_dropped: AtomicU64,
    /// Notifications produced by the engine.
    pub notifications: AtomicU64,
    /// Notifications refused because the delivery queue was full.
    pub notifications_dropped: AtomicU64,
    /// Successful webhook deliveries.
    pub webhook_delivered: AtomicU64,
    /// Failed webhook attempts (each retry counts).
    pub webhook_failed_attempts: AtomicU64,
    /// Webhook notifications given up after all attempts.
    pub webhook_gave_up: AtomicU64,
    /// Successful ClickHouse inserts.
    pub clickhouse_delivered: AtomicU64,
    /// ClickHouse notifications given up after all attempts.
    pub clickhouse_gave_up: AtomicU64,
}

/// The pipeline's end of the alert engine: cheap to clone; never blocks unless made
/// [`lossless`](AlertHandle::lossless).
#[derive(Debug, Clone)]
pub struct AlertHandle {
    tx: mpsc::Sender<AlertInput>,
    counters: Arc<AlertCounters>,
    lossless: bool,
}

impl AlertHandle {
    /// A handle whose [`submit`](AlertHandle::submit) waits for room instead of dropping (for
    /// batch runs such as a backfill, where every row must be evaluated and waiting only slows
    /// the batch down).
    pub fn lossless(mut self) -> AlertHandle {
        self.lossless = true;
        self
    }

    /// Hand over one input: a lossless handle waits for room in the queue, a live one
    /// [`offer`](AlertHandle::offer)s. Returns whether it was queued.
    pub async fn submit(&self, input: AlertInput) -> bool {
        if !self.lossless {
            return self.offer(input);
        }
        if self.tx.send(input).await.is_ok() {
            self.counters.inputs_queued.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            self.counters.inputs_dropped.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// Offer one input; when the queue is full it is dropped and counted. Returns whether it
    /// was queued.
    pub fn offer(&self, input: AlertInput) -> bool {
        match self.tx.try_send(input) {
            Ok(()) => {
                self.counters.inputs_queued.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.counters.inputs_dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// The shared counters.
    pub fn counters(&self) -> &Arc<AlertCounters> {
        &self.counters
    }
}

/// Running alert tasks. Drop every [`AlertHandle`] and call [`AlertService::finish`] to drain.
pub struct AlertService {
    engine_task: JoinHandle<AlertEngine>,
    delivery_task: JoinHandle<()>,
    counters: Arc<AlertCounters>,
    recorded: Arc<Mutex<Vec<AlertNotification>>>,
    firing: Arc<super::FiringSeries>,
}

/// Where notifications go besides the log.
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    /// Webhook URL.
    pub webhook_url: Option<String>,
    /// Where alerts are recorded beside the rows (ClickHouse `alerts`, the JSONL directory's
    /// `alerts.jsonl`), so the review page over the store can show them.
    pub recording: AlertRecording,
    /// The review page's base URL (`[alerts] review_url`): webhooks link to the alert's events.
    pub review_url: Option<String>,
}

impl Destinations {
    /// The destinations `[alerts]` names, recorded in `store` (ClickHouse `alerts` through the
    /// `[sink]` connection with `[alerts] clickhouse`; a JSONL store's `alerts.jsonl`).
    pub fn from_config(alerts: &AlertsConfig, store: &Store) -> Destinations {
        Destinations {
            webhook_url: alerts
                .webhook_url
                .as_ref()
                .filter(|u| !u.is_empty())
                .map(|u| u.expose().to_string()),
            recording: store.alert_recording(alerts.clickhouse),
            review_url: alerts
                .review_url
                .as_deref()
                .map(|u| u.trim().trim_end_matches('/').to_string())
                .filter(|u| !u.is_empty()),
        }
    }
}

/// Why the alert service could not start.
#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    /// The HTTP client could not be built.
    #[error("cannot build the webhook client")]
    Client(#[source] reqwest::Error),
}

impl AlertService {
    /// Start the engine and delivery tasks; returns the service and the pipeline's handle. The
    /// estimate alerts take the share correct from `estimates` (the LLM judge's uniform slice,
    /// or the line rate alone when the run has no LLM judge).
    pub fn start(
        config: AlertsConfig,
        destinations: Destinations,
        estimates: super::EstimateSource,
    ) -> Result<(AlertService, AlertHandle), AlertError> {
        AlertService::start_recording(config, destinations, estimates, 0)
    }

    /// [`AlertService::start`], also keeping the first `keep` notifications for
    /// [`AlertService::finish_recorded`] (a backfill prints them).
    pub fn start_recording(
        config: AlertsConfig,
        destinations: Destinations,
        estimates: super::EstimateSource,
        keep: usize,
    ) -> Result<(AlertService, AlertHandle), AlertError> {
        let counters = Arc::new(AlertCounters::default());
        let (input_tx, mut input_rx) = mpsc::channel::<AlertInput>(config.channel_capacity.max(1));
        let (note_tx, note_rx) = mpsc::channel::<AlertNotification>(config.channel_capacity.max(1));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.webhook_timeout_ms.max(1)))
            .build()
            .map_err(AlertError::Client)?;
        let retry = RetryPolicy {
            attempts: config.delivery_attempts.max(1),
            initial: Duration::from_millis(config.retry_initial_ms),
            max: Duration::from_millis(config.retry_max_ms.max(config.retry_initial_ms)),
        };
        let engine_counters = Arc::clone(&counters);
        let firing = Arc::new(super::FiringSeries::default());
        let engine_firing = Arc::clone(&firing);
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&recorded);
        let mut engine = AlertEngine::new(config).with_estimate_source(estimates);
        let engine_task = tokio::spawn(async move {
            while let Some(input) = input_rx.recv().await {
                for note in engine.observe(&input, Utc::now()) {
                    engine_counters
                        .notifications
                        .fetch_add(1, Ordering::Relaxed);
                    log_notification(&note);
                    engine_firing.set(
                        &note.fingerprint,
                        &note.labels,
                        note.state == AlertState::Firing,
                    );
                    if keep > 0 {
                        let mut record = record.lock().unwrap_or_else(|p| p.into_inner());
                        if record.len() < keep {
                            record.push(note.clone());
                        }
                    }
                    if note_tx.try_send(note).is_err() {
                        engine_counters
                            .notifications_dropped
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            engine
        });
        let delivery = Delivery {
            http,
            destinations,
            retry,
            counters: Arc::clone(&counters),
        };
        let delivery_task = tokio::spawn(delivery.run(note_rx));
        let handle = AlertHandle {
            tx: input_tx,
            counters: Arc::clone(&counters),
            lossless: false,
        };
        Ok((
            AlertService {
                engine_task,
                delivery_task,
                counters,
                recorded,
                firing,
            },
            handle,
        ))
    }

    /// The shared counters.
    pub fn counters(&self) -> &Arc<AlertCounters> {
        &self.counters
    }

    /// The series alerts fire on right now (updated as the engine fires and resolves).
    pub fn firing(&self) -> Arc<super::FiringSeries> {
        Arc::clone(&self.firing)
    }

    /// Wait until every queued input is observed and every notification delivered (or given up).
    /// All [`AlertHandle`]s must have been dropped, otherwise this waits forever.
    pub async fn finish(self) -> Option<AlertEngine> {
        let engine = self.engine_task.await.ok();
        if let Err(error) = self.delivery_task.await {
            tracing::error!(%error, "alert delivery task failed");
        }
        engine
    }

    /// Drain the engine (all queued inputs are observed) and return it with the notifications
    /// kept by [`AlertService::start_recording`], in the order they were produced; deliveries
    /// still retrying after `delivery_grace` are abandoned (and logged).
    pub async fn finish_recorded(
        self,
        delivery_grace: Duration,
    ) -> (Option<AlertEngine>, Vec<AlertNotification>) {
        let engine = self.engine_task.await.ok();
        let notes = std::mem::take(&mut *self.recorded.lock().unwrap_or_else(|p| p.into_inner()));
        let delivery = self.delivery_task;
        let abort = delivery.abort_handle();
        match tokio::time::timeout(delivery_grace, delivery).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(%error, "alert delivery task failed"),
            Err(_) => {
                abort.abort();
                tracing::warn!("alert delivery still retrying; abandoning it");
            }
        }
        (engine, notes)
    }
}

fn log_notification(note: &AlertNotification) {
    match note.state {
        AlertState::Firing => tracing::warn!(
            alert_id = %note.alert_id, rule = note.rule.as_str(), metric = %note.metric,
            labels = ?note.labels, baseline = note.baseline, observed = note.observed,
            p_value = note.p_value, "{}", note.summary
        ),
        AlertState::Resolved => tracing::info!(
            alert_id = %note.alert_id, rule = note.rule.as_str(), metric = %note.metric,
            labels = ?note.labels, baseline = note.baseline, observed = note.observed,
            "{}", note.summary
        ),
    }
}

/// Attempts and exponential backoff of one delivery.
#[derive(Debug, Clone, Copy)]
struct RetryPolicy {
    attempts: u32,
    initial: Duration,
    max: Duration,
}

impl RetryPolicy {
    fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(20));
        self.initial.saturating_mul(factor).min(self.max)
    }
}

struct Delivery {
    http: reqwest::Client,
    destinations: Destinations,
    retry: RetryPolicy,
    counters: Arc<AlertCounters>,
}

impl Delivery {
    async fn run(self, mut rx: mpsc::Receiver<AlertNotification>) {
        let clickhouse = self
            .destinations
            .recording
            .clickhouse
            .as_ref()
            .map(crate::stores::clickhouse::client);
        while let Some(note) = rx.recv().await {
            if let Some(url) = &self.destinations.webhook_url {
                self.deliver_webhook(url, &note).await;
            }
            if let Some(client) = &clickhouse {
                self.deliver_clickhouse(client, &note).await;
            }
            if let Some(dir) = &self.destinations.recording.jsonl_dir {
                deliver_jsonl(dir, &note).await;
            }
        }
    }

    async fn deliver_webhook(&self, url: &str, note: &AlertNotification) {
        let body = webhook_body(
            std::slice::from_ref(note),
            self.destinations.review_url.as_deref(),
        );
        for attempt in 1..=self.retry.attempts {
            let outcome = self.http.post(url).json(&body).send().await;
            let error = match outcome {
                Ok(response) if response.status().is_success() => {
                    self.counters
                        .webhook_delivered
                        .fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Ok(response) => format!("HTTP {}", response.status()),
                // reqwest's text names the URL: for Slack, the URL is the secret.
                Err(e) => crate::errors::error_chain(&e.without_url()),
            };
            self.counters
                .webhook_failed_attempts
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(alert_id = %note.alert_id, attempt, %error, "alert webhook failed");
            if attempt < self.retry.attempts {
                tokio::time::sleep(self.retry.delay(attempt)).await;
            }
        }
        self.counters
            .webhook_gave_up
            .fetch_add(1, Ordering::Relaxed);
        tracing::error!(alert_id = %note.alert_id, attempts = self.retry.attempts, "alert webhook: giving up");
    }

    async fn deliver_clickhouse(&self, client: &clickhouse::Client, note: &AlertNotification) {
        let record = AlertRecord::new(note);
        for attempt in 1..=self.retry.attempts {
            let result: clickhouse::error::Result<()> = async {
                let mut insert = client.insert::<AlertRecord>("alerts").await?;
                insert.write(&record).await?;
                insert.end().await
            }
            .await;
            match result {
                Ok(()) => {
                    self.counters
                        .clickhouse_delivered
                        .fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(error) => {
                    tracing::warn!(alert_id = %note.alert_id, attempt, %error, "alert insert failed");
                    if attempt < self.retry.attempts {
                        tokio::time::sleep(self.retry.delay(attempt)).await;
                    }
                }
            }
        }
        self.counters
            .clickhouse_gave_up
            .fetch_add(1, Ordering::Relaxed);
        tracing::error!(alert_id = %note.alert_id, "alerts table: giving up");
    }
}

/// Append the alert's row to `<dir>/alerts.jsonl` (durably; a failure is logged — the log
/// channel already carries the alert).
async fn deliver_jsonl(dir: &std::path::Path, note: &AlertNotification) {
    use tokio::io::AsyncWriteExt as _;
    let path = dir.join(ALERTS_FILE);
    let result: std::io::Result<()> = async {
        let mut line = serde_json::to_vec(&AlertRecord::new(note))?;
        line.push(b'\n');
        tokio::fs::create_dir_all(dir).await?;
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await?;
        file.write_all(&line).await?;
        file.sync_data().await
    }
    .await;
    if let Err(error) = result {
        tracing::error!(alert_id = %note.alert_id, path = %path.display(), %error, "cannot append the alert to the JSONL directory");
    }
}

/// Where the people paged review an alert: its events in the queue, or for `judge_agreement`
/// (a judge, not a series, is at fault) the calibration slice, whose labels measure the judge
/// on unbiased data.
///
/// An alert about one element (`element_flagged`, or a new question type) narrows the queue to
/// the events of that element (`element=<dimension>:<element>`).
fn review_link(base: &str, note: &AlertNotification) -> String {
    let queue = crate::review::alert_queue_url(base, &note.alert_id);
    let element = match note.rule {
        super::RuleKind::JudgeAgreement => return format!("{base}/queue?slice=calibration"),
        super::RuleKind::ElementFlagged => note
            .metric
            .strip_prefix("flagged_share:")
            .map(str::to_string),
        super::RuleKind::QuestionMix => note
            .metric
            .strip_prefix("question_type_share:")
            .map(|t| format!("question_type:{t}")),
        _ => None,
    };
    match element {
        Some(element) => format!("{queue}&element={}", crate::review::url_component(&element)),
        None => queue,
    }
}

/// One row of the ClickHouse `alerts` table (see `deploy/clickhouse/003_alerts.sql`). The
/// firing and the resolved notification of one incident share `alert_id` and `fired_at`, so the
/// ReplacingMergeTree keeps the later (resolved) row; the state is in `details`.
#[derive(Debug, Clone, clickhouse::Row, Serialize)]
pub struct AlertRecord {
    alert_id: String,
    fired_at: u32,
    app_id: String,
    agent_id: String,
    agent_version: String,
    model: String,
    metric: String,
    rule: String,
    severity: String,
    window_start: u32,
    window_end: u32,
    baseline: f64,
    observed: f64,
    events: u64,
    message: String,
    details: String,
}

fn epoch(t: DateTime<Utc>) -> u32 {
    t.timestamp().clamp(0, i64::from(u32::MAX)) as u32
}

impl AlertRecord {
    /// The row for `note`.
    pub fn new(note: &AlertNotification) -> AlertRecord {
        let label = |name: &str| note.labels.get(name).cloned().unwrap_or_default();
        AlertRecord {
            alert_id: note.alert_id.clone(),
            fired_at: epoch(note.started_at),
            app_id: label("app_id"),
            agent_id: label("agent_id"),
            agent_version: label("agent_version"),
            model: label("model"),
            metric: note.metric.clone(),
            rule: note.rule.as_str().to_string(),
            severity: note.severity.clone(),
            window_start: epoch(note.started_at),
            window_end: epoch(note.ended_at.unwrap_or(note.started_at)),
            baseline: note.baseline,
            observed: note.observed,
            events: note.recent_samples as u64,
            message: note.summary.clone(),
            details: json!({
                "state": note.state.as_str(),
                "fingerprint": note.fingerprint,
                "effect": note.effect,
                "p_value": note.p_value,
                "recent_samples": note.recent_samples,
                "baseline_samples": note.baseline_samples,
                "labels": note.labels,
                "observed_interval": note.observed_interval,
                "baseline_interval": note.baseline_interval,
                "resolved_at": note.ended_at.map(rfc3339),
            })
            .to_string(),
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `text` as Slack shows it literally: `&`, `<` and `>` escaped as Slack's message formatting
/// asks, so a series label such as `<!channel>` or `<https://…|click>` is shown, not acted on
/// (no mention, no disguised link). The Alertmanager fields keep the raw values: they are data.
pub fn slack_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The webhook JSON for `notes` (one group): Slack's `text` plus Alertmanager's webhook fields;
/// with `review_url`, each alert links to its events on the review page (`generatorURL`, and a
/// line of the text).
pub fn webhook_body(notes: &[AlertNotification], review_url: Option<&str>) -> Value {
    let status = if notes.iter().any(|n| n.state == AlertState::Firing) {
        "firing"
    } else {
        "resolved"
    };
    let alerts: Vec<Value> = notes
        .iter()
        .map(|n| {
            let mut labels = serde_json::Map::new();
            labels.insert("alertname".into(), json!(n.rule.as_str()));
            labels.insert("metric".into(), json!(n.metric));
            labels.insert("severity".into(), json!(n.severity));
            for (k, v) in &n.labels {
                labels.insert(k.clone(), json!(v));
            }
            json!({
                "status": n.state.as_str(),
                "labels": labels,
                "annotations": {
                    "summary": n.summary,
                    "baseline": format!("{:.4}", n.baseline),
                    "observed": format!("{:.4}", n.observed),
                    "p_value": format!("{:.3e}", n.p_value),
                    "alert_id": n.alert_id,
                },
                "startsAt": rfc3339(n.started_at),
                "endsAt": n.ended_at.map_or_else(|| ZERO_TIME.to_string(), rfc3339),
                "generatorURL": review_url.map(|base| review_link(base, n)).unwrap_or_default(),
                "fingerprint": n.fingerprint,
            })
        })
        .collect();
    let common_labels = alerts
        .first()
        .and_then(|a| a.get("labels"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let group_labels = json!({
        "alertname": notes.first().map(|n| n.rule.as_str()).unwrap_or("sqlgrade"),
    });
    let text = notes
        .iter()
        .map(|n| match review_url {
            Some(base) => format!(
                "{}\nReview its events: {}",
                slack_escape(&n.summary),
                review_link(base, n)
            ),
            None => slack_escape(&n.summary),
        })
        .collect::<Vec<_>>()
        .join("\n");
    json!({
        "text": text,
        "version": "4",
        "groupKey": notes.first().map(|n| n.fingerprint.clone()).unwrap_or_default(),
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "sqlgrade",
        "groupLabels": group_labels,
        "commonLabels": common_labels,
        "commonAnnotations": {},
        "externalURL": review_url.unwrap_or_default(),
        "alerts": alerts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::{AlertState, RuleKind};

    #[test]
    fn slack_text_shows_markup_in_labels_as_text() {
        assert_eq!(
            slack_escape("Φ dropped on <!channel> & <https://evil|bot>"),
            "Φ dropped on &lt;!channel&gt; &amp; &lt;https://evil|bot&gt;"
        );
        assert_eq!(slack_escape("plain → text"), "plain → text");
    }

    #[tokio::test]
    async fn a_lossless_handle_waits_instead_of_dropping() {
        let config = AlertsConfig {
            channel_capacity: 1,
            ..AlertsConfig::default()
        };
        let (service, handle) = AlertService::start_recording(
            config,
            Destinations::default(),
            super::super::EstimateSource::Judge,
            10,
        )
        .unwrap();
        let handle = handle.lossless();
        let e = crate::event::Event::decode(br#"{"question":"q","sql":"SELECT 1"}"#).unwrap();
        let row = crate::evaluation::EvaluationRow::for_event(
            &e,
            "2026-01-01T00:00:00Z",
            crate::evaluation::Metric::Stef,
        );
        for _ in 0..500 {
            assert!(handle.submit(AlertInput::Rows(vec![row.clone()])).await);
        }
        let counters = Arc::clone(handle.counters());
        drop(handle);
        let (engine, notes) = service.finish_recorded(Duration::from_secs(5)).await;
        assert_eq!(engine.unwrap().stats().inputs, 500);
        assert_eq!(counters.inputs_queued.load(Ordering::Relaxed), 500);
        assert_eq!(counters.inputs_dropped.load(Ordering::Relaxed), 0);
        assert!(notes.is_empty(), "a constant stream raises nothing");
    }

    #[test]
    fn an_alert_about_one_element_links_to_that_elements_events() {
        let note = |rule: RuleKind, metric: &str| AlertNotification {
            alert_id: "f00d-1".into(),
            fingerprint: "f00d".into(),
            state: AlertState::Firing,
            rule,
            metric: metric.into(),
            labels: Default::default(),
            severity: "warning".into(),
            started_at: chrono::Utc::now(),
            ended_at: None,
            baseline: 0.1,
            observed: 0.5,
            effect: 0.4,
            p_value: 0.0,
            recent_samples: 100,
            baseline_samples: 500,
            observations: 600,
            observed_interval: None,
            baseline_interval: None,
            summary: String::new(),
        };
        let base = "http://review";
        assert_eq!(
            review_link(
                base,
                &note(RuleKind::ElementFlagged, "flagged_share:column:hero.id")
            ),
            "http://review/queue?alert=f00d-1&element=column%3Ahero.id"
        );
        assert_eq!(
            review_link(
                base,
                &note(RuleKind::QuestionMix, "question_type_share:count:atom")
            ),
            "http://review/queue?alert=f00d-1&element=question_type%3Acount%3Aatom"
        );
        assert_eq!(
            review_link(
                base,
                &note(RuleKind::QuestionMix, "question_type_divergence")
            ),
            "http://review/queue?alert=f00d-1"
        );
        assert_eq!(
            review_link(base, &note(RuleKind::ScoreDrop, "stef")),
            "http://review/queue?alert=f00d-1"
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_max() {
        let p = RetryPolicy {
            attempts: 5,
            initial: Duration::from_millis(100),
            max: Duration::from_millis(350),
        };
        assert_eq!(p.delay(1), Duration::from_millis(100));
        assert_eq!(p.delay(2), Duration::from_millis(200));
        assert_eq!(p.delay(3), Duration::from_millis(350));
    }
}
