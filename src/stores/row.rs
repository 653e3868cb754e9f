//! The one read model of stored evaluation rows: [`StoredRow`], what `report`, `audit`,
//! `calibrate` and the review page read back from either store — a JSONL directory
//! (`stores::jsonl::rows`) or ClickHouse (`stores::clickhouse::rows`, the same type from `JSONEachRow`).
//!
//! The two stores encode some columns differently (a verdict is `true` in JSONL and `1` in
//! ClickHouse, details an object or JSON text, a time RFC 3339 or `YYYY-MM-DD hh:mm:ss`, an
//! absent label `null` or `''`); the deserializers here read both the same way, so every reader
//! sees one row whichever store it came from.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// An evaluation row as stored, read back (a JSONL line or ClickHouse JSONEachRow): the one
/// read model of `report`, `audit`, `calibrate` and the review page.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct StoredRow {
    /// Event id.
    pub event_id: String,
    /// Event time, RFC 3339 (ClickHouse's `YYYY-MM-DD hh:mm:ss`, read as UTC, is converted).
    #[serde(default, alias = "ts_utc", deserialize_with = "rfc3339_time")]
    pub ts: String,
    /// Application id.
    #[serde(default, deserialize_with = "blank_is_none")]
    pub app_id: Option<String>,
    /// Agent id.
    #[serde(default, deserialize_with = "blank_is_none")]
    pub agent_id: Option<String>,
    /// Agent version.
    #[serde(default, deserialize_with = "blank_is_none")]
    pub agent_version: Option<String>,
    /// Model.
    #[serde(default, deserialize_with = "blank_is_none")]
    pub model: Option<String>,
    /// Run id.
    #[serde(default, deserialize_with = "blank_is_none")]
    pub run_id: Option<String>,
    /// The metric (its name as stored; a name this build does not know is kept).
    pub metric: crate::evaluation::StoredMetric,
    /// Value (0–100 for stef, 0–1 otherwise).
    pub value: f64,
    /// Verdict (bool in JSONL, 0/1 in ClickHouse).
    #[serde(default, deserialize_with = "flexible_bool")]
    pub verdict: Option<bool>,
    /// Row status.
    #[serde(default)]
    pub status: String,
    /// Details (object in JSONL, JSON text in ClickHouse).
    #[serde(default, deserialize_with = "json_or_text")]
    pub details: Value,
    /// STEF quality tier.
    #[serde(default)]
    pub quality_tier: Option<String>,
    /// STEF filter status.
    #[serde(default)]
    pub filter_status: Option<String>,
    /// STEF semantic verdict.
    #[serde(default)]
    pub semantic_verdict: Option<String>,
    /// STEF judge confidence.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// STEF confidence tier.
    #[serde(default)]
    pub confidence_tier: Option<String>,
    /// STEF rules fired.
    #[serde(default)]
    pub rules_fired: Vec<String>,
    /// STEF enrichment status.
    #[serde(default)]
    pub enrichment_status: Option<String>,
    /// Which judge scored the row.
    #[serde(default)]
    pub judge: Option<String>,
    /// The judge's identity (`StefColumns::judge_identity`); '' on other rows and old rows.
    #[serde(default)]
    pub judge_identity: String,
    /// `stef_judged`: why the event was selected.
    #[serde(default)]
    pub selection: Option<String>,
    /// `stef_judged`: inclusion probability of the uniform slice.
    #[serde(default)]
    pub inclusion_probability: Option<f64>,
    /// `stef_judged`: the line-rate Φ revised.
    #[serde(default)]
    pub revised_value: Option<f64>,
    /// `stef_judged`: the line-rate verdict revised.
    #[serde(default)]
    pub revised_verdict: Option<String>,
    /// STEF line-rate rows: the probability that people call the query correct.
    #[serde(default)]
    pub p_correct: Option<f64>,
    /// `stef_judged`: the revised line-rate row's `p_correct`.
    #[serde(default)]
    pub revised_p_correct: Option<f64>,
    /// `stef_judged`: the revised line-rate row's boolean verdict (bool in JSONL, 0/1 in
    /// ClickHouse).
    #[serde(default, deserialize_with = "flexible_bool")]
    pub revised_correct: Option<bool>,
    /// STEF rows: prompt tokens the LLM judge spent on the row (other rows keep theirs in
    /// `details`). Read for the judge's spend; not shown.
    #[serde(default, skip_serializing, deserialize_with = "flexible_count")]
    pub prompt_tokens: Option<u64>,
    /// STEF rows: completion tokens the LLM judge spent on the row.
    #[serde(default, skip_serializing, deserialize_with = "flexible_count")]
    pub completion_tokens: Option<u64>,
}

impl StoredRow {
    /// The variant a report groups the row under: the agent version, else the agent id (a
    /// benchmark run's system), else `unknown`.
    pub fn variant(&self) -> String {
        self.agent_version
            .clone()
            .or_else(|| self.agent_id.clone())
            .unwrap_or_else(|| "unknown".into())
    }

    /// The metric, when it is one this build knows (a row written by a newer build may name
    /// another).
    pub fn known_metric(&self) -> Option<crate::evaluation::Metric> {
        self.metric.known()
    }

    /// Whether the row carries a score (`RowStatus::is_scored` of its status).
    pub fn is_scored(&self) -> bool {
        crate::evaluation::RowStatus::name_is_scored(&self.status)
    }

    /// The LLM tokens the row records, prompt and completion: the STEF columns, else
    /// `details.prompt_tokens` / `details.completion_tokens` (FLEX, ROSE, Hybrid-EX).
    pub fn tokens(&self) -> (u64, u64) {
        // ClickHouse stores 0 in the STEF columns of other rows; JSONL leaves them out.
        let columns = (
            self.prompt_tokens.unwrap_or(0),
            self.completion_tokens.unwrap_or(0),
        );
        if columns != (0, 0) || self.details.get("prompt_tokens").is_none() {
            return columns;
        }
        let get = |key: &str| self.details.get(key).and_then(Value::as_u64).unwrap_or(0);
        (get("prompt_tokens"), get("completion_tokens"))
    }

    /// A line-rate row's predictor of correctness for the estimates: its `p_correct`, else its
    /// verdict (rows written before the correctness model: `correct` / `likely_correct`) as
    /// 0/1.
    pub fn line_rate_p(&self) -> f64 {
        self.p_correct
            .unwrap_or(if self.verdict_correct() { 1.0 } else { 0.0 })
    }

    /// Whether the row's judge called the query correct: its boolean `verdict`, else the
    /// four-point verdict being `correct` / `likely_correct`.
    pub fn verdict_correct(&self) -> bool {
        self.verdict.unwrap_or_else(|| {
            self.semantic_verdict
                .as_deref()
                .is_some_and(crate::evaluation::four_point_counts_as_correct)
        })
    }

    /// A `stef_judged` row: whether the line-rate verdict it revises called the query correct
    /// (`revised_correct`, else the revised four-point verdict).
    pub fn revised_line_correct(&self) -> bool {
        self.revised_correct.unwrap_or_else(|| {
            self.revised_verdict
                .as_deref()
                .is_some_and(crate::evaluation::four_point_counts_as_correct)
        })
    }

    /// A `stef_judged` row: the revised line-rate row's predictor of correctness
    /// (`revised_p_correct`, else its verdict as 0/1).
    pub fn revised_line_p(&self) -> f64 {
        self.revised_p_correct
            .unwrap_or(if self.revised_line_correct() {
                1.0
            } else {
                0.0
            })
    }

    /// Event time in seconds since the epoch (0 when unreadable).
    pub fn epoch(&self) -> i64 {
        parse_time(&self.ts).unwrap_or(0)
    }
}

/// Seconds since the epoch of an RFC 3339 time or a ClickHouse `YYYY-MM-DD hh:mm:ss` (UTC).
pub fn parse_time(text: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp());
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|t| t.and_utc().timestamp())
}

/// Deserialize a time as RFC 3339 (ClickHouse's `YYYY-MM-DD hh:mm:ss`, read as UTC, is
/// converted; anything else is kept as it is).
pub fn rfc3339_time<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    Ok(
        match chrono::NaiveDateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S") {
            Ok(t) => t
                .and_utc()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            Err(_) => text,
        },
    )
}

/// Deserialize an optional label, `''` (ClickHouse's absent value) as `None`.
pub fn blank_is_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.is_empty()))
}

/// Deserialize a verdict stored as a bool (JSONL), a number or a string (`1`/`0`, `true`/`false`).
pub fn flexible_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Bool(b)) => Some(b),
        Some(Value::Number(n)) => n.as_f64().map(|v| v != 0.0),
        Some(Value::String(s)) => match s.as_str() {
            "1" | "true" => Some(true),
            "0" | "false" => Some(false),
            _ => None,
        },
        _ => None,
    })
}

/// Deserialize a count stored as a number or, as ClickHouse quotes 64-bit integers in JSON,
/// as a string.
pub fn flexible_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    })
}

/// Deserialize `details` stored as an object (JSONL) or as JSON text (ClickHouse).
pub fn json_or_text<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_the_same_from_jsonl_and_clickhouse_encodings() {
        let jsonl = r#"{"event_id":"e1","ts":"2026-01-01T00:00:10Z","app_id":"a","metric":"stef","value":40.0,"verdict":false,"status":"ok","details":{"findings":[]},"quality_tier":"poor","rules_fired":["r1"],"prompt_tokens":12,"completion_tokens":3}"#;
        let clickhouse = r#"{"event_id":"e1","ts":"2026-01-01 00:00:10","app_id":"a","agent_id":"","metric":"stef","value":40,"verdict":0,"status":"ok","details":"{\"findings\":[]}","quality_tier":"poor","rules_fired":["r1"],"prompt_tokens":"12","completion_tokens":3}"#;
        let a: StoredRow = serde_json::from_str(jsonl).unwrap();
        let b: StoredRow = serde_json::from_str(clickhouse).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.epoch(), 1_767_225_610);
        assert_eq!(a.verdict, Some(false));
        assert_eq!(b.tokens(), (12, 3));
    }
}
