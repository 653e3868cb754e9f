//! Deterministic checks that explain what is wrong with a query, as [`Finding`]s: the evidence
//! checks, which need no schema, and the catalogue checks, which run when the event's database
//! is in a schema catalogue ([`DbSchema`]). Every check is conservative: it fires on what the
//! SQL *says*, never on what it might mean, and it stays silent where it cannot tell (a derived
//! table whose columns are hidden behind `*`, a definition it cannot read).
//!
//! Evidence checks (definitions of the enriched question whose subject is about Qu — BIRD's
//! evidence, an agent's own hints):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `evidence_value_mismatch` | a definition says `col = 'v'`; the SQL compares `col` for equality only with other values | error |
//! | `literal_case_mismatch` | the SQL compares a column with `= 'V'` where a definition says `'v'` (same letters, other case); information only: definitions are often not spelled as the data is (BIRD's `race = 'human'` for stored `Human`), and people's labels found it right 6 times in 10 | info |
//! | `evidence_column_unused` | a definition maps the term to a column (`name refers to superhero_name`) the SQL never names; with a catalogue also a column of the database a definition writes in a formula or condition (`` `Enrollment (K-12)` ``, `DOC = 52`; grounded checks) | warning |
//! | `integer_division` | `COUNT(…) / COUNT(…)` (or other integer-valued operands) with no REAL cast or decimal literal, in a dialect where integer division truncates | error |
//! | `percentage_not_scaled` | a percentage is asked for, the SQL divides, and no `100` appears | warning |
//! | `formula_shape_mismatch` | a definition computes a division (`DIVIDE(…)`, `/`) or a difference (`SUBTRACT(…)`); the SQL computes none (AVG counts as a division) | warning |
//! | `formula_operand_mismatch` | a definition's `DIVIDE(numerator, denominator)`: a denominator defined as a plain count of a column while the SQL's first division counts another entity's (with a catalogue: no table of the SQL's denominator has the column; without: both are keys), or a numerator defined as `SUM(<condition>)` whose condition (before a `WHERE`) reads a column the SQL's numerator does not | info |
//! | `question_column_unused` | with a catalogue: the question uses a term the rule profile maps to a column the catalogue has; the SQL never names that column | warning |
//! | `distinct_missing` | "distinct / different / unique" is asked for; no DISTINCT, GROUP BY or set operation | warning |
//! | `unordered_limit` | an ordering (a superlative) is asked for; the SQL has LIMIT without ORDER BY (a bare "list five X" is not an ordering) | error |
//! | `rounding_missing` | the question (or its enriched question) asks for decimal places or a rounded value ("as a percentage with five decimal places", "rounded to two decimals"); the SQL has no ROUND, PRINTF, FORMAT, TO_CHAR, TRUNC or DECIMAL/NUMERIC cast | warning |
//! | `literal_not_in_question` | a filter compares a column with a string literal (three characters or more, with a letter) that neither the question nor the enriched question contains, not even as a spacing, plural or stem variant (`'TR_000_2_5'` for "TR000_2_5", `'Girke'` for "Gerke", `colour = 'Blue'` nobody asked for); filters the rule profile declares benign or ignored are exempt | warning |
//! | `number_not_in_question` | a filter compares a column with a number (ordering, or equality other than a 0/1 flag test) that neither the question nor the enriched question states — as digits, a number word, a percentage's fraction, a decade's bounds, or an ordering's integer neighbour (`height_cm > 0` under an average nobody restricted; `eye_colour_id = 7`) | warning |
//!
//! Catalogue checks (names resolved scope by scope, as SQLite resolves them: aliases, then
//! tables in scope, then enclosing scopes; `rowid` is always a column; a double-quoted name
//! that is no column is a string):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `unknown_table` | a FROM table is neither in the catalogue nor a CTE | error |
//! | `unknown_qualifier` | `X.col` where no table or alias `X` is in scope | error |
//! | `column_not_in_table` | `X.col` where `X`'s table has no `col` | error |
//! | `unknown_column` | an unqualified column no table in scope has (and no alias) | error |
//! | `ambiguous_column` | an unqualified column that two tables of the same scope have | error |
//! | `join_off_keys` | `a.x = b.y` where `a.x` is a declared foreign key to another column than `b.y`, or where both are their own tables' single-column keys and no foreign key relates the two tables (`client.client_id = card.card_id`); joins between undeclared columns say nothing: catalogues often omit keys | warning |
//! | `join_skips_link_table` | `a.fk = b.fk`, both referencing the same parent column, while a third table has foreign keys to both `a` and `b` (clients and accounts joined through their district, where `disp` links them) | warning |
//! | `join_type_mismatch` | the two sides of such an equality have incompatible types (text vs number) | warning; info in SQLite and MySQL, which convert |
//! | `aggregate_over_text` | SUM or AVG over a text column | warning; info in SQLite and MySQL |
//! | `literal_type_mismatch` | a number column compared with a non-numeric string; a date column compared with a string that is not an ISO date | warning |
//! | `count_fan_out` | COUNT(t.key) without DISTINCT where t is joined to a table whose foreign key references t (each t row may repeat) and no filter reads that table (a condition on it usually keeps one row per t row, and people accept the count then); information only | info |
//! | `id_instead_of_name` | the question asks for names ("name", or starts with "who") and not for ids; every output is an `…id` column although a table in the query has a name column; or (grounded checks) the SQL returns a code column (`EdOpsCode`) whose table has the name it stands for (`EdOpsName`) and the question asks for no code, id or number | warning |
//!
//! Grounded checks (with a catalogue; [`crate::stef::grounding`] links the question's phrases
//! and the evidence's identifiers to the schema's columns; file [`grounded`]):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `named_column_unused` | the question says a column's name, two words or more, by its natural-language or written name ("mailing street address" for `MailStrAbr`, "border color" for `borderColor`); the SQL reads its table but never names it, and no column it names has the phrase in its own name | warning |
//! | `unused_join_table` | a table joined to exactly one other table whose columns the query uses only in that join, unless it is the parent the other side's foreign key references (a child repeats rows; an unrelated table only restricts them); not when the query returns `*` | warning |
//! | `evidence_column_unused` | (the catalogue form, above) | warning |
//! | `id_instead_of_name` | (the code form, above) | warning |
//! | `attribute_for_entity` | the question asks for the things a table holds (its first word after "which / what / list …" is the table's one-word name) and the SQL returns only other columns of that table (not its key, a name, title, id or code, nor one the question names) | info |
//!
//! Each was kept because it is right on people's labels far more often than wrong (≥ 90 % at
//! error severity, ≥ 75 % at warning); the measured precision and how often each fired are in the
//! findings reference (`docs/reference/findings.md`) (`cargo run --release --example stef_labels`).
//!
//! Probes (with `[stef] probe_databases`: a read-only replica, queried through the daemon's
//! read-only executor with tight limits; [`plan_probes`] → answers → [`probe_findings`]):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `query_fails` | the probe database rejects the query (no such column, a syntax error, …) | error |
//! | `empty_result` | the query returns no rows | warning |
//! | `predicate_matches_nothing` | the query returns no rows, and one of its outer WHERE's AND-ed conditions (on one plain table of the FROM, no subquery, not `col = 'text'`) matches no row of that table on its own (`strftime('%m', d) = '9'`); ≤ 4 asked, after the run (or at once for an event whose `result` is empty) | warning |
//! | `value_not_in_column` | `col = 'v'` where `v` is not a value of the column: error when a case or spacing variant is (named in the evidence), warning when none is | error / warning |
//! | `value_in_other_column` | `col = 'v'` where neither `v` nor a case or spacing variant is a value of the column, but another text column holds it — of the same table, another table the query reads, or a table a foreign key relates (≤ 12 columns searched; `v` of 3+ characters with a letter): the wrong column, or a missing table | error |
//! | `probe_inconclusive` | a probe timed out or the database was unavailable (nothing concluded) | info |
//!
//! A probe answer that shows the SQL's literal in the data withdraws a `literal_case_mismatch`.
//!
//! Shape checks (no schema, no question: the SQL's own form; [`shape`]), both `info`: they weigh
//! through the correctness model (`stef::correctness`), not the deterministic verdict, so Φ
//! stays as it was:
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `text_compared_with_number` | in SQLite, a text-valued expression (a text function's result, a concatenation, a cast to text) compared with a number: SQLite converts neither side, so `=` is never true | info |
//! | `and_or_precedence` | an OR among whose operands is an AND without parentheses (`a AND b OR c`) | info |
//!
//! Intent checks (no schema: the kind of answer asked for against the kind the SQL gives; all
//! `info` until people's labels show them right often enough; file [`intent`]):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `aggregate_for_list` | a list of things is asked ("which …", "list …", "what are …") and no quantity; every output of the SQL is an aggregate | info |
//! | `order_by_not_count` | the most or least numerous / common / frequent is asked (or the evidence writes `MAX(COUNT(…))`); the SQL orders by something and counts nothing | info |
//! | `limit_over_aggregate` | every output is an aggregate, no GROUP BY, and yet ORDER BY with LIMIT | info |
//!
//! One file per family: [`evidence`], [`shape`], [`intent`], [`catalogue`], [`grounded`], [`probe`], and
//! [`entry`] (which runs them);
//! this file holds their input and what they share.

mod catalogue;
mod entry;
mod evidence;
mod grounded;
pub(crate) mod intent;
mod probe;
mod shape;
#[cfg(test)]
mod tests;

pub(crate) use catalogue::{Resolved, Resolver};
pub use entry::{CheckRun, run, run_grounded};
pub use probe::*;

use crate::catalogue::DbSchema;
use crate::sqlspec::{QueryReferences, RefSourceKind, SqlSpec};

use super::text::QuestionTexts;
use super::{ErrorCategory, Finding, FindingCode, QuestionSpec, RuleProfile, Severity};

/// Everything the checks read about one event.
pub struct CheckInput<'a> {
    /// The user's question and the enriched question (evidence), clipped, with their
    /// lowercased forms.
    pub texts: &'a QuestionTexts<'a>,
    /// The SQL as written.
    pub sql: &'a str,
    /// Its spec (with [`SqlSpec::references`] when the caller collected them).
    pub spec: &'a SqlSpec,
    /// The deterministic question spec.
    pub question_spec: &'a QuestionSpec,
    /// The dialect the event says the SQL is for (decides integer division).
    pub dialect: Option<&'a str>,
    /// The database schema, when the event's database is in a catalogue.
    pub schema: Option<&'a DbSchema>,
    /// The app's rule profile (column mappings; benign and ignored filters).
    pub profile: &'a RuleProfile,
}

fn push(
    out: &mut Vec<Finding>,
    code: FindingCode,
    severity: Severity,
    category: ErrorCategory,
    evidence: String,
) {
    if out.iter().any(|f| f.code == code && f.evidence == evidence) {
        return;
    }
    out.push(Finding {
        code,
        severity,
        category,
        evidence,
        confirmed_by: None,
        elements: Default::default(),
    });
}

/// Whether `text` without its spaces contains `piece` without its spaces (read in place: no
/// spaceless copies).
pub(super) fn contains_without_spaces(text: &str, piece: &str) -> bool {
    let text = text.as_bytes();
    let mut needle = piece.bytes().filter(|&b| b != b' ');
    let Some(first) = needle.next() else {
        return true;
    };
    memchr::memchr_iter(first, text).any(|start| {
        let mut rest = text
            .get(start + 1..)
            .unwrap_or_default()
            .iter()
            .filter(|&&b| b != b' ');
        needle.clone().all(|n| rest.next() == Some(&n))
    })
}

/// Whether a lowercased text asks for distinct values ("distinct / different / unique"), not
/// counting what the words do not mean there ("unique id", "different from").
pub(crate) fn asks_distinct(lower: &str) -> bool {
    const WORDS: [&str; 3] = ["distinct", "different", "unique"];
    /// Each word followed by what makes it mean something else.
    const NOT_DISTINCT: [[&str; 4]; 3] = [
        [
            "distinct id",
            "distinct identifier",
            "distinct from",
            "distinct than",
        ],
        [
            "different id",
            "different identifier",
            "different from",
            "different than",
        ],
        [
            "unique id",
            "unique identifier",
            "unique from",
            "unique than",
        ],
    ];
    // Most texts have none of the words: one `memchr` pass over their first letters finds
    // which occur at all, instead of one substring search per word.
    let bytes = lower.as_bytes();
    let mut occurs = [false; WORDS.len()];
    for at in memchr::memchr2_iter(b'd', b'u', bytes) {
        let rest = bytes.get(at..).unwrap_or_default();
        for (word, occurs) in WORDS.iter().zip(&mut occurs) {
            *occurs |= rest.starts_with(word.as_bytes());
        }
    }
    WORDS
        .iter()
        .zip(occurs)
        .zip(NOT_DISTINCT)
        .any(|((w, occurs), not_distinct)| {
            occurs
                && contains_word(lower, w)
                && !not_distinct
                    .iter()
                    .any(|phrase| contains_word(lower, phrase))
        })
}

/// SQL dialects in which `INTEGER / INTEGER` is integer division.
pub(super) fn truncating_dialect(dialect: &str) -> bool {
    matches!(
        crate::sqlspec::canonical_dialect(dialect),
        "sqlite" | "postgres" | "mssql" | "redshift" | "ansi"
    )
}

/// SQL dialects that convert between text and numbers in comparisons and aggregates.
pub(super) fn lenient_types(dialect: &str) -> bool {
    matches!(
        crate::sqlspec::canonical_dialect(dialect),
        "sqlite" | "mysql"
    )
}

/// Whether `word` occurs in `text` delimited by non-identifier characters.
pub(crate) fn contains_word(text: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let bytes = text.as_bytes();
    let mut from = 0;
    // `find_bytes`: no searcher to build for these short texts (see there).
    while let Some(pos) = bytes
        .get(from..)
        .and_then(|t| crate::stef::text::find_bytes(t, word.as_bytes()))
    {
        let at = from + pos;
        let end = at + word.len();
        let before = at == 0 || !is_ident(bytes[at - 1]);
        let after = end >= bytes.len() || !is_ident(bytes[end]);
        if before && after {
            return true;
        }
        from = at + 1;
        while from < text.len() && !text.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

/// The catalogue tables a query reads (every scope's FROM sources that name one), each once,
/// in order of appearance.
pub(super) fn tables_read(schema: &DbSchema, refs: &QueryReferences) -> Vec<usize> {
    let mut out = Vec::new();
    for source in refs.scopes.iter().flat_map(|s| &s.sources) {
        if let RefSourceKind::Table(name) = &source.kind
            && let Some(t) = schema.table_index(name)
            && !out.contains(&t)
        {
            out.push(t);
        }
    }
    out
}

/// Whether column `c` is its table's whole (single-column) primary key.
pub(super) fn is_single_key(schema: &DbSchema, c: usize) -> bool {
    schema
        .primary_keys
        .iter()
        .any(|pk| pk.len() == 1 && pk.first() == Some(&c))
}

pub(crate) use super::text::clip_marked as clip;
