//! Deterministic question-side spec extraction (Sq, stef.md §2.2) from lexicons and token
//! patterns — no model, no schema.
//!
//! What is read from where:
//! - **Structure** (aggregations, grouping, ordering, top-k, outputs) comes from the user's
//!   question Qu: it is the intent being graded.
//! - **Required filters** come from the enriched question Qe when present (it is the agent's
//!   explicit reading, and carries hints such as BIRD's `label = '-'`), else from Qu. Qe is read
//!   clause by clause (`;`, newlines, sentence ends, and commas between chained definitions):
//!   - a *definition* (`<subject> refers to | means | stands for | indicates | … <definition>`,
//!     either order, or `<multi-word subject> = <formula>`) contributes its definition side only
//!     when its subject is made of Qu's words (≥ ⅔ of the content words; `carcinogenic` does not
//!     match `non-carcinogenic`). Glossary entries about terms Qu does not use are ignored. A
//!     value-only filter for a term a kept definition explains is dropped (the definition's
//!     constraint stands for it), and aggregations/superlatives/top-k that Qu states with that
//!     term are replaced by the definition's functions (a formula with several functions or a
//!     division is one computation, `Other("computed")`);
//!   - a *declaration* `<value> is a|an|the <description>` ("'Vice President' is a position of
//!     Student Club") contributes only the value, and only when Qu mentions it;
//!   - any other clause contributes everything it states.
//! - **SQL literals found in the question text**: a literal of one of the SQL's filters that
//!   appears (as a phrase, or a number token) in Qu or in the required part of Qe is a required
//!   filter with that SQL filter's left-hand side. This gives dimensions to values the question
//!   states in prose.
//! - **Yes/no and "whether" questions** ("Is molecule TR151 carcinogenic?"): a filter on a
//!   column the SQL returns, with a value Qu does not state, is answered by returning the column
//!   and is not required.
//!
//! Lexicon:
//! - total/sum → SUM (`total number of` → COUNT; `total <plural noun>` → SUM or COUNT,
//!   `Other("total")`), average/mean/avg → AVG, how many/number of/count → COUNT (not `phone
//!   number of`), distinct/unique (and `how many different`; also a DISTINCT instruction in Qe)
//!   → DISTINCT on the COUNT; highest/maximum/most/largest/… → MAX, lowest/minimum/least/fewest/…
//!   → MIN (both also set `explicit_order` and `top_k = 1` unless a number is given);
//!   percentage/ratio/proportion/difference/`how many times` → a computed aggregation
//!   (`Other("computed")`).
//! - Ordering: top N, first/last N, N highest…, `list (at least) N`, ranked/sorted/ordered,
//!   ascending/descending, alphabetical, youngest/oldest/earliest/latest/newest/best/worst, and
//!   `the <word>est` (direction unknown: ordering only).
//! - Grouping: `per X`, `for/in/of each|every X`, `grouped/broken down/split by X`, and `by X`
//!   unless `by` follows a participle (`published by`, `sorted by`) or X is a proper noun.
//! - Filters: explicit `lhs op value` (depth 0 only — comparisons inside function calls such as
//!   `AVG(element = 'o')` are conditional aggregations, not filters; `a = other_column` is a join),
//!   `[lhs] between a and b`, `from a to b`, comparatives before numbers (more than/over/at
//!   least/under/…, and `>`-style symbols), years, dates, quoted values, and capitalised entities
//!   (runs of capitalised words that are not sentence-initial stop words, identifiers, table
//!   qualifiers, SQL keywords, months or weekdays). A bare number that is not compared and not a
//!   year ("atom 2", "3 powers") is not required on its own: the SQL-literal rule picks it up when
//!   the SQL uses it.
//!
//! Values are normalized like sqlspec literals ([`normalize_value`]; quoted text stays text:
//! `'09'` is not `9`); column mappings of the profile are applied to every dimension (NL term →
//! physical column).

mod clauses;
mod doc;
mod extract;
mod filters;
mod lexicon;
mod structure;

#[cfg(test)]
mod tests;

pub(crate) use clauses::{
    clauses_with_definitions, evidence_clauses, relevant_definitions, relevant_definitions_lowered,
};
pub use extract::{extract, extract_texts, question_constraints, text_constraints};
pub(crate) use lexicon::number_word;
pub use structure::{COMPUTED, TOTAL};
