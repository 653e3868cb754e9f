//! The scorer: STEF on every event (the deterministic path, or an LLM judge with its
//! fallback), the gold metrics when an event carries gold data, the probe (module
//! documentation of `score`).
use super::catalogues::{CatalogueStore, CatalogueWatcher, SelectedSchema};
use super::profiles::{ProfileLookup, SingleProfile};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;

use crate::evaluation::{EvaluationRow, RowStatus};
use crate::event::{Event, Gold};
use crate::judge::deterministic::DeterministicJudge;
use crate::judge::{Judge, JudgeAssessment, JudgeError, JudgeRequest};
use crate::stef::correctness::VerdictModel;
use crate::stef::{self, Prepared, RuleProfile, Verdict};

/// Hook for gold metrics (EX, ESM, …): called for events that carry `gold`, returns extra rows.
#[async_trait]
pub trait GoldMetrics: Send + Sync {
    /// Rows for the gold metrics of `event`; `ts` is the row time when the event has none.
    async fn score(&self, event: &Event, gold: &Gold, ts: &str) -> Vec<EvaluationRow>;

    /// LLM usage of the gold metrics so far: judged-metric call counts, and the totals of
    /// their LLM client when it is not the STEF judge's (nothing for deterministic metrics).
    fn llm_usage(&self) -> crate::telemetry::stats::LlmUsage {
        crate::telemetry::stats::LlmUsage::default()
    }

    /// Whether the gold metrics' LLM client is the STEF judge's own (its totals are then
    /// reported once, with the judge).
    fn shares_judge_client(&self) -> bool {
        false
    }

    /// Finish background work of the gold metrics' own LLM client (queued durable-cache
    /// writes) before the process exits. Default: nothing to finish.
    async fn flush(&self) {}
}

/// Knobs of the scorer.
#[derive(Debug, Clone)]
pub struct ScorerOptions {
    /// SQL longer than this is not parsed (status `sql_too_large`).
    pub max_sql_bytes: usize,
}

impl Default for ScorerOptions {
    fn default() -> Self {
        ScorerOptions {
            max_sql_bytes: crate::sqlspec::DEFAULT_MAX_SQL_BYTES,
        }
    }
}

/// Scores events: the line-rate STEF row through a [`Judge`] (the deterministic judge in the
/// daemon) with deterministic fallback, plus optional gold rows; and, for the second pass, the
/// `stef_judged` row of selected events through the LLM judge ([`Scorer::judged_pass`]).
pub struct Scorer {
    judge: Arc<dyn Judge>,
    fallback: DeterministicJudge,
    profiles: Arc<dyn ProfileLookup>,
    gold: Option<Arc<dyn GoldMetrics>>,
    options: ScorerOptions,
    judged_pass: Option<Arc<dyn Judge>>,
    catalogues: Option<CatalogueStore>,
    _catalogue_watcher: Option<CatalogueWatcher>,
    prober: Option<super::probe::Prober>,
    verdict_model: Arc<VerdictModel>,
}

impl Scorer {
    /// A scorer using `judge` and the profiles of `profiles`.
    pub fn new(
        judge: Arc<dyn Judge>,
        profiles: Arc<dyn ProfileLookup>,
        options: ScorerOptions,
    ) -> Scorer {
        Scorer {
            judge,
            fallback: DeterministicJudge,
            profiles,
            gold: None,
            options,
            judged_pass: None,
            catalogues: None,
            _catalogue_watcher: None,
            prober: None,
            verdict_model: Arc::new(VerdictModel::shipped().clone()),
        }
    }

    /// Give line-rate rows their `p_correct` and verdict from `model` (default: the shipped
    /// correctness model).
    pub fn with_verdict_model(mut self, model: Arc<VerdictModel>) -> Scorer {
        self.verdict_model = model;
        self
    }

    /// The correctness model of the line-rate rows.
    pub fn verdict_model(&self) -> &Arc<VerdictModel> {
        &self.verdict_model
    }

    /// What the STEF probes did so far (zero without a prober).
    pub fn probe_usage(&self) -> crate::telemetry::stats::ProbeUsage {
        self.prober
            .as_ref()
            .map(super::probe::Prober::usage)
            .unwrap_or_default()
    }

    /// Probe events whose catalogue schema was found and whose database `prober` has.
    pub fn with_prober(mut self, prober: super::probe::Prober) -> Scorer {
        self.prober = Some(prober);
        self
    }

    /// Use `catalogues` for the STEF catalogue checks (the watcher, when given, keeps them
    /// fresh for as long as the scorer lives).
    pub fn with_catalogues(
        mut self,
        catalogues: CatalogueStore,
        watcher: Option<CatalogueWatcher>,
    ) -> Scorer {
        self.catalogues = Some(catalogues);
        self._catalogue_watcher = watcher;
        self
    }

    /// The deterministic preparation of `event` with its catalogue schema, if any, and the
    /// probes of its database, if configured.
    /// The deterministic preparation of `event`; `for_llm`: an LLM judges it, so the catalogue
    /// tables it reads or names are attached for the prompt (`stef::add_schema_context`).
    async fn prepare(
        &self,
        event: &Event,
        profile: &RuleProfile,
        for_llm: bool,
    ) -> Result<Prepared, crate::sqlspec::SpecError> {
        let selected = self.select_schema(event, profile);
        let mut prepared = self.prepare_with_schema(event, profile, &selected)?;
        if let (Some(prober), Some(schema)) = (&self.prober, selected.schema()) {
            prober.probe(event, schema, &mut prepared).await;
        }
        if for_llm && let Some(schema) = selected.schema() {
            stef::add_schema_context(&mut prepared, event, schema);
        }
        Ok(prepared)
    }

    /// The catalogue schema of `event`'s database, if a catalogue has it.
    fn select_schema(&self, event: &Event, profile: &RuleProfile) -> SelectedSchema {
        match &self.catalogues {
            Some(store) => store.select(event, profile),
            None => SelectedSchema::None,
        }
    }

    /// [`stef::prepare_with`] with the scorer's options and `selected`'s schema.
    fn prepare_with_schema(
        &self,
        event: &Event,
        profile: &RuleProfile,
        selected: &SelectedSchema,
    ) -> Result<Prepared, crate::sqlspec::SpecError> {
        stef::prepare_with(
            event,
            profile,
            &stef::PrepareOptions {
                max_sql_bytes: self.options.max_sql_bytes,
                catalogue: selected.as_selection(),
            },
        )
    }

    /// The line-rate row when nothing is waited for (the deterministic judge, no probe): the
    /// event prepared, finished and written in one call, its parts never held across an
    /// `await` (each move of the ~1 KB prepared event and its outcome between the states of a
    /// future was a copy).
    fn score_stef_now(&self, event: &Event, ts: &str, profile: &RuleProfile) -> EvaluationRow {
        let selected = self.select_schema(event, profile);
        let prepared = self.prepare_with_schema(event, profile, &selected);
        self.deterministic_row(prepared, event, ts, profile)
    }

    /// The deterministic judge's row for a prepared event (stateless: the fallback is the same
    /// judge): no call to wait for, nothing that can fail, the prepared question spec moved
    /// into the assessment rather than copied; the non-scorable row when it could not be
    /// prepared.
    fn deterministic_row(
        &self,
        prepared: Result<Prepared, crate::sqlspec::SpecError>,
        event: &Event,
        ts: &str,
        profile: &RuleProfile,
    ) -> EvaluationRow {
        match prepared {
            Ok(prepared) => self.fallback.finish(prepared, profile).to_row_with(
                event,
                ts,
                profile,
                0,
                &self.verdict_model,
            ),
            Err(error) => {
                stef::non_scorable_row_with(event, ts, &error, profile, &self.verdict_model)
            }
        }
    }

    /// Judge selected events a second time with `judge` (the LLM judge): their `stef_judged`
    /// rows ([`Scorer::judged_row`]).
    pub fn with_judged_pass(mut self, judge: Arc<dyn Judge>) -> Scorer {
        self.judged_pass = Some(judge);
        self
    }

    /// The second-pass judge, when there is one.
    pub fn judged_pass(&self) -> Option<&Arc<dyn Judge>> {
        self.judged_pass.as_ref()
    }

    /// The rule profile and the deterministic preparation of a selected event, for its
    /// second-pass judgment.
    pub async fn prepare_judged(
        &self,
        event: &Event,
    ) -> (
        Arc<RuleProfile>,
        Result<Prepared, crate::sqlspec::SpecError>,
    ) {
        let profile = self.profiles.profile_for(event.app_id.as_deref());
        let for_llm = self
            .judged_pass
            .as_ref()
            .is_some_and(|j| j.kind().starts_with("llm"));
        let prepared = self.prepare(event, &profile, for_llm).await;
        (profile, prepared)
    }

    /// The `stef_judged` row of a selected event: STEF computed with the second-pass judge's
    /// `assessment` (or, when it failed, a `judge_error` row that keeps the error), carrying why
    /// the event was selected and the line-rate score it revises.
    #[allow(clippy::too_many_arguments)]
    pub fn judged_row(
        &self,
        event: &Event,
        ts: &str,
        columns: crate::evaluation::JudgedColumns,
        profile: &RuleProfile,
        prepared: &Prepared,
        assessment: Result<JudgeAssessment, JudgeError>,
        latency_us: u64,
    ) -> EvaluationRow {
        let mut row = match assessment {
            Ok(assessment) => {
                let outcome = stef::finish(prepared, assessment, profile);
                let mut row = outcome.to_row(event, ts, profile, latency_us);
                row.metric = crate::evaluation::Metric::StefJudged;
                row
            }
            Err(error) => {
                let mut row =
                    EvaluationRow::for_event(event, ts, crate::evaluation::Metric::StefJudged);
                row.status = RowStatus::JudgeError;
                row.details = serde_json::json!({
                    "judge_error": error.to_string(),
                    "judge": self.judged_pass.as_ref().map(|j| j.kind()),
                })
                .into();
                row
            }
        };
        row.judged = Some(columns);
        row
    }

    /// The deterministic judge with the default profile for every app.
    pub fn deterministic() -> Scorer {
        Scorer::new(
            Arc::new(DeterministicJudge),
            Arc::new(SingleProfile::default()),
            ScorerOptions::default(),
        )
    }

    /// Add gold-metric scoring for events that carry `gold`.
    pub fn with_gold(mut self, gold: Arc<dyn GoldMetrics>) -> Scorer {
        self.gold = Some(gold);
        self
    }

    /// The primary judge's kind (`deterministic` or `llm:<model>`).
    pub fn judge_kind(&self) -> String {
        self.judge.kind()
    }

    /// Finish the judge's background work (queued durable-cache writes); call after the last
    /// event, before exiting.
    pub async fn flush(&self) {
        self.judge.flush().await;
        if let Some(judge) = &self.judged_pass {
            judge.flush().await;
        }
        if let Some(gold) = &self.gold {
            gold.flush().await;
        }
    }

    /// LLM usage so far: the STEF judge's totals when it is an LLM judge, the gold metrics'
    /// own client (when separate), and the judged gold metrics' call counts.
    pub fn llm_usage(&self) -> crate::telemetry::stats::LlmUsage {
        let mut usage = self
            .gold
            .as_ref()
            .map(|g| g.llm_usage())
            .unwrap_or_default();
        // The STEF judge that talks to an LLM: the second pass's, else (tests, custom scorers)
        // the line-rate judge when it is one.
        let stef_llm = self
            .judged_pass
            .as_ref()
            .filter(|j| j.kind().starts_with("llm"))
            .or(Some(&self.judge).filter(|j| j.kind().starts_with("llm")));
        if let Some(judge) = stef_llm {
            let shared = self.gold.as_ref().is_some_and(|g| g.shares_judge_client());
            usage.clients.insert(
                0,
                crate::telemetry::stats::ClientUsage {
                    role: if shared {
                        "STEF judge + gold metrics".into()
                    } else {
                        "STEF judge".into()
                    },
                    judge: judge.kind(),
                    totals: judge.totals(),
                },
            );
        }
        usage
    }

    /// Score `event` and, with a second-pass judge, judge it at once (a census of one: `score`
    /// shows both rows of a scorable event).
    pub async fn score_both_passes(&self, event: &Event) -> Vec<EvaluationRow> {
        let mut rows = self.score(event).await;
        let Some(judge) = &self.judged_pass else {
            return rows;
        };
        let Some(line) = rows
            .iter()
            .find(|r| {
                r.metric == crate::evaluation::Metric::Stef
                    && matches!(r.status, RowStatus::Ok | RowStatus::JudgeFallback)
            })
            .and_then(crate::sampling::LineRate::of)
        else {
            return rows;
        };
        let ts = rows.first().map(|r| r.ts.clone()).unwrap_or_default();
        let (profile, prepared) = self.prepare_judged(event).await;
        let Ok(prepared) = prepared else {
            return rows;
        };
        let started = Instant::now();
        let request = JudgeRequest {
            event,
            prepared: &prepared,
            profile: &profile,
        };
        let assessment = judge.assess(request).await;
        let census = crate::sampling::Selection::census();
        let columns = crate::evaluation::JudgedColumns {
            selection: census.reasons_text().into(),
            inclusion_probability: census.inclusion_probability,
            revised_value: line.phi,
            revised_p_correct: line.p_correct,
            revised_correct: Some(line.correct()),
            revised_verdict: line.verdict,
        };
        let latency = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        rows.push(self.judged_row(
            event, &ts, columns, &profile, &prepared, assessment, latency,
        ));
        rows
    }

    /// Score `event`; rows of events without `ts` are stamped with the current time.
    pub async fn score(&self, event: &Event) -> Vec<EvaluationRow> {
        self.score_at(event, &now_rfc3339()).await
    }

    /// Score `event`; `ts` is the row time when the event has none (usually the receive time).
    pub async fn score_at(&self, event: &Event, ts: &str) -> Vec<EvaluationRow> {
        let started = Instant::now();
        let profile = self.profiles.profile_for(event.app_id.as_deref());
        let mut row = self.score_stef(event, ts, &profile).await;
        if let Some(stef_columns) = row.stef.as_mut() {
            stef_columns.latency_us =
                u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        }
        let mut rows = vec![row];
        if let (Some(gold_scorer), Some(gold)) = (&self.gold, &event.gold) {
            rows.extend(gold_scorer.score(event, gold, ts).await);
        }
        rows
    }

    async fn score_stef(&self, event: &Event, ts: &str, profile: &RuleProfile) -> EvaluationRow {
        if self.judge.is_deterministic() {
            // The line rate's judge; with a probe, the prepared event waits for it first.
            if self.prober.is_none() {
                return self.score_stef_now(event, ts, profile);
            }
            let prepared = self.prepare(event, profile, false).await;
            return self.deterministic_row(prepared, event, ts, profile);
        }
        let for_llm = self.judge.kind().starts_with("llm");
        let prepared = match self.prepare(event, profile, for_llm).await {
            Ok(prepared) => prepared,
            Err(error) => {
                return stef::non_scorable_row_with(
                    event,
                    ts,
                    &error,
                    profile,
                    &self.verdict_model,
                );
            }
        };
        let request = JudgeRequest {
            event,
            prepared: &prepared,
            profile,
        };
        let (assessment, judge_error) = match self.judge.assess(request).await {
            Ok(assessment) => (assessment, None),
            Err(error) => {
                tracing::warn!(
                    event_id = %event.event_id,
                    judge = %self.judge.kind(),
                    %error,
                    "judge failed; scoring with the deterministic judge"
                );
                let assessment = match self.fallback.assess(request).await {
                    Ok(assessment) => assessment,
                    Err(second) => last_resort_assessment(&prepared, &error, &second),
                };
                (assessment, Some(error))
            }
        };
        let outcome = stef::finish_owned(prepared, assessment, profile);
        let mut row = outcome.to_row_with(event, ts, profile, 0, &self.verdict_model);
        if let Some(error) = judge_error {
            mark_judge_fallback(&mut row, &error);
        }
        row
    }
}

/// Turn a row into a `judge_fallback` row that keeps the judge's error in `details`.
fn mark_judge_fallback(row: &mut EvaluationRow, error: &JudgeError) {
    if row.status == RowStatus::Ok {
        row.status = RowStatus::JudgeFallback;
    }
    let entry = Value::String(error.to_string());
    match row.details.tree_mut() {
        Value::Object(map) => {
            map.insert("judge_error".into(), entry);
        }
        other => {
            let previous = std::mem::take(other);
            let mut map = serde_json::Map::new();
            map.insert("details".into(), previous);
            map.insert("judge_error".into(), entry);
            *other = Value::Object(map);
        }
    }
}

/// Used only if even the deterministic judge fails: the deterministic question view, a cautious
/// verdict and low confidence, with both errors in the rationale.
fn last_resort_assessment(
    prepared: &Prepared,
    first: &JudgeError,
    second: &JudgeError,
) -> JudgeAssessment {
    JudgeAssessment::deterministic(
        prepared.question_spec.clone(),
        prepared.enrichment.clone(),
        Verdict::PotentiallyIncorrect,
        0.5,
        format!("no judge could assess this event: {first}; fallback: {second}"),
    )
}

/// The current time as RFC 3339 with milliseconds (`2026-11-21T10:00:00.000Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
