//! The original Spider ESM of one pair: the official evaluator's parse, rebuild and match
//! (`spider`), with the outcome the gold scorer stores.

use serde::Serialize;

use super::spider::{self, SpiderEvalOptions, SpiderSchema};

/// Result of ESM on one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EsmOutcome {
    /// Exact match.
    pub verdict: bool,
    /// Whether the prediction parsed (an unparseable prediction is an empty query).
    pub pred_parsed: bool,
    /// Why the prediction did not parse.
    pub pred_parse_error: Option<String>,
    /// Spider hardness of the gold query.
    pub hardness: &'static str,
    /// Components that did not score 1.
    pub failed_components: Vec<&'static str>,
    /// Whether the FROM table multisets agree.
    pub tables_match: bool,
}

/// Original Spider ESM of `pred` against `gold` (official evaluator defaults: values and
/// DISTINCT ignored, FK columns canonicalised). `Err` when the gold query cannot be parsed.
pub fn esm(
    schema: &SpiderSchema,
    gold: &str,
    pred: &str,
    opts: SpiderEvalOptions,
) -> Result<EsmOutcome, spider::ParseError> {
    let mut g = spider::get_sql(schema, gold)?;
    let hardness = spider::hardness(&g);
    let (mut p, pred_parse_error) = match spider::get_sql(schema, pred) {
        Ok(p) => (p, None),
        Err(e) => (spider::Sql::default(), Some(e.0)),
    };
    if pred_parse_error.is_some() {
        p.select_distinct = Some(false);
    }
    spider::rebuild(&mut g, schema, opts);
    spider::rebuild(&mut p, schema, opts);
    let parts = spider::partial_match(&p, &g);
    let failed_components: Vec<&'static str> = parts
        .iter()
        .filter(|(_, c)| !c.ok())
        .map(|(n, _)| *n)
        .collect();
    let verdict = spider::exact_match(&p, &g);
    let tables_match = failed_components.is_empty() && verdict;
    Ok(EsmOutcome {
        verdict,
        pred_parsed: pred_parse_error.is_none(),
        pred_parse_error,
        hardness,
        failed_components,
        tables_match: tables_match || g.from_units.is_empty(),
    })
}
