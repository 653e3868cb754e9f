//! Checks on what the query returned: the agent's own run (the event's `result`, from its
//! trace) or the probe's (`[stef] probe_databases`). Schema-free and conservative like the SQL
//! checks: each looks at the result's shape against what the question asks, and stays silent
//! where the sample cannot tell (a truncated sample never proves "no duplicates").
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `query_fails` | the run failed (the database's error) | error |
//! | `empty_result` | the run returned no rows | warning |
//! | `null_result` | every cell of every returned row is NULL (an aggregate over nothing) | warning |
//! | `row_count_mismatch` | a single answer is asked for ("how many …", "what is the percentage …", a singular superlative) and several different rows came back; or a top *k* is asked for and more than *k* rows came back | warning |
//! | `ratio_not_percentage` | a percentage is asked for and the one row's only numeric value lies strictly between −1 and 1 (a ratio not scaled by 100) | info (2 of 3 right on people's labels) |
//! | `duplicate_rows` | distinct things are asked for ("different", "distinct", "unique"), or a list of things ("which …", "list …", "what are …", no quantity) returned as identifiers, and the (complete) sample's rows repeat | info (0 of 2 right on people's labels) |
//! | `percentage_out_of_range` | a percentage is asked for (not a change or difference) and the one row's only number is above 100 or below 0 | warning |
//! | `zero_count` | a count is asked for ("how many …", one answer) and the one row's only number is 0 | warning |
//!
//! Which of them are kept, and at which severity, follows their precision on people's labels
//! where the query could be run (NL2SQL-Bugs on toxicology, `examples/verdict_model.rs`): a
//! warning is right at least 80 % of the time; a less precise check is `info`, and weighs only
//! through the correctness model.

use serde_json::Value;

use crate::event::QueryResult;

use super::checks::{asks_distinct, clip, contains_word};
use super::text::QuestionTexts;
use super::{ErrorCategory, Finding, FindingCode, QuestionSpec, Severity};

/// Where a result came from (said in the evidence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultSource {
    /// The event's `result`: the agent's own run.
    Event,
    /// The probe database (`[stef] probe_databases`).
    Probe,
}

impl ResultSource {
    /// What a finding on this result is confirmed by.
    fn confirmed_by(self) -> super::ConfirmedBy {
        match self {
            ResultSource::Event => super::ConfirmedBy::Result,
            ResultSource::Probe => super::ConfirmedBy::Probe,
        }
    }

    fn run(self) -> &'static str {
        match self {
            ResultSource::Event => "the agent's run",
            ResultSource::Probe => "the probe run",
        }
    }
}

/// Everything the result checks read.
pub struct ResultCheckInput<'a> {
    /// The question texts (lowercased forms included).
    pub texts: &'a QuestionTexts<'a>,
    /// The deterministic question spec (top-k, grouping).
    pub question_spec: &'a QuestionSpec,
    /// The result.
    pub result: &'a QueryResult,
    /// Its origin.
    pub source: ResultSource,
}

/// The result's findings, in table order.
pub fn run(input: &ResultCheckInput<'_>) -> Vec<Finding> {
    let mut out = shape_findings(input);
    for finding in &mut out {
        finding.confirmed_by = Some(input.source.confirmed_by());
    }
    out
}

/// The findings of [`run`], before they are marked with what confirmed them.
fn shape_findings(input: &ResultCheckInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let result = input.result;
    let run = input.source.run();
    if let Some(error) = &result.error {
        out.push(finding(
            FindingCode::QueryFails,
            Severity::Error,
            ErrorCategory::Other,
            format!("{run} failed: {}", clip(error, 200)),
        ));
        return out;
    }
    let total = result.total_rows();
    if total == Some(0) {
        out.push(finding(
            FindingCode::EmptyResult,
            Severity::Warning,
            ErrorCategory::Condition,
            format!("{run} returned no rows"),
        ));
        return out;
    }
    if result.rows.is_empty() {
        // Nothing sampled: the shape checks below need rows.
        return out;
    }
    let question = &input.texts.question_lower;
    if result
        .rows
        .iter()
        .all(|row| !row.is_empty() && row.iter().all(Value::is_null))
    {
        out.push(finding(
            FindingCode::NullResult,
            Severity::Warning,
            ErrorCategory::Function,
            format!(
                "{run} returned only NULLs ({} row(s)): an aggregate over no rows?",
                total.unwrap_or(result.rows.len() as u64)
            ),
        ));
        return out;
    }
    row_count_check(input, total, run, &mut out);
    if mentions_percentage(question)
        && total == Some(1)
        && let [row] = result.rows.as_slice()
    {
        let numbers: Vec<f64> = row.iter().filter_map(number).collect();
        if let [value] = numbers.as_slice()
            && *value != 0.0
            && value.abs() < 1.0
        {
            out.push(finding(
                FindingCode::RatioNotPercentage,
                Severity::Info,
                ErrorCategory::Function,
                format!(
                    "a percentage is asked for; {run} returned {value}, a ratio (not scaled by 100)?"
                ),
            ));
        }
    }
    if mentions_percentage(question)
        && ![
            "change",
            "increase",
            "decrease",
            "difference",
            "growth",
            "more",
            "higher",
            "lower",
            "less",
        ]
        .iter()
        .any(|w| contains_word(question, w))
        && total == Some(1)
        && let [row] = result.rows.as_slice()
        && let [value] = row.iter().filter_map(number).collect::<Vec<_>>().as_slice()
        && !(0.0..=100.0).contains(value)
    {
        out.push(finding(
            FindingCode::PercentageOutOfRange,
            Severity::Warning,
            ErrorCategory::Function,
            format!("a percentage is asked for; {run} returned {value}, outside 0–100"),
        ));
    }
    if question.starts_with("how many")
        && total == Some(1)
        && asks_single_answer(question, input.question_spec)
        && let [row] = result.rows.as_slice()
    {
        let numbers: Vec<f64> = row.iter().filter_map(number).collect();
        if numbers == [0.0] {
            out.push(finding(
                FindingCode::ZeroCount,
                Severity::Warning,
                ErrorCategory::Condition,
                format!("a count is asked for; {run} returned 0 (a filter that matches nothing?)"),
            ));
        }
    }
    let distinct = asks_distinct(question);
    // A list of things whose rows are identifiers: the same thing listed twice. (A list of
    // attributes — the elements of a molecule's atoms — repeats values by nature.)
    let listed_ids = !result.columns.is_empty()
        && result.columns.iter().all(|c| {
            let c = c.to_ascii_lowercase();
            c == "id"
                || c.ends_with("_id")
                || c.ends_with(".id")
                || c.ends_with("id") && c.len() > 4
        })
        && super::checks::intent::asks_list(question);
    if (distinct || listed_ids) && !result.truncated {
        let mut seen = std::collections::HashSet::new();
        let repeated = result.rows.iter().filter(|row| !seen.insert(*row)).count();
        if repeated > 0 {
            out.push(finding(
                FindingCode::DuplicateRows,
                Severity::Info,
                ErrorCategory::Clause,
                format!(
                    "{} asked for; {run} repeats {repeated} of its {} rows",
                    if distinct {
                        "distinct values are"
                    } else {
                        "a list of things is"
                    },
                    result.rows.len()
                ),
            ));
        }
    }
    out
}

/// A single answer asked for and several different rows returned; or more rows than a top k.
fn row_count_check(
    input: &ResultCheckInput<'_>,
    total: Option<u64>,
    run: &str,
    out: &mut Vec<Finding>,
) {
    let Some(total) = total else {
        return;
    };
    let spec = input.question_spec;
    if let Some(k) = spec.top_k
        && k >= 2
        && total > k
    {
        out.push(finding(
            FindingCode::RowCountMismatch,
            Severity::Warning,
            ErrorCategory::Clause,
            format!("the top {k} are asked for; {run} returned {total} rows"),
        ));
        return;
    }
    if total < 2 || !asks_single_answer(&input.texts.question_lower, spec) {
        return;
    }
    // Repeated rows are not several answers: at least two different rows must be sampled.
    let rows = &input.result.rows;
    if !rows.iter().any(|row| Some(row) != rows.first()) {
        return;
    }
    out.push(finding(
        FindingCode::RowCountMismatch,
        Severity::Warning,
        ErrorCategory::Clause,
        format!("a single answer is asked for; {run} returned {total} rows"),
    ));
}

/// Whether the question asks for one value: a count or amount ("how many …", "how much …"),
/// one computed figure ("what is the percentage / ratio / average / total …"), or one thing
/// ranked first (top 1); never when it asks per group ("each", "per", "for every", "by",
/// "respectively", "list").
fn asks_single_answer(question: &str, spec: &QuestionSpec) -> bool {
    const PER_GROUP: [&str; 8] = [
        "each",
        "every",
        "per",
        "respectively",
        "list",
        "all",
        "both",
        "and their",
    ];
    if !spec.group_by.is_empty() || PER_GROUP.iter().any(|w| contains_word(question, w)) {
        return false;
    }
    // "… and how many …" asks for something else as well.
    if question.contains(" and how many") || question.contains(", how many") {
        return false;
    }
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| question.starts_with(p));
    starts(&["how many", "how much"])
        || starts(&[
            "what is the percentage",
            "what percentage",
            "what is the ratio",
            "what is the average",
            "what is the total",
            "calculate the percentage",
            "calculate the ratio",
            "calculate the average",
            "calculate the total",
        ])
        || spec.top_k == Some(1)
}

/// Whether a lowercased text mentions a percentage, in words only: unlike the SQL checks'
/// cue, a `%` sign is not one here (the result checks were measured this way).
fn mentions_percentage(lower: &str) -> bool {
    contains_word(lower, "percentage")
        || contains_word(lower, "percent")
        || contains_word(lower, "percentages")
}

/// A cell's number: a JSON number, or a string that parses as one.
fn number(cell: &Value) -> Option<f64> {
    match cell {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|v| v.is_finite()),
        _ => None,
    }
}

fn finding(
    code: FindingCode,
    severity: Severity,
    category: ErrorCategory,
    evidence: String,
) -> Finding {
    Finding {
        code,
        severity,
        category,
        evidence,
        confirmed_by: None,
        elements: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: serde_json::Value) -> QueryResult {
        serde_json::from_value(value).unwrap()
    }

    fn codes(question: &str, top_k: Option<u64>, r: &QueryResult) -> Vec<&'static str> {
        let texts = QuestionTexts::new(question, None);
        let spec = QuestionSpec {
            top_k,
            ..QuestionSpec::default()
        };
        run(&ResultCheckInput {
            texts: &texts,
            question_spec: &spec,
            result: r,
            source: ResultSource::Event,
        })
        .iter()
        .map(|f| f.code.as_str())
        .collect()
    }

    #[test]
    fn a_failed_or_empty_run_says_so_and_nothing_else() {
        let failed = result(json!({"error": "no such column: nme"}));
        assert_eq!(codes("How many?", None, &failed), ["query_fails"]);
        let empty = result(json!({"row_count": 0, "columns": ["n"]}));
        assert_eq!(codes("List the names", None, &empty), ["empty_result"]);
        let empty_sample = result(json!({"columns": ["n"], "rows": []}));
        assert_eq!(
            codes("List the names", None, &empty_sample),
            ["empty_result"]
        );
        // A sample that says nothing of the total is not "empty".
        let unknown = result(json!({"columns": ["n"], "rows": [], "truncated": true}));
        assert!(codes("List the names", None, &unknown).is_empty());
    }

    #[test]
    fn nulls_only_is_an_aggregate_over_nothing() {
        let r = result(json!({"rows": [[null]]}));
        assert_eq!(codes("What is the average age?", None, &r), ["null_result"]);
        let some = result(json!({"rows": [[null, 3]]}));
        assert!(codes("What is the average age?", None, &some).is_empty());
    }

    #[test]
    fn single_answers_and_top_k_against_the_row_count() {
        let many = result(json!({"row_count": 40, "rows": [["a"], ["b"]], "truncated": true}));
        assert_eq!(
            codes("How many schools are there?", None, &many),
            ["row_count_mismatch"]
        );
        assert_eq!(
            codes("Name the school with the most students.", Some(1), &many),
            ["row_count_mismatch"]
        );
        // Per-group questions, lists and ties of one value are fine.
        assert!(codes("How many schools are there in each county?", None, &many).is_empty());
        assert!(codes("List the schools", None, &many).is_empty());
        let tie = result(json!({"rows": [["a"], ["a"]]}));
        assert!(codes("How many schools are there?", None, &tie).is_empty());
        // Top k: more rows than k.
        let six = result(json!({"row_count": 6, "rows": [[1], [2], [3], [4], [5], [6]]}));
        assert_eq!(
            codes("Top 5 schools by score", Some(5), &six),
            ["row_count_mismatch"]
        );
        assert!(codes("Top 5 schools by score", Some(6), &six).is_empty());
    }

    #[test]
    fn a_percentage_that_is_a_ratio() {
        let r = result(json!({"rows": [[0.37]]}));
        assert_eq!(
            codes("What is the percentage of girls?", None, &r),
            ["ratio_not_percentage"]
        );
        let scaled = result(json!({"rows": [[37.5]]}));
        assert!(codes("What is the percentage of girls?", None, &scaled).is_empty());
        let text = result(json!({"rows": [["0.5"]]}));
        assert_eq!(
            codes("What percent are girls?", None, &text),
            ["ratio_not_percentage"]
        );
        assert!(codes("What is the ratio of girls?", None, &r).is_empty());
        let zero = result(json!({"rows": [[0]]}));
        assert!(codes("What is the percentage of girls?", None, &zero).is_empty());
        // A count of 0.
        assert_eq!(
            codes("How many girls are there?", None, &zero),
            ["zero_count"]
        );
        // Above 100: a ratio over the wrong denominator; a change may be.
        let over = result(json!({"rows": [[476.9]]}));
        assert_eq!(
            codes("What is the percentage of girls?", None, &over),
            ["percentage_out_of_range"]
        );
        assert!(codes("What is the percentage increase of girls?", None, &over).is_empty());
        assert!(codes("What is the percentage of girls?", None, &scaled).is_empty());
        let three = result(json!({"rows": [[3]]}));
        assert!(codes("How many girls are there?", None, &three).is_empty());
        assert!(codes("How many girls are there in each class?", None, &zero).is_empty());
    }

    #[test]
    fn rows_wider_or_narrower_than_the_columns_are_read_as_they_are() {
        // Producers send what they have: ragged rows, no column names, mixed cell types.
        let ragged =
            result(json!({"columns": ["a"], "rows": [[1, 2, 3], [], ["x", null, {"k": 1}]]}));
        assert_eq!(
            codes("How many rows?", None, &ragged),
            ["row_count_mismatch"]
        );
        let empty_row = result(json!({"rows": [[]]}));
        assert!(codes("What is the percentage of girls?", None, &empty_row).is_empty());
    }

    #[test]
    fn repeated_rows_where_distinct_things_are_asked() {
        let r = result(json!({"rows": [["x"], ["y"], ["x"]]}));
        assert_eq!(
            codes("List the different cities", None, &r),
            ["duplicate_rows"]
        );
        // A list of things asked for whose rows are identifiers: the same thing twice.
        let ids = result(json!({"columns": ["molecule_id"], "rows": [["x"], ["y"], ["x"]]}));
        assert_eq!(codes("List the molecules", None, &ids), ["duplicate_rows"]);
        assert_eq!(
            codes("Which molecules have chlorine?", None, &ids),
            ["duplicate_rows"]
        );
        // A list of attributes repeats values by nature.
        let elements = result(json!({"columns": ["element"], "rows": [["c"], ["h"], ["c"]]}));
        assert!(codes("List the elements of TR004", None, &elements).is_empty());
        assert!(codes("List the cities", None, &r).is_empty());
        // Neither distinct things nor a list: a column of values may repeat.
        assert!(codes("Cities different from Paris?", None, &r).is_empty());
        assert!(codes("List the number of schools per city", None, &ids).is_empty());
        let cut = result(json!({"rows": [["x"], ["x"]], "truncated": true}));
        assert_eq!(
            codes("List the distinct cities", None, &cut),
            Vec::<&str>::new()
        );
    }
}
