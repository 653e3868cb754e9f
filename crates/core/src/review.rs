//! The review contract: what a person needs to judge one event by hand, and what they said.
//!
//! - [`EventInputs`] — one row per scored event with the inputs the scores were computed from
//!   (question, enriched question, SQL) and the event's labels. The sinks store it beside the
//!   evaluation rows (`inputs.jsonl`, ClickHouse `event_inputs`) unless `[sink] store_inputs =
//!   false`, so the review page can show *why* an event scored what it did.
//! - [`HumanLabel`] — one reviewer's verdict on one event (`correct`, `incorrect`, `unsure`),
//!   with an optional error category and note. One row per (event, reviewer): a later label by
//!   the same reviewer replaces the earlier one (the newest `labelled_at` wins).
//! - [`alert_queue_url`] — the review page's address of an alert's events (alerts link to it).
//! - [`queue_priority`] — how informative a label on an event would be, from its rows alone
//!   (metrics that disagree, low confidence, a poor tier) plus whether it lies in a firing
//!   alert's window. Pure, so the review queue orders the same way over JSONL and ClickHouse.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use crate::event::{Event, QueryResult};

/// The inputs of one scored event, as the review page shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventInputs {
    /// The event's idempotency key.
    pub event_id: CompactString,
    /// Event time (RFC 3339), as on the event's evaluation rows (read back from ClickHouse as
    /// `ts_utc`, `YYYY-MM-DD hh:mm:ss` in UTC).
    #[serde(alias = "ts_utc")]
    pub ts: CompactString,
    /// Application id.
    #[serde(default)]
    pub app_id: Option<CompactString>,
    /// Agent id.
    #[serde(default)]
    pub agent_id: Option<CompactString>,
    /// Agent version.
    #[serde(default)]
    pub agent_version: Option<CompactString>,
    /// Model.
    #[serde(default)]
    pub model: Option<CompactString>,
    /// Backfill/benchmark run id.
    #[serde(default)]
    pub run_id: Option<CompactString>,
    /// The user's question.
    pub question: String,
    /// The agent's enriched question.
    #[serde(default)]
    pub enriched_question: Option<String>,
    /// The SQL the agent produced.
    pub sql: String,
    /// The gold SQL, when the event carried one.
    #[serde(default)]
    pub gold_sql: Option<String>,
    /// What the agent got when it ran the SQL, when the event said (read back from ClickHouse
    /// as the JSON text of the `result` column, `''` for none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "result_object_or_text"
    )]
    pub result: Option<QueryResult>,
}

/// `result` as an object (JSONL), as its JSON text (ClickHouse; `''` is none), or null.
fn result_object_or_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<QueryResult>, D::Error> {
    use serde::de::Error as _;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(serde_json::Value::String(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(D::Error::custom),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(D::Error::custom),
    }
}

impl EventInputs {
    /// The inputs of `event`, taking its strings (the event is not needed after scoring).
    pub fn from_event(event: Event, ts: &str) -> EventInputs {
        EventInputs {
            ts: event
                .ts
                .map_or_else(|| CompactString::from(ts), CompactString::from),
            event_id: event.event_id.into(),
            app_id: event.app_id.map(CompactString::from),
            agent_id: event.agent_id.map(CompactString::from),
            agent_version: event.agent_version.map(CompactString::from),
            model: event.model.map(CompactString::from),
            run_id: event.run_id.map(CompactString::from),
            question: event.question,
            enriched_question: event.enriched_question,
            sql: event.sql,
            gold_sql: event.gold.and_then(|g| g.sql),
            result: event.result,
        }
    }
}

/// A reviewer's verdict on an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelVerdict {
    /// The SQL answers the question.
    Correct,
    /// The SQL does not answer the question.
    Incorrect,
    /// The reviewer cannot tell; never enters κ or an estimate.
    Unsure,
}

impl LabelVerdict {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            LabelVerdict::Correct => "correct",
            LabelVerdict::Incorrect => "incorrect",
            LabelVerdict::Unsure => "unsure",
        }
    }

    /// Parse the wire name.
    pub fn parse(s: &str) -> Option<LabelVerdict> {
        match s {
            "correct" => Some(LabelVerdict::Correct),
            "incorrect" => Some(LabelVerdict::Incorrect),
            "unsure" => Some(LabelVerdict::Unsure),
            _ => None,
        }
    }

    /// `Some(true)` for correct, `Some(false)` for incorrect, `None` for unsure.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            LabelVerdict::Correct => Some(true),
            LabelVerdict::Incorrect => Some(false),
            LabelVerdict::Unsure => None,
        }
    }
}

/// Error categories a reviewer can pick (after the expert error taxonomies the STEF papers
/// use); free text goes into the note.
pub const ERROR_CATEGORIES: [&str; 8] = [
    "wrong_table",
    "wrong_column",
    "wrong_condition",
    "wrong_value",
    "wrong_aggregation",
    "wrong_join",
    "wrong_output",
    "other",
];

/// Longest reviewer name accepted.
pub const MAX_REVIEWER_CHARS: usize = 100;
/// Longest note accepted.
pub const MAX_NOTE_CHARS: usize = 4_000;
/// Longest event id accepted in a label.
pub const MAX_EVENT_ID_CHARS: usize = 512;

/// One reviewer's label on one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanLabel {
    /// The event labelled.
    pub event_id: String,
    /// Who labelled it.
    pub reviewer: String,
    /// The verdict.
    pub verdict: LabelVerdict,
    /// One of [`ERROR_CATEGORIES`], for an incorrect event.
    #[serde(default)]
    pub category: Option<String>,
    /// Free text.
    #[serde(default)]
    pub note: Option<String>,
    /// When (RFC 3339, UTC).
    pub labelled_at: String,
}

/// Why a label was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// A required field is empty.
    #[error("{0} is required")]
    Missing(&'static str),
    /// A field is longer than allowed.
    #[error("{field} is longer than {max} characters")]
    TooLong {
        /// Field name.
        field: &'static str,
        /// Limit.
        max: usize,
    },
    /// A field holds control characters.
    #[error("{0} holds control characters")]
    Control(&'static str),
    /// The verdict is not correct/incorrect/unsure.
    #[error("verdict must be correct, incorrect or unsure, not {0:?}")]
    Verdict(String),
    /// The category is not one of [`ERROR_CATEGORIES`].
    #[error("unknown error category {0:?}")]
    Category(String),
}

impl HumanLabel {
    /// Build a label from untrusted form fields, validating each: the event id and reviewer are
    /// required, bounded and single-line; the verdict is one of three; the category (empty =
    /// none) is one of [`ERROR_CATEGORIES`]; the note (empty = none) is bounded.
    pub fn validated(
        event_id: &str,
        reviewer: &str,
        verdict: &str,
        category: &str,
        note: &str,
        labelled_at: String,
    ) -> Result<HumanLabel, LabelError> {
        let event_id = single_line("event_id", event_id.trim(), MAX_EVENT_ID_CHARS)?;
        let reviewer = single_line("reviewer", reviewer.trim(), MAX_REVIEWER_CHARS)?;
        let verdict = LabelVerdict::parse(verdict.trim())
            .ok_or_else(|| LabelError::Verdict(verdict.chars().take(40).collect()))?;
        let category = match category.trim() {
            "" => None,
            c if ERROR_CATEGORIES.contains(&c) => Some(c.to_string()),
            c => return Err(LabelError::Category(c.chars().take(40).collect())),
        };
        let note = note.trim();
        if note.chars().count() > MAX_NOTE_CHARS {
            return Err(LabelError::TooLong {
                field: "note",
                max: MAX_NOTE_CHARS,
            });
        }
        if note
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\r' && c != '\t')
        {
            return Err(LabelError::Control("note"));
        }
        Ok(HumanLabel {
            event_id,
            reviewer,
            verdict,
            category,
            note: (!note.is_empty()).then(|| note.to_string()),
            labelled_at,
        })
    }
}

fn single_line(field: &'static str, value: &str, max: usize) -> Result<String, LabelError> {
    if value.is_empty() {
        return Err(LabelError::Missing(field));
    }
    if value.chars().count() > max {
        return Err(LabelError::TooLong { field, max });
    }
    if value.chars().any(char::is_control) {
        return Err(LabelError::Control(field));
    }
    Ok(value.to_string())
}

/// Keep one label per (event, reviewer): the newest by `labelled_at` (RFC 3339 UTC strings
/// order as times), the later one in input order on a tie. Output sorted by (event, reviewer).
pub fn latest_labels(labels: impl IntoIterator<Item = HumanLabel>) -> Vec<HumanLabel> {
    let mut by_key: std::collections::BTreeMap<(String, String), HumanLabel> =
        std::collections::BTreeMap::new();
    for label in labels {
        let key = (label.event_id.clone(), label.reviewer.clone());
        match by_key.get(&key) {
            Some(kept) if kept.labelled_at > label.labelled_at => {}
            _ => {
                by_key.insert(key, label);
            }
        }
    }
    by_key.into_values().collect()
}

/// What the queue knows about one event's rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventSignals {
    /// The line-rate STEF verdict says correct or likely correct.
    pub line_rate_correct: Option<bool>,
    /// The line-rate STEF confidence tier (`high`, `moderate`, `low`).
    pub line_rate_confidence: Option<String>,
    /// The line-rate STEF quality tier.
    pub quality_tier: Option<String>,
    /// The LLM-judged STEF verdict (correct or likely correct), when the event was judged.
    pub judged_correct: Option<bool>,
    /// Verdicts of the gold metrics present (`ex`, `esm`, `flex`, …), scored rows only.
    pub gold_verdicts: Vec<(String, bool)>,
    /// EX says equal, but a counterexample database tells the queries apart.
    pub ex_counterexample: bool,
    /// The event lies in the window of an alert that is firing on its series.
    pub in_firing_alert: bool,
}

/// One reason an event is worth labelling, with its weight in the queue's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueReason {
    /// Line rate and the LLM judge disagree.
    LineRateVsJudge,
    /// Line rate disagrees with the gold metrics' majority.
    LineRateVsGold,
    /// The gold metrics disagree among themselves.
    GoldMetricsDisagree,
    /// EX = 1 although a counterexample separates the queries.
    ExCounterexample,
    /// The line-rate confidence is low.
    LowConfidence,
    /// The event is in a firing alert's window.
    FiringAlert,
    /// The line-rate confidence is moderate.
    ModerateConfidence,
    /// The event is in the poor tier.
    PoorTier,
}

impl QueueReason {
    /// Weight in the priority sum: disagreement between judges first (a label settles which is
    /// right), then low confidence and alert windows (a label checks what is paging people).
    pub fn weight(self) -> u32 {
        match self {
            QueueReason::LineRateVsJudge => 8,
            QueueReason::ExCounterexample => 7,
            QueueReason::LineRateVsGold => 6,
            QueueReason::GoldMetricsDisagree => 5,
            QueueReason::LowConfidence => 4,
            QueueReason::FiringAlert => 4,
            QueueReason::ModerateConfidence => 2,
            QueueReason::PoorTier => 1,
        }
    }

    /// Short text shown in the queue.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueReason::LineRateVsJudge => "line rate and LLM judge disagree",
            QueueReason::LineRateVsGold => "line rate and gold metrics disagree",
            QueueReason::GoldMetricsDisagree => "gold metrics disagree",
            QueueReason::ExCounterexample => "EX = 1 with a counterexample",
            QueueReason::LowConfidence => "low confidence",
            QueueReason::FiringAlert => "in a firing alert's window",
            QueueReason::ModerateConfidence => "moderate confidence",
            QueueReason::PoorTier => "poor tier",
        }
    }
}

/// The reasons to label an event and their summed weight (0 = nothing makes a label more
/// informative than on any other event).
pub fn queue_priority(signals: &EventSignals) -> (u32, Vec<QueueReason>) {
    let mut reasons = Vec::new();
    if let (Some(line), Some(judged)) = (signals.line_rate_correct, signals.judged_correct)
        && line != judged
    {
        reasons.push(QueueReason::LineRateVsJudge);
    }
    if signals.ex_counterexample {
        reasons.push(QueueReason::ExCounterexample);
    }
    let positives = signals.gold_verdicts.iter().filter(|(_, v)| *v).count();
    let negatives = signals.gold_verdicts.len() - positives;
    if positives > 0 && negatives > 0 {
        reasons.push(QueueReason::GoldMetricsDisagree);
    }
    if let Some(line) = signals.line_rate_correct
        && positives != negatives
        && line != (positives > negatives)
    {
        reasons.push(QueueReason::LineRateVsGold);
    }
    match signals.line_rate_confidence.as_deref() {
        Some("low") => reasons.push(QueueReason::LowConfidence),
        Some("moderate") => reasons.push(QueueReason::ModerateConfidence),
        _ => {}
    }
    if signals.in_firing_alert {
        reasons.push(QueueReason::FiringAlert);
    }
    // The stored name of `stef::QualityTier::Poor` (the review contract sits below `stef`).
    if signals.quality_tier.as_deref() == Some("poor") {
        reasons.push(QueueReason::PoorTier);
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.weight()));
    (reasons.iter().map(|r| r.weight()).sum(), reasons)
}

/// Bytes left as they are in a URL component: RFC 3986's unreserved set.
const URL_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` as one URL path segment or query value (every byte outside RFC 3986's unreserved set
/// percent-encoded).
pub fn url_component(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, URL_COMPONENT).to_string()
}

/// The review queue of one alert's events on the review page at `base` (the page's own
/// `/queue?alert=` route; alerts link to it).
pub fn alert_queue_url(base: &str, alert_id: &str) -> String {
    format!("{base}/queue?alert={}", url_component(alert_id))
}

/// Whether a STEF semantic verdict counts as correct.
pub fn semantic_correct(verdict: &str) -> bool {
    matches!(verdict, "correct" | "likely_correct")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_validated_field_by_field() {
        let ok = HumanLabel::validated("e1", " ana ", "incorrect", "wrong_column", "", "t".into())
            .unwrap();
        assert_eq!(ok.reviewer, "ana");
        assert_eq!(ok.category.as_deref(), Some("wrong_column"));
        assert_eq!(ok.note, None);
        assert_eq!(
            HumanLabel::validated("e1", "", "correct", "", "", "t".into()),
            Err(LabelError::Missing("reviewer"))
        );
        assert!(matches!(
            HumanLabel::validated("e1", "ana", "maybe", "", "", "t".into()),
            Err(LabelError::Verdict(_))
        ));
        assert!(matches!(
            HumanLabel::validated("e1", "ana", "correct", "<script>", "", "t".into()),
            Err(LabelError::Category(_))
        ));
        assert!(matches!(
            HumanLabel::validated("e\n1", "ana", "correct", "", "", "t".into()),
            Err(LabelError::Control("event_id"))
        ));
        let long = "x".repeat(MAX_NOTE_CHARS + 1);
        assert!(matches!(
            HumanLabel::validated("e1", "ana", "correct", "", &long, "t".into()),
            Err(LabelError::TooLong { field: "note", .. })
        ));
        // A multi-line note is fine.
        assert!(HumanLabel::validated("e1", "ana", "unsure", "", "a\nb", "t".into()).is_ok());
    }

    #[test]
    fn urls_keep_unreserved_bytes_and_encode_the_rest() {
        assert_eq!(url_component("ab-1_2.3~"), "ab-1_2.3~");
        assert_eq!(url_component("a/b c&d"), "a%2Fb%20c%26d");
        assert_eq!(
            alert_queue_url("https://r:8089", "x-1/2"),
            "https://r:8089/queue?alert=x-1%2F2"
        );
    }

    #[test]
    fn the_newest_label_per_reviewer_wins() {
        let l = |e: &str, r: &str, v, t: &str| HumanLabel {
            event_id: e.into(),
            reviewer: r.into(),
            verdict: v,
            category: None,
            note: None,
            labelled_at: t.into(),
        };
        let kept = latest_labels([
            l("e1", "ana", LabelVerdict::Correct, "2026-01-01T00:00:02Z"),
            l("e1", "ana", LabelVerdict::Incorrect, "2026-01-01T00:00:01Z"),
            l("e1", "bo", LabelVerdict::Unsure, "2026-01-01T00:00:00Z"),
            l("e1", "bo", LabelVerdict::Correct, "2026-01-01T00:00:03Z"),
        ]);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].verdict, LabelVerdict::Correct);
        assert_eq!(kept[1].verdict, LabelVerdict::Correct);
    }

    #[test]
    fn disagreement_ranks_above_low_confidence_and_nothing_scores_zero() {
        let quiet = EventSignals {
            line_rate_correct: Some(true),
            line_rate_confidence: Some("high".into()),
            quality_tier: Some("good".into()),
            ..EventSignals::default()
        };
        assert_eq!(queue_priority(&quiet), (0, vec![]));
        let disagree = EventSignals {
            judged_correct: Some(false),
            ..quiet.clone()
        };
        let low = EventSignals {
            line_rate_confidence: Some("low".into()),
            ..quiet.clone()
        };
        assert!(queue_priority(&disagree).0 > queue_priority(&low).0);
        assert_eq!(
            queue_priority(&disagree).1,
            vec![QueueReason::LineRateVsJudge]
        );
        let gold = EventSignals {
            gold_verdicts: vec![("ex".into(), false), ("flex".into(), false)],
            ..quiet.clone()
        };
        assert_eq!(queue_priority(&gold).1, vec![QueueReason::LineRateVsGold]);
        let split = EventSignals {
            gold_verdicts: vec![("ex".into(), true), ("esm".into(), false)],
            ex_counterexample: true,
            ..quiet
        };
        assert_eq!(
            queue_priority(&split).1,
            vec![
                QueueReason::ExCounterexample,
                QueueReason::GoldMetricsDisagree
            ]
        );
    }
}
