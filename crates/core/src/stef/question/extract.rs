//! The question spec of one event ([`extract`]) and the constraints a text states on its own
//! ([`text_constraints`]), put together from the other parts.

use crate::sqlspec::{AggFunc, SqlSpec};
use crate::stef::text::{MAX_TEXT_BYTES, QuestionTexts, clip, contains_phrase, name_key, tokenize};
use crate::stef::{QuestionSpec, RuleProfile};

use super::clauses::required_text;
use super::doc::Doc;
use super::filters::{
    apply_mappings, asks_whether, dedup_filters, drop_schema_terms, phrase_in, sql_literal_filters,
    text_filters,
};
use super::lexicon::{DISTINCT_WORDS, is_in};
use super::structure::{outputs, redefine_structure, structure};

/// Extract the question spec of one event.
///
/// `sql` enables the SQL-literal rule (module doc); `profile` supplies column mappings.
pub fn extract(
    question: &str,
    enriched: Option<&str>,
    sql: Option<&SqlSpec>,
    profile: &RuleProfile,
) -> QuestionSpec {
    extract_texts(&QuestionTexts::new(question, enriched), sql, profile)
}

/// [`extract`] from texts already clipped and lowercased (the scoring path builds them once
/// per event).
pub fn extract_texts(
    texts: &QuestionTexts<'_>,
    sql: Option<&SqlSpec>,
    profile: &RuleProfile,
) -> QuestionSpec {
    let enriched = texts.enriched;
    let qu = Doc::question(texts);
    let (question_spec, question_used) = question_structure(texts);
    let mut spec = question_spec.clone();
    let mut qu_used = question_used.clone();
    spec.outputs = outputs(&qu);

    let mut defined: Vec<(String, String)> = Vec::new();
    let req_text: String;
    let req_tokens;
    let req_lower;
    let req_doc;
    let mut req_used;
    let (filter_doc, filter_used) = match enriched {
        Some(e) => {
            req_text = required_text(texts, e, &mut defined);
            req_tokens = tokenize(&req_text);
            req_lower = req_text.to_ascii_lowercase();
            req_doc = Doc {
                text: &req_text,
                lower: &req_lower,
                toks: &req_tokens,
            };
            req_used = vec![false; req_tokens.len()];
            // Top-k numbers in Qe are not filters either; a DISTINCT instruction counts.
            let mut scratch = QuestionSpec::default();
            structure(&req_doc, &mut scratch, &mut req_used);
            if (0..req_tokens.len()).any(|i| is_in(DISTINCT_WORDS, req_doc.w(i))) {
                for a in &mut spec.aggregations {
                    if a.func == AggFunc::Count {
                        a.distinct = true;
                    }
                }
            }
            (&req_doc, &mut req_used)
        }
        None => (&qu, &mut qu_used),
    };
    spec.filters = text_filters(filter_doc, filter_used);
    // A term a kept definition explains ("hydrogen refers to element = 'h'") is not itself a
    // value filter: the definition's constraint stands for it.
    if !defined.is_empty() {
        spec.filters.retain(|f| {
            f.lhs.is_some() || !defined.iter().any(|(d, _)| contains_phrase(d, &f.value))
        });
        redefine_structure(&mut spec, &defined);
    }

    if let Some(sql) = sql {
        sql_literal_filters(
            &texts.question_lower,
            enriched.map(|_| filter_doc.text),
            &qu,
            enriched.map(|_| filter_doc),
            sql,
            &mut spec.filters,
        );
    }
    if let Some(sql) = sql {
        drop_schema_terms(sql, &mut spec.filters);
    }
    if let Some(sql) = sql
        && asks_whether(&qu)
    {
        // "Is molecule TR151 carcinogenic?": the predicate is what the user wants to see. A
        // filter on a column the SQL returns, with a value Qu does not state, is answered by
        // returning that column rather than by filtering on it.
        let qu_l = &texts.question_lower;
        spec.filters.retain(|f| {
            let projected = f.lhs.as_deref().is_some_and(|l| {
                let key = name_key(l);
                sql.projections
                    .iter()
                    .any(|p| p.columns.iter().any(|c| name_key(c) == key))
            });
            !projected || phrase_in(&qu, qu_l, &f.value)
        });
    }
    apply_mappings(profile, &mut spec);
    dedup_filters(&mut spec.filters);
    spec
}

/// The constraints one text states on its own (no SQL, no mappings): used by enrichment
/// validation to compare Qu with Qe.
pub fn text_constraints(text: &str) -> QuestionSpec {
    let text = clip(text, MAX_TEXT_BYTES);
    let toks = tokenize(text);
    let lower = text.to_ascii_lowercase();
    constraints_of(&Doc {
        text,
        lower: &lower,
        toks: &toks,
    })
}

/// [`text_constraints`] of the event's question, from the tokens and the structure made once
/// per event.
pub fn question_constraints(texts: &QuestionTexts<'_>) -> QuestionSpec {
    let (spec, used) = question_structure(texts);
    let mut spec = spec.clone();
    let mut used = used.clone();
    spec.filters = text_filters(&Doc::question(texts), &mut used);
    dedup_filters(&mut spec.filters);
    spec
}

/// The question's structure on its own ([`structure`] on an empty spec): the spec and the
/// tokens it used, read once per event.
fn question_structure<'t>(texts: &'t QuestionTexts<'_>) -> &'t (QuestionSpec, Vec<bool>) {
    texts.question_structure.get_or_init(|| {
        let mut spec = QuestionSpec::default();
        let mut used = vec![false; texts.question_tokens.len()];
        structure(&Doc::question(texts), &mut spec, &mut used);
        (spec, used)
    })
}

fn constraints_of(doc: &Doc<'_>) -> QuestionSpec {
    let mut spec = QuestionSpec::default();
    let mut used = vec![false; doc.toks.len()];
    structure(doc, &mut spec, &mut used);
    spec.filters = text_filters(doc, &mut used);
    dedup_filters(&mut spec.filters);
    spec
}
