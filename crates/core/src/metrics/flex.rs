//! FLEX (False-Less EXecution, Kim et al., NAACL 2025): an LLM judge whose prompt variant is
//! chosen by EX (see `shared/specs/flex.md`).
//!
//! - EX = 1 → the `flex_eq` prompt (strict criteria, looking for false positives); execution
//!   results are withheld on purpose.
//! - EX = 0 → the `flex_neq` prompt (loose criteria, looking for false negatives); both results
//!   are shown, rendered by [`render_result`] with a configurable [`RenderPreset`].
//! - Sections in Fig 14 order: Schema, Question, Prediction Query, [Prediction Result], Ground
//!   Truth Query, [Ground Truth Result], Hint (left out when there is no evidence); then the
//!   "Note: same/different execution results" line (flex.md §4 #10). No `DB_HINTS` (#9).
//! - A prediction that fails to execute is incorrect without an LLM call (§2.1).
//! - The verdict comes through the structured-call layer as `{"reasoning", "correct"}` instead
//!   of prose plus a fenced block: the layer's JSON extraction, strict validation and repair turn
//!   replace the repo's parser (§2.7). A failed judge gives status `judge_error`, value 0 (counted
//!   incorrect, as §2.8 says) and no verdict, so it is reported on its own.
//! - The optional error-category second call (§2.9, [`FlexOptions::error_categories`], off by
//!   default): only when the verdict is *incorrect*, the `flex_categories` prompt (schema,
//!   question, both queries, the first-pass judgment, hint; no results) classifies why, multi-label,
//!   with the Fig 12 taxonomy ([`ErrorCategories`]). The issued keys go to
//!   `details.error_categories`; it never changes the verdict, and a failed categorisation keeps
//!   the verdict and records `details.error_categories_error`. A prediction that fails to execute
//!   gets the category `error` without a call.
//! - The false-negative taxonomy (§2.9, Fig 13; same switch): when EX = 0 but the verdict is
//!   *correct*, the `flex_fn_categories` prompt (same sections) asks *why EX missed it*
//!   ([`FnCategories`]: output structure, value representation, incorrect ground truth, multiple
//!   answers, other minor issues) → `details.fn_categories` (+ `fn_category_explanations`, or
//!   `fn_categories_error`). Never changes the verdict. The released FN template ends without a
//!   closing brace, so replies missing their final `}` are accepted (the structured layer's
//!   lenient JSON extraction). Correct verdicts with EX = 1 (true positives) get no second call.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::evaluation::{Metric, RowStatus};
use crate::exec::{ExecError, ResultSet, SqlValue};
use crate::judge::StructuredJudge;
use crate::judge::structured::{ReplySchema, StructuredCall, StructuredReply, call_structured};

use super::avoid::{Avoidance, CallCounter};
use super::judge_case::{GoldCase, Outcome, judge_error_json, lenient_bool};

/// How execution results are rendered in prompts (flex.md §2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RenderPreset {
    /// The paper's rule: header, > 100 rows → first 50 + last 50, strings cut at 50 chars.
    #[default]
    Paper,
    /// The released human-study data: no header, > 20 rows → 10 + 10, strings cut at 30 chars.
    RepoV1,
}

/// The parameters of a rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderSpec {
    /// Print a header row.
    pub header: bool,
    /// Truncate only when the result has more rows than this.
    pub max_rows: usize,
    /// Rows kept from the start when truncating.
    pub head: usize,
    /// Rows kept from the end when truncating.
    pub tail: usize,
    /// Longest text cell kept, in characters.
    pub max_chars: usize,
}

impl RenderPreset {
    /// The preset's parameters.
    pub fn spec(self) -> RenderSpec {
        match self {
            RenderPreset::Paper => RenderSpec {
                header: true,
                max_rows: 100,
                head: 50,
                tail: 50,
                max_chars: 50,
            },
            RenderPreset::RepoV1 => RenderSpec {
                header: false,
                max_rows: 20,
                head: 10,
                tail: 10,
                max_chars: 30,
            },
        }
    }
}

fn render_cell(v: &SqlValue, max_chars: usize) -> String {
    match v {
        SqlValue::Null => "NULL".to_string(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => format!("{f:?}"),
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()),
        SqlValue::Text(s) => {
            let flat: String = s
                .chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
                .collect();
            let len = flat.chars().count();
            let cut = if len > max_chars {
                format!(
                    "{}... {len} chars",
                    flat.chars().take(max_chars).collect::<String>()
                )
            } else {
                flat
            };
            cut.replace('|', "\\|")
        }
    }
}

/// Render a result as a markdown table: execution order kept, NULL as `NULL`, long text cut,
/// rows beyond `max_rows` elided as head + `...` + tail, and the original `shape=(R, C)` last.
pub fn render_result(rs: &ResultSet, spec: RenderSpec) -> String {
    if rs.rows.is_empty() {
        return format!("Empty execution result\nshape=(0, {})", rs.columns.len());
    }
    let line = |cells: Vec<String>| format!("| {} |", cells.join(" | "));
    let mut out = Vec::new();
    if spec.header {
        out.push(line(
            rs.columns.iter().map(|c| c.replace('|', "\\|")).collect(),
        ));
        out.push(line(rs.columns.iter().map(|_| "---".to_string()).collect()));
    }
    let row = |r: &Vec<SqlValue>| line(r.iter().map(|v| render_cell(v, spec.max_chars)).collect());
    let n = rs.rows.len();
    if n > spec.max_rows {
        out.extend(rs.rows.iter().take(spec.head).map(row));
        out.push("...".to_string());
        out.extend(rs.rows.iter().skip(n.saturating_sub(spec.tail)).map(row));
    } else {
        out.extend(rs.rows.iter().map(row));
    }
    out.push(format!("shape=({}, {})", n, rs.columns.len()));
    out.join("\n")
}

/// FLEX settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlexOptions {
    /// Result rendering preset (NEQ branch).
    pub preset: RenderPreset,
    /// Ask a second question for incorrect verdicts: which error categories apply (§2.9).
    pub error_categories: bool,
}

/// Prompt names of the two branches.
pub const FLEX_EQ_PROMPT: &str = "flex_eq";
/// Prompt name of the NEQ branch.
pub const FLEX_NEQ_PROMPT: &str = "flex_neq";
/// Prompt name of the error categorisation (second call, incorrect verdicts only).
pub const FLEX_CATEGORIES_PROMPT: &str = "flex_categories";
/// Prompt name of the false-negative categorisation (second call, EX = 0 judged correct).
pub const FLEX_FN_CATEGORIES_PROMPT: &str = "flex_fn_categories";
/// Category recorded for a prediction that failed to execute (no LLM call).
pub const EXEC_ERROR_CATEGORY: &str = "error";

/// Variables of the FLEX prompts.
#[derive(Debug, Serialize)]
pub struct FlexVars<'a> {
    /// Schema DDL.
    pub schema: String,
    /// Question.
    pub question: &'a str,
    /// Predicted SQL.
    pub pred_query: &'a str,
    /// Rendered predicted result (NEQ only).
    pub pred_result: Option<String>,
    /// Gold SQL.
    pub gt_query: &'a str,
    /// Rendered gold result (NEQ only).
    pub gt_result: Option<String>,
    /// Evidence (absent when empty).
    pub hint: Option<&'a str>,
}

/// The judge's reply: reasoning first, then the binary verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlexReply {
    /// Chain-of-thought analysis.
    pub reasoning: String,
    /// Whether the prediction answers the question correctly.
    #[serde(deserialize_with = "lenient_bool")]
    pub correct: bool,
}

static FLEX_SCHEMA: LazyLock<ReplySchema> = LazyLock::new(|| {
    ReplySchema::new(
        "flex_verdict",
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["reasoning", "correct"],
            "properties": {"reasoning": {"type": "string"}, "correct": {"type": "boolean"}}
        }),
    )
    .with_max_tokens(1024)
});

impl StructuredReply for FlexReply {
    fn schema() -> &'static ReplySchema {
        &FLEX_SCHEMA
    }
}

/// One category of the categorisation reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoryFlag {
    /// Whether the issue is present.
    #[serde(deserialize_with = "lenient_bool")]
    pub issued: bool,
    /// Why (may be empty when the issue is absent).
    pub explanation: String,
}

/// The error categories of an incorrect prediction (flex.md §2.9, Fig 12 taxonomy; multi-label).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorCategories {
    /// Tables or columns fit neither the question nor the schema.
    pub incorrect_schema_linking: CategoryFlag,
    /// The WHERE logic filters wrongly.
    pub incorrect_filtering_condition: CategoryFlag,
    /// Nullable columns mishandled in aggregates or arithmetic.
    pub missing_handling_of_nullable_column: CategoryFlag,
    /// Wrong when several rows qualify (ties, one-to-many).
    pub missing_handling_of_multiple_rows: CategoryFlag,
    /// GROUP BY / HAVING / ORDER BY / DISTINCT used needlessly.
    pub abused_clauses: CategoryFlag,
    /// Any other logic defect.
    pub other_fatal_issues: CategoryFlag,
}

/// The category keys, in the taxonomy's order.
pub const ERROR_CATEGORY_KEYS: [&str; 6] = [
    "incorrect_schema_linking",
    "incorrect_filtering_condition",
    "missing_handling_of_nullable_column",
    "missing_handling_of_multiple_rows",
    "abused_clauses",
    "other_fatal_issues",
];

impl ErrorCategories {
    /// (key, flag) pairs in the taxonomy's order.
    pub fn flags(&self) -> [(&'static str, &CategoryFlag); 6] {
        let [a, b, c, d, e, f] = ERROR_CATEGORY_KEYS;
        [
            (a, &self.incorrect_schema_linking),
            (b, &self.incorrect_filtering_condition),
            (c, &self.missing_handling_of_nullable_column),
            (d, &self.missing_handling_of_multiple_rows),
            (e, &self.abused_clauses),
            (f, &self.other_fatal_issues),
        ]
    }

    /// The keys whose issue is present.
    pub fn issued(&self) -> Vec<&'static str> {
        self.flags()
            .into_iter()
            .filter(|(_, f)| f.issued)
            .map(|(k, _)| k)
            .collect()
    }
}

static CATEGORIES_SCHEMA: LazyLock<ReplySchema> =
    LazyLock::new(|| taxonomy_schema("flex_error_categories", &ERROR_CATEGORY_KEYS));

impl StructuredReply for ErrorCategories {
    fn schema() -> &'static ReplySchema {
        &CATEGORIES_SCHEMA
    }
}

/// Why EX missed a correct prediction (flex.md §2.9, Fig 13 taxonomy; multi-label).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FnCategories {
    /// Column selection or order differs (output column names are ignored).
    pub different_output_structure: CategoryFlag,
    /// Formatting or data-type differences that do not change the logic.
    pub different_output_value_representation: CategoryFlag,
    /// The gold query is wrong and does not logically answer the question.
    pub incorrect_ground_truth_query: CategoryFlag,
    /// The question is ambiguous and has several correct answers.
    pub multiple_answers_available: CategoryFlag,
    /// Minor issues that leave logical correctness intact.
    pub other_minor_issues: CategoryFlag,
}

/// The false-negative category keys, in the taxonomy's order.
pub const FN_CATEGORY_KEYS: [&str; 5] = [
    "different_output_structure",
    "different_output_value_representation",
    "incorrect_ground_truth_query",
    "multiple_answers_available",
    "other_minor_issues",
];

/// The FN category that points at a wrong gold query (read by the gold audit).
pub const INCORRECT_GROUND_TRUTH: &str = "incorrect_ground_truth_query";

impl FnCategories {
    /// (key, flag) pairs in the taxonomy's order.
    pub fn flags(&self) -> [(&'static str, &CategoryFlag); 5] {
        let [a, b, c, d, e] = FN_CATEGORY_KEYS;
        [
            (a, &self.different_output_structure),
            (b, &self.different_output_value_representation),
            (c, &self.incorrect_ground_truth_query),
            (d, &self.multiple_answers_available),
            (e, &self.other_minor_issues),
        ]
    }
}

fn taxonomy_schema(name: &str, keys: &[&str]) -> ReplySchema {
    let flag = json!({
        "type": "object", "additionalProperties": false,
        "required": ["issued", "explanation"],
        "properties": {"issued": {"type": "boolean"}, "explanation": {"type": "string"}}
    });
    let properties: serde_json::Map<String, serde_json::Value> =
        keys.iter().map(|k| (k.to_string(), flag.clone())).collect();
    ReplySchema::new(
        name,
        json!({
            "type": "object", "additionalProperties": false,
            "required": keys,
            "properties": properties
        }),
    )
    .with_max_tokens(1024)
}

static FN_CATEGORIES_SCHEMA: LazyLock<ReplySchema> =
    LazyLock::new(|| taxonomy_schema("flex_fn_categories", &FN_CATEGORY_KEYS));

impl StructuredReply for FnCategories {
    fn schema() -> &'static ReplySchema {
        &FN_CATEGORIES_SCHEMA
    }
}

/// A categorisation reply (either taxonomy) and where its result goes in `details`.
trait Taxonomy: StructuredReply {
    /// The prompt that asks for it.
    const PROMPT: &'static str;
    /// `details` key of the issued keys; `<KEY>_error` holds a failed categorisation.
    const KEY: &'static str;
    /// `details` key of the issued keys' explanations.
    const EXPLANATIONS_KEY: &'static str;
    /// (key, flag) pairs in the taxonomy's order.
    fn pairs(&self) -> Vec<(&'static str, &CategoryFlag)>;
}

impl Taxonomy for ErrorCategories {
    const PROMPT: &'static str = FLEX_CATEGORIES_PROMPT;
    const KEY: &'static str = "error_categories";
    const EXPLANATIONS_KEY: &'static str = "error_category_explanations";
    fn pairs(&self) -> Vec<(&'static str, &CategoryFlag)> {
        self.flags().to_vec()
    }
}

impl Taxonomy for FnCategories {
    const PROMPT: &'static str = FLEX_FN_CATEGORIES_PROMPT;
    const KEY: &'static str = "fn_categories";
    const EXPLANATIONS_KEY: &'static str = "fn_category_explanations";
    fn pairs(&self) -> Vec<(&'static str, &CategoryFlag)> {
        self.flags().to_vec()
    }
}

/// Variables of the categorisation prompt (no execution results, §2.9).
#[derive(Debug, Serialize)]
pub struct FlexCategoryVars<'a> {
    /// Schema DDL.
    pub schema: &'a str,
    /// Question.
    pub question: &'a str,
    /// Predicted SQL.
    pub pred_query: &'a str,
    /// Gold SQL.
    pub gt_query: &'a str,
    /// The first-pass judgment (the judge's reasoning).
    pub judgment: &'a str,
    /// Evidence (absent when empty).
    pub hint: Option<&'a str>,
}

pub(crate) fn exec_failure(e: &ExecError, extra: serde_json::Value) -> Outcome {
    let mut details = json!({
        "avoided": Avoidance::PredictionFailed.as_str(),
        "pred_error": {"kind": e.kind(), "message": e.to_string()},
        "llm_calls": 0,
    });
    if let (Some(d), serde_json::Value::Object(x)) = (details.as_object_mut(), extra) {
        d.extend(x);
    }
    Outcome {
        value: 0.0,
        verdict: Some(false),
        status: if matches!(e, ExecError::Timeout(_)) {
            RowStatus::Timeout
        } else {
            RowStatus::ExecError
        },
        details,
    }
}

/// Score FLEX for one case.
pub async fn score_flex(
    judge: &dyn StructuredJudge,
    case: &GoldCase<'_>,
    options: &FlexOptions,
    avoidance: bool,
    counter: &CallCounter,
) -> Outcome {
    let pred = match case.pred {
        Ok(p) => p,
        Err(e) => {
            counter.avoided(Metric::Flex, Avoidance::PredictionFailed);
            let extra = if options.error_categories {
                json!({"error_categories": [EXEC_ERROR_CATEGORY]})
            } else {
                json!({})
            };
            return exec_failure(e, extra);
        }
    };
    let ex = case.ex().unwrap_or(false);
    let branch = if ex { "eq" } else { "neq" };
    if avoidance && let Some(why) = case.tree_match() {
        counter.avoided(Metric::Flex, why);
        return Outcome {
            value: 1.0,
            verdict: Some(true),
            status: RowStatus::Ok,
            details: json!({"avoided": why.as_str(), (Metric::Ex.as_str()): ex,
                "branch": branch, "llm_calls": 0}),
        };
    }
    let spec = options.preset.spec();
    let schema = case.schema_text(&[case.pred_sql, case.gold_sql], false);
    let vars = FlexVars {
        schema: schema.clone(),
        question: case.question,
        pred_query: case.pred_sql,
        pred_result: (!ex).then(|| render_result(pred, spec)),
        gt_query: case.gold_sql,
        gt_result: (!ex).then(|| render_result(case.gold, spec)),
        hint: case.evidence.filter(|h| !h.trim().is_empty()),
    };
    let prompt = if ex { FLEX_EQ_PROMPT } else { FLEX_NEQ_PROMPT };
    let call = StructuredCall::new(prompt, &vars, "");
    let result = call_structured::<FlexReply, _, _>(judge, call, &|_| Ok(())).await;
    counter.call(Metric::Flex, result.as_ref().is_ok_and(|o| o.cached));
    match result {
        Ok(out) => {
            let mut details = json!({
                "branch": branch, (Metric::Ex.as_str()): ex, "reasoning": out.value.reasoning,
                "judge": judge.kind(), "prompt_version": out.prompt_version,
                "cached": out.cached, "prompt_tokens": out.usage.prompt_tokens,
                "completion_tokens": out.usage.completion_tokens, "llm_calls": 1,
                "response_mode": out.response_mode, "render_preset": options.preset,
            });
            let (correct, reasoning) = (out.value.correct, &out.value.reasoning);
            let categories = if !options.error_categories || (correct && ex) {
                None
            } else if !correct {
                Some(
                    categorise::<ErrorCategories>(
                        judge, case, &schema, reasoning, counter, &out.usage, out.cached,
                    )
                    .await,
                )
            } else {
                Some(
                    categorise::<FnCategories>(
                        judge, case, &schema, reasoning, counter, &out.usage, out.cached,
                    )
                    .await,
                )
            };
            if let (Some(d), Some(serde_json::Value::Object(x))) =
                (details.as_object_mut(), categories)
            {
                d.extend(x);
            }
            Outcome {
                value: if out.value.correct { 1.0 } else { 0.0 },
                verdict: Some(out.value.correct),
                status: RowStatus::Ok,
                details,
            }
        }
        Err(e) => Outcome {
            value: 0.0,
            verdict: None,
            status: RowStatus::JudgeError,
            details: json!({"branch": branch, (Metric::Ex.as_str()): ex, "judge_error": judge_error_json(&e),
                "llm_calls": 1}),
        },
    }
}

/// The second call (an incorrect verdict: [`ErrorCategories`]; EX = 0 judged correct:
/// [`FnCategories`]): the details to merge into the row (categories, or the categorisation
/// error; the verdict is never changed). Token counts and `cached` cover both calls.
async fn categorise<T: Taxonomy>(
    judge: &dyn StructuredJudge,
    case: &GoldCase<'_>,
    schema: &str,
    judgment: &str,
    counter: &CallCounter,
    first_usage: &crate::judge::TokenUsage,
    first_cached: bool,
) -> serde_json::Value {
    let vars = FlexCategoryVars {
        schema,
        question: case.question,
        pred_query: case.pred_sql,
        gt_query: case.gold_sql,
        judgment,
        hint: case.evidence.filter(|h| !h.trim().is_empty()),
    };
    let call = StructuredCall::new(T::PROMPT, &vars, "");
    let result = call_structured::<T, _, _>(judge, call, &|_| Ok(())).await;
    counter.call(Metric::Flex, result.as_ref().is_ok_and(|o| o.cached));
    match result {
        Ok(out) => {
            let issued: Vec<(&str, &CategoryFlag)> = out
                .value
                .pairs()
                .into_iter()
                .filter(|(_, f)| f.issued)
                .collect();
            let keys: Vec<&str> = issued.iter().map(|(k, _)| *k).collect();
            let explanations: serde_json::Map<String, serde_json::Value> = issued
                .iter()
                .map(|(k, f)| (k.to_string(), json!(f.explanation)))
                .collect();
            let mut merged = json!({
                "categories_prompt_version": out.prompt_version,
                "cached": first_cached && out.cached,
                "prompt_tokens": first_usage.prompt_tokens + out.usage.prompt_tokens,
                "completion_tokens": first_usage.completion_tokens + out.usage.completion_tokens,
                "llm_calls": 2,
            });
            if let Some(m) = merged.as_object_mut() {
                m.insert(T::KEY.to_string(), json!(keys));
                m.insert(T::EXPLANATIONS_KEY.to_string(), Value::Object(explanations));
            }
            merged
        }
        Err(e) => {
            let mut failed = serde_json::Map::new();
            failed.insert(format!("{}_error", T::KEY), judge_error_json(&e));
            failed.insert("llm_calls".to_string(), json!(2));
            Value::Object(failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(n: usize) -> ResultSet {
        ResultSet {
            columns: vec!["id".into(), "name".into()],
            rows: (0..n)
                .map(|i| vec![SqlValue::Integer(i as i64), SqlValue::Text("x".repeat(60))])
                .collect(),
        }
    }

    #[test]
    fn paper_preset_truncates_rows_and_text() {
        let text = render_result(&rs(101), RenderPreset::Paper.spec());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "| id | name |");
        assert_eq!(lines.len(), 2 + 50 + 1 + 50 + 1);
        assert_eq!(lines[52], "...");
        assert_eq!(lines[2], format!("| 0 | {}... 60 chars |", "x".repeat(50)));
        assert_eq!(*lines.last().unwrap(), "shape=(101, 2)");
        // Exactly 100 rows are shown in full.
        assert_eq!(
            render_result(&rs(100), RenderPreset::Paper.spec())
                .lines()
                .count(),
            103
        );
    }

    #[test]
    fn repo_preset_has_no_header() {
        let text = render_result(&rs(21), RenderPreset::RepoV1.spec());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 10 + 1 + 10 + 1);
        assert_eq!(lines[0], format!("| 0 | {}... 60 chars |", "x".repeat(30)));
        assert_eq!(
            lines[11],
            "| 11 | xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... 60 chars |"
        );
        let empty = ResultSet {
            columns: vec!["a".into()],
            rows: vec![],
        };
        assert_eq!(
            render_result(&empty, RenderPreset::RepoV1.spec()),
            "Empty execution result\nshape=(0, 1)"
        );
        let nulls = ResultSet {
            columns: vec!["a".into()],
            rows: vec![vec![SqlValue::Null], vec![SqlValue::Real(0.5)]],
        };
        assert_eq!(
            render_result(&nulls, RenderPreset::Paper.spec()),
            "| a |\n| --- |\n| NULL |\n| 0.5 |\nshape=(2, 1)"
        );
    }
}
