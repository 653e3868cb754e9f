//! The findings registry: one entry per [`FindingCode`] — its stored name, severity, error
//! category, what it needs, when it fires, what confirms it and how often it is right on
//! people's labels (measured data, kept beside the entry) — from which the stored name comes
//! ([`FindingCode::as_str`]) and the findings reference's table is generated
//! ([`findings_table`]; a unit test fails when `docs/reference/findings.md` holds another
//! table, and rewrites it with `SQLGRADE_WRITE_DOCS=1`).
//!
//! A check may weigh a finding by context (a dialect, a probe's answer): `severity` and
//! `category` say what the reference says, e.g. `warning (info in SQLite, MySQL)`.

use serde::{Deserialize, Serialize};

/// The finding codes (stable names, stored in `details.findings[].code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingCode {
    /// A definition maps the question's term to `col = 'v'`; the SQL compares `col` with
    /// another value.
    EvidenceValueMismatch,
    /// A literal equals the defined (or quoted) value except for letter case (SQLite's `=` and
    /// most engines' default collations are case-sensitive).
    LiteralCaseMismatch,
    /// A definition maps the question's term to a column the SQL never names.
    EvidenceColumnUnused,
    /// A definition computes a division or a difference the SQL does not compute.
    FormulaShapeMismatch,
    /// A definition's `DIVIDE(numerator, denominator)` whose denominator counts other columns
    /// than the SQL's division, or whose summed condition reads a column the SQL's numerator
    /// does not.
    FormulaOperandMismatch,
    /// The question uses a term the rule profile maps to a catalogue column the SQL never
    /// names.
    QuestionColumnUnused,
    /// `INTEGER / INTEGER` in a dialect that truncates (SQLite, PostgreSQL, SQL Server, …) for
    /// a ratio of counts.
    IntegerDivision,
    /// A percentage is asked for, the SQL divides but never scales by 100.
    PercentageNotScaled,
    /// "distinct / different / unique" is asked for; the SQL has neither DISTINCT nor grouping.
    DistinctMissing,
    /// A superlative answered with LIMIT but no ORDER BY (an arbitrary row).
    UnorderedLimit,
    /// A string literal the SQL compares a column with that neither the question nor the
    /// enriched question mentions (a misspelt id, an invented category).
    LiteralNotInQuestion,
    /// A number the SQL compares a column with that neither the question nor the enriched
    /// question states (an invented threshold: `height_cm > 0` under an average).
    NumberNotInQuestion,
    /// The question asks for a number of decimal places (or a rounded value); the SQL never
    /// rounds or formats.
    RoundingMissing,
    /// A table the catalogue does not have.
    UnknownTable,
    /// A column no table in scope has.
    UnknownColumn,
    /// A column qualified with a table or alias that does not have it.
    ColumnNotInTable,
    /// A qualifier that names no table or alias in scope.
    UnknownQualifier,
    /// An unqualified column that several tables in scope have.
    AmbiguousColumn,
    /// Two tables joined on columns that are not a declared key pair.
    JoinOffKeys,
    /// Two tables joined through the parent both reference, while a third table links them.
    JoinSkipsLinkTable,
    /// Columns of incompatible types compared for equality.
    JoinTypeMismatch,
    /// SUM or AVG over a text column.
    AggregateOverText,
    /// A literal that cannot be a value of the column's type (text against a number; a date in
    /// another format).
    LiteralTypeMismatch,
    /// COUNT of a table's key without DISTINCT, over a join that repeats the table's rows.
    CountFanOut,
    /// The question asks for a name; the SQL returns only an id although the table has a name
    /// (or returns a code whose name column is at hand while the question asks for no code).
    IdInsteadOfName,
    /// The question says a column's name; the SQL reads its table but never names it.
    NamedColumnUnused,
    /// A table joined to one other table contributes nothing but the join (repeated or
    /// restricted rows).
    UnusedJoinTable,
    /// The probe database rejects the query.
    QueryFails,
    /// The query returns no rows on the probe database.
    EmptyResult,
    /// A condition of an empty query that no row of its table satisfies on its own
    /// (`strftime('%m', d) = '9'`, a range no value falls in).
    PredicateMatchesNothing,
    /// A literal the SQL compares a column with is not a value of that column.
    ValueNotInColumn,
    /// A literal the SQL compares a column with is not a value of that column but is one of
    /// another column (of a table the query reads, or one related to it by a foreign key).
    ValueInOtherColumn,
    /// A probe could not answer (time limit, database unavailable).
    ProbeInconclusive,
    /// The query's result holds only NULLs (an aggregate over no rows).
    NullResult,
    /// The result's row count contradicts the question (one answer asked, several returned;
    /// more rows than a top k).
    RowCountMismatch,
    /// A percentage asked for, a ratio returned (a value between −1 and 1).
    RatioNotPercentage,
    /// Distinct things asked for, repeated rows returned.
    DuplicateRows,
    /// A count asked for ("how many …"), 0 returned.
    ZeroCount,
    /// A text-valued expression (`strftime('%Y', d)`, `substr(…)`) compared with a number: in
    /// SQLite the two never compare equal, so the condition is constant.
    TextComparedWithNumber,
    /// `a AND b OR c`: AND and OR mixed without parentheses (AND binds first).
    AndOrPrecedence,
    /// A list of things asked for; every output is an aggregate.
    AggregateForList,
    /// The most or least numerous asked for; the SQL orders by something and counts nothing.
    OrderByNotCount,
    /// ORDER BY … LIMIT over one aggregated row.
    LimitOverAggregate,
    /// A percentage asked for; the one number returned is above 100 or below 0.
    PercentageOutOfRange,
    /// The things a table holds asked for; the SQL returns another attribute of that table.
    AttributeForEntity,
}

/// One finding's entry in [`FINDINGS`].
#[derive(Debug, Clone, Copy)]
pub struct FindingEntry {
    /// The code.
    pub code: FindingCode,
    /// Its stored name (`details.findings[].code`; public interface).
    pub name: &'static str,
    /// Its severity, as documented (`error`, `warning (info in SQLite, MySQL)`, `error / warning`).
    pub severity: &'static str,
    /// The error category (or categories) it indicates.
    pub category: &'static str,
    /// What it needs: `no` (the question and the SQL), `yes` (a catalogue), `probe` (the
    /// replica), `result` (what the query returned), or both of the last two.
    pub needs: &'static str,
    /// When it fires (the findings reference's "fires when" column).
    pub fires_when: &'static str,
    /// What settles it when it fires (`details.findings[].confirmed_by`): `catalogue`,
    /// `probe`, `result / probe`, or `—` for a suspicion read from the question and the SQL.
    pub confirmed_by: &'static str,
    /// How often it is right on people's verdicts: the share of the labelled predictions it
    /// fires on that experts judged wrong, how often it fired, and per label file wrong /
    /// correct fires (`cargo run --release --example verdict_model` measures it; `—` where it
    /// never fired). Measured data, kept beside the entry so the reference is generated.
    pub precision: &'static str,
}

/// Every finding, one entry each, in the enum's order (a unit test holds it there and to serde's
/// names).
pub const FINDINGS: [FindingEntry; 45] = [
    FindingEntry {
        code: FindingCode::EvidenceValueMismatch,
        name: "evidence_value_mismatch",
        severity: "error",
        category: "value",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a definition in the enriched question says `col = 'v'` (its subject in the question's words); the SQL compares `col` only with other values"#,
        precision: r#"85 % (34: NL2SQL-Bugs 20 / 2, ROSE-VEC 2 / 3, toxicology 7 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::LiteralCaseMismatch,
        name: "literal_case_mismatch",
        severity: "info",
        category: "value",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"the SQL writes `'V'` where the definition says `'v'` (comparisons are case-sensitive; definitions are often not spelled as the data is — information only; with a probe, `value_not_in_column` says whether the literal is stored)"#,
        precision: r#"60 % (10)"#,
    },
    FindingEntry {
        code: FindingCode::EvidenceColumnUnused,
        name: "evidence_column_unused",
        severity: "warning",
        category: "attribute",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a definition maps the term to a column (`name refers to superhero_name`) the SQL never names; with a catalogue also a column of the database that a definition about the question writes in a formula or condition (`` `Enrollment (K-12)` ``, `DOC = 52`, `AVG(points)`), other than a table's single-column key"#,
        precision: r#"91 % (70; 100 % of 7 without a catalogue)"#,
    },
    FindingEntry {
        code: FindingCode::FormulaShapeMismatch,
        name: "formula_shape_mismatch",
        severity: "warning",
        category: "function",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a formula of the evidence about the question (`percentage = DIVIDE(…)`, `SUBTRACT(…)`, `a / b`) that the SQL does not compute at all (no division — AVG counts — or no subtraction)"#,
        precision: r#"89 % (19)"#,
    },
    FindingEntry {
        code: FindingCode::FormulaOperandMismatch,
        name: "formula_operand_mismatch",
        severity: "info",
        category: "function",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a formula of the evidence about the question `DIVIDE(numerator, denominator)` and the SQL's first division: a denominator defined as a plain count of a column (`COUNT(atom_id)`, not a conditional count) while the SQL divides by a count of another entity's columns (with a catalogue: no table of the SQL's denominator has the defined column; without one: both are keys, `id` / `…_id`), or a numerator defined as `SUM(<condition>)` whose condition (before any `WHERE` it writes) reads a column the SQL's numerator does not; only the formula's snake_case or camelCase words, or words the SQL also writes, count as columns"#,
        precision: r#"100 % (NL2SQL-Bugs 1 / 0 with the catalogue, 2 / 0 without; toxicology held-back half 2 / 0; fires on 7 of BIRD dev's 432 gold queries)"#,
    },
    FindingEntry {
        code: FindingCode::QuestionColumnUnused,
        name: "question_column_unused",
        severity: "warning",
        category: "attribute",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"the question uses a term the rule profile's `column_mappings` map to a column the catalogue has; the SQL never names that column"#,
        precision: r#"— (needs a profile)"#,
    },
    FindingEntry {
        code: FindingCode::IntegerDivision,
        name: "integer_division",
        severity: "error",
        category: "function",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"integer-valued operands (COUNT, SUM of 0/1 cases, integer literals) divided without a REAL cast or decimal literal, in SQLite, PostgreSQL, SQL Server, Redshift or ANSI"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::PercentageNotScaled,
        name: "percentage_not_scaled",
        severity: "warning",
        category: "function",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a percentage is asked for; the SQL divides and never multiplies by 100"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::DistinctMissing,
        name: "distinct_missing",
        severity: "warning",
        category: "clause",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#""distinct / different / unique" asked for (not "different from", "unique id"); no DISTINCT, GROUP BY or set operation"#,
        precision: r#"75 % (8)"#,
    },
    FindingEntry {
        code: FindingCode::UnorderedLimit,
        name: "unordered_limit",
        severity: "error",
        category: "clause",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a ranking (superlative) asked for; LIMIT without ORDER BY"#,
        precision: r#"100 % (1)"#,
    },
    FindingEntry {
        code: FindingCode::LiteralNotInQuestion,
        name: "literal_not_in_question",
        severity: "warning",
        category: "value",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a filter compares a column with a string literal (3+ characters, with a letter; not `yes`/`true`/`false`) that neither the question nor the enriched question contains, not even as a spacing, plural or stem variant — a misspelt id (`'TR_000_2_5'` for "TR000_2_5"), an invented category; numbers and dates are left alone, and so are the profile's benign and ignored filters"#,
        precision: r#"89 % (38)"#,
    },
    FindingEntry {
        code: FindingCode::NumberNotInQuestion,
        name: "number_not_in_question",
        severity: "warning",
        category: "condition",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a filter compares a column with a number (`<`, `>`, `<=`, `>=`, or `=`/`<>` other than 0 and 1) that neither the question nor the enriched question states — as digits (`1,000`, `$40`), a number word ("two", "once", "a single"), a percentage's fraction ("80%" is 0.8), a decade's bounds ("the 1990s") or, for an ordering, an integer neighbour ("at least 3" is `> 2`): an invented threshold (`height_cm > 0` under an average) or a magic id (`eye_colour_id = 7`)"#,
        precision: r#"94 % (33)"#,
    },
    FindingEntry {
        code: FindingCode::RoundingMissing,
        name: "rounding_missing",
        severity: "warning",
        category: "function",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"decimal places or a rounded value asked for ("with three decimal places"); the SQL has no ROUND, PRINTF, FORMAT, TO_CHAR, TRUNC or DECIMAL/NUMERIC cast"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::UnknownTable,
        name: "unknown_table",
        severity: "error",
        category: "table",
        needs: "yes",
        confirmed_by: "catalogue",
        fires_when: r#"a table the database does not have"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::UnknownColumn,
        name: "unknown_column",
        severity: "error",
        category: "attribute",
        needs: "yes",
        confirmed_by: "catalogue",
        fires_when: r#"an unqualified column no table in scope has (aliases, CTE and derived-table columns, `rowid` and double-quoted strings are understood)"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::ColumnNotInTable,
        name: "column_not_in_table",
        severity: "error",
        category: "attribute",
        needs: "yes",
        confirmed_by: "catalogue",
        fires_when: r#"`X.col` where `X`'s table has no such column"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::UnknownQualifier,
        name: "unknown_qualifier",
        severity: "error",
        category: "table",
        needs: "yes",
        confirmed_by: "catalogue",
        fires_when: r#"`X.col` with no table or alias `X` in scope"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::AmbiguousColumn,
        name: "ambiguous_column",
        severity: "error",
        category: "attribute",
        needs: "yes",
        confirmed_by: "catalogue",
        fires_when: r#"an unqualified column two tables of the scope have"#,
        precision: r#"— (0)"#,
    },
    FindingEntry {
        code: FindingCode::JoinOffKeys,
        name: "join_off_keys",
        severity: "warning",
        category: "table",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"a declared foreign key joined to another column than the one it references; or two tables' own single-column keys equated (`client.client_id = card.card_id`) while no foreign key relates the two tables"#,
        precision: r#"93 % (61)"#,
    },
    FindingEntry {
        code: FindingCode::JoinSkipsLinkTable,
        name: "join_skips_link_table",
        severity: "warning",
        category: "table",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"two tables joined through the parent both reference (`client.district_id = account.district_id`) while a third table has foreign keys to both and so says which rows belong together (`disp`)"#,
        precision: r#"86 % (7)"#,
    },
    FindingEntry {
        code: FindingCode::JoinTypeMismatch,
        name: "join_type_mismatch",
        severity: "warning (info in SQLite, MySQL)",
        category: "condition",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"text compared with a number in a join"#,
        precision: r#"100 % (10)"#,
    },
    FindingEntry {
        code: FindingCode::AggregateOverText,
        name: "aggregate_over_text",
        severity: "warning (info in SQLite, MySQL)",
        category: "function",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"SUM or AVG over a text column"#,
        precision: r#"70 % (10)"#,
    },
    FindingEntry {
        code: FindingCode::LiteralTypeMismatch,
        name: "literal_type_mismatch",
        severity: "warning",
        category: "value",
        needs: "yes",
        confirmed_by: "catalogue",
        fires_when: r#"a number column against a non-numeric string; a date column against a string that is not an ISO date"#,
        precision: r#"100 % (3)"#,
    },
    FindingEntry {
        code: FindingCode::CountFanOut,
        name: "count_fan_out",
        severity: "info / warning",
        category: "function",
        needs: "yes / probe",
        confirmed_by: "probe (the warning)",
        fires_when: r#"COUNT(key) without DISTINCT over a join to a table that references it, and no filter reads that table (info: a suspicion). With the probe, asked of the data whenever a table's key is counted over a join (a filter on the other table or not), or a foreign key where "how many" names the table it references: `COUNT(x)` against `COUNT(DISTINCT x)` under the query's own joins, filters and grouping — a warning confirmed by the probe where they differ, withdrawn where they never do"#,
        precision: r#"the warning (confirmed by the probe): 93 % on toxicology (28: fitting half 12 / 1, held-back half 14 / 1); the info suspicion: 65 % (NL2SQL-Bugs 13 / 7)"#,
    },
    FindingEntry {
        code: FindingCode::IdInsteadOfName,
        name: "id_instead_of_name",
        severity: "warning",
        category: "attribute",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"names asked for (and not ids); only `…id` columns returned while the table has a name column; or a code column returned (`EdOpsCode`) whose table has what it stands for (`EdOpsName`, `…Type`, `…Description`, `…Title`; not a `…Type` beside the table's own key: a bond's id is the bond) while the question asks for no code, id or number"#,
        precision: r#"100 % (3; toxicology 0 — it fired 1 / 2 there before bonds asked for by their ids were left alone)"#,
    },
    FindingEntry {
        code: FindingCode::NamedColumnUnused,
        name: "named_column_unused",
        severity: "warning",
        category: "attribute",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"the question says a column's name — two words or more, its natural-language name ("mailing street address" for `MailStrAbr`, the catalogue's `description` / `tables.json`'s `column_names`) or its written name split into words ("border color" for `borderColor`) — and the SQL reads the column's table but never names it, nor any column whose own name holds the phrase"#,
        precision: r#"93 % (28)"#,
    },
    FindingEntry {
        code: FindingCode::UnusedJoinTable,
        name: "unused_join_table",
        severity: "warning",
        category: "table",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"a table joined to exactly one other table, used for nothing but that join, and not the parent the other side's foreign key references (a joined child repeats rows, an unrelated table restricts them), nor a child whose rows the query's `COUNT(*)` counts; never when the query returns `*`"#,
        precision: r#"89 % (56: NL2SQL-Bugs 37 / 5, ROSE-VEC 1 / 1, toxicology 12 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::QueryFails,
        name: "query_fails",
        severity: "error",
        category: "other",
        needs: "probe / result",
        confirmed_by: "result / probe",
        fires_when: r#"the replica rejects the query (no such column, a syntax error, …); or the event's `result` carries an `error` (the agent's own run failed)"#,
        precision: r#"— (0: every labelled toxicology query runs)"#,
    },
    FindingEntry {
        code: FindingCode::EmptyResult,
        name: "empty_result",
        severity: "warning",
        category: "condition",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#"the event's `result` (or the probe's run) has no rows"#,
        precision: r#"100 % (toxicology 27 / 0; held-back half 15 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::PredicateMatchesNothing,
        name: "predicate_matches_nothing",
        severity: "warning",
        category: "condition",
        needs: "probe",
        confirmed_by: "probe",
        fires_when: r#"the query returns no rows (its `result`, or the probe's run) and one of its outer WHERE's AND-ed conditions — on one table of the FROM, no subquery, not `column = 'text'` (the value probes ask that) — matches no row of that table on its own (`strftime('%m', d) = '9'`, `age > 200`); at most 4 conditions asked"#,
        precision: r#"100 % (toxicology 5 / 0; held-back half 3 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::ValueNotInColumn,
        name: "value_not_in_column",
        severity: "error / warning",
        category: "value",
        needs: "probe",
        confirmed_by: "probe",
        fires_when: r#"`col = 'v'` where `v` is not a value of the column: an error when a case or spacing variant is (named in the evidence), a warning when none is"#,
        precision: r#"95 % (toxicology 19 / 1; held-back half 10 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::ValueInOtherColumn,
        name: "value_in_other_column",
        severity: "error",
        category: "attribute / table",
        needs: "probe",
        confirmed_by: "probe",
        fires_when: r#"`col = 'v'` where neither `v` nor a case or spacing variant is a value of the column, but another text column holds it (named in the evidence) — of the same table, another table the query reads (category attribute) or a table a foreign key relates to the column's table (category table); ≤ 12 columns searched, in that order, and only for literals of 3+ characters with a letter"#,
        precision: r#"100 % (toxicology 1 / 0); EX proxy: 14 fires, all on EX-wrong predictions; never on BIRD's or Spider's gold"#,
    },
    FindingEntry {
        code: FindingCode::ProbeInconclusive,
        name: "probe_inconclusive",
        severity: "info",
        category: "other",
        needs: "probe",
        confirmed_by: "—",
        fires_when: r#"a probe timed out or found no database: nothing concluded"#,
        precision: r#"— (0: no probe timed out)"#,
    },
    FindingEntry {
        code: FindingCode::NullResult,
        name: "null_result",
        severity: "warning",
        category: "function",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#"every returned cell is NULL (an aggregate over no rows)"#,
        precision: r#"100 % (toxicology 1 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::RowCountMismatch,
        name: "row_count_mismatch",
        severity: "warning",
        category: "clause",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#"one answer asked for ("how many …", "what is the percentage / ratio / average / total …", a singular superlative; not "each", "per", "list", "all") and several different rows returned; or a top *k* asked for and more than *k* rows returned"#,
        precision: r#"100 % (toxicology 1 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::RatioNotPercentage,
        name: "ratio_not_percentage",
        severity: "info",
        category: "function",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#"a percentage asked for and the single row's only number lies strictly between −1 and 1"#,
        precision: r#"67 % (toxicology 2 / 1): info"#,
    },
    FindingEntry {
        code: FindingCode::DuplicateRows,
        name: "duplicate_rows",
        severity: "info",
        category: "clause",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#""different / distinct / unique" things asked for, or a list of things ("which …", "list …", "what are …", no quantity) returned as identifiers (every column an `…id`), and the (complete) sample repeats rows"#,
        precision: r#"0 % (toxicology 0 / 2): info"#,
    },
    FindingEntry {
        code: FindingCode::ZeroCount,
        name: "zero_count",
        severity: "warning",
        category: "condition",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#""how many …" (one answer) and the one row's only number is 0"#,
        precision: r#"100 % (toxicology 3 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::TextComparedWithNumber,
        name: "text_compared_with_number",
        severity: "info",
        category: "value",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"in SQLite, a text-valued expression — a text function's result (`strftime`, `substr`, `date`, `upper`, …), a concatenation, a cast to text — compared with a number (`strftime('%Y', birthday) = 1996`, `BETWEEN 1990 AND 2000`, `IN (10, 11)`): SQLite converts neither side and every number sorts before every text, so `=` is never true (arithmetic, casts to a number and columns convert, and are left alone). Info: it weighs through `p_correct`, not Φ"#,
        precision: r#"100 % (2; ROSE-VEC: 0 fired)"#,
    },
    FindingEntry {
        code: FindingCode::AndOrPrecedence,
        name: "and_or_precedence",
        severity: "info",
        category: "operator",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"an OR among whose operands is an AND without parentheses (`a AND b OR c`): AND binds first, so the OR's other branch drops the AND's conditions. Info: it weighs through `p_correct`, not Φ"#,
        precision: r#"85 % (13; ROSE-VEC: 0 fired)"#,
    },
    FindingEntry {
        code: FindingCode::AggregateForList,
        name: "aggregate_for_list",
        severity: "info",
        category: "attribute",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"a list of things asked for ("which …", "list …", "name …", "what are …") and no quantity (how many, number, count, total, average, percentage, ratio, …); every output of the SQL is an aggregate ("which molecules …" answered by `COUNT(…)`)"#,
        precision: r#"80 % (5: NL2SQL-Bugs 2 / 1, ROSE-VEC 1 / 0, toxicology 1 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::OrderByNotCount,
        name: "order_by_not_count",
        severity: "info",
        category: "function",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"the most or least numerous / common / frequent asked for (or the evidence writes `MAX(COUNT(…))` / `MIN(COUNT(…))`); the SQL orders by something and counts nothing (`ORDER BY element LIMIT 1` for "the least numerous element")"#,
        precision: r#"60 % (5: NL2SQL-Bugs 2 / 2, toxicology 1 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::LimitOverAggregate,
        name: "limit_over_aggregate",
        severity: "info",
        category: "clause",
        needs: "no",
        confirmed_by: "—",
        fires_when: r#"every output is an aggregate and there is no GROUP BY (one row), yet the SQL has ORDER BY with LIMIT: a ranking written over a single total"#,
        precision: r#"67 % (3: NL2SQL-Bugs 2 / 0, ROSE-VEC 0 / 1)"#,
    },
    FindingEntry {
        code: FindingCode::PercentageOutOfRange,
        name: "percentage_out_of_range",
        severity: "warning",
        category: "function",
        needs: "result / probe",
        confirmed_by: "result / probe",
        fires_when: r#"a percentage asked for (not a change, increase, decrease or difference) and the single row's only number is above 100 or below 0 (a ratio over the wrong denominator: 476.9 %)"#,
        precision: r#"100 % (toxicology 1 / 0)"#,
    },
    FindingEntry {
        code: FindingCode::AttributeForEntity,
        name: "attribute_for_entity",
        severity: "info",
        category: "attribute",
        needs: "yes",
        confirmed_by: "—",
        fires_when: r#"the question asks for the things a table holds (its first word after "which / what / list / name …" is the table's one-word name: "what atoms comprise TR186?") and the SQL returns only other columns of that table — not its key, a name, title, id or code, a column named after the table, or one the question names"#,
        precision: r#"58 % (12: NL2SQL-Bugs 4 / 4, ROSE-VEC 0 / 1, toxicology 3 / 0)"#,
    },
];

/// The findings reference's table (Markdown), one row per entry of [`FINDINGS`] in its order:
/// what `docs/reference/findings.md` shows between its generated-table markers.
pub fn findings_table() -> String {
    let mut out = String::from(
        "| code | severity | category | needs | fires when | confirmed by | right on people's labels (fired) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for e in &FINDINGS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} |\n",
            e.name, e.severity, e.category, e.needs, e.fires_when, e.confirmed_by, e.precision
        ));
    }
    out
}

impl FindingCode {
    /// Every code, in declaration order (`ALL[c as usize] == c`).
    pub const ALL: [FindingCode; FINDINGS.len()] = {
        let mut all = [FindingCode::EvidenceValueMismatch; FINDINGS.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = FINDINGS[i].code;
            i += 1;
        }
        all
    };

    /// The code's entry in [`FINDINGS`].
    pub fn entry(self) -> &'static FindingEntry {
        &FINDINGS[self as usize]
    }

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        self.entry().name
    }
}

#[cfg(test)]
mod tests {
    use super::{FINDINGS, FindingCode, findings_table};

    #[test]
    fn the_registry_has_one_entry_per_code_in_order_with_serde_names() {
        for (i, entry) in FINDINGS.iter().enumerate() {
            assert_eq!(entry.code as usize, i, "{} out of order", entry.name);
            assert_eq!(
                serde_json::to_value(entry.code).unwrap(),
                serde_json::Value::String(entry.name.into())
            );
            assert!(!entry.fires_when.is_empty() && !entry.fires_when.contains('\n'));
        }
        assert_eq!(FindingCode::ALL.len(), FINDINGS.len());
    }

    /// The reference page's table is the registry's (rewritten with `SQLGRADE_WRITE_DOCS=1`).
    #[test]
    fn the_findings_reference_is_the_registry() {
        const START: &str = "<!-- generated from stef::findings::FINDINGS: do not edit -->\n";
        const END: &str = "<!-- end of the generated table -->";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/reference/findings.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let (before, rest) = page.split_once(START).expect("the page's start marker");
        let (table, after) = rest.split_once(END).expect("the page's end marker");
        let generated = findings_table();
        if table != generated && std::env::var_os("SQLGRADE_WRITE_DOCS").is_some() {
            std::fs::write(&path, format!("{before}{START}{generated}{END}{after}")).unwrap();
            return;
        }
        assert!(
            table == generated,
            "docs/reference/findings.md's table is not the registry's (stef::findings::FINDINGS); \
             run `SQLGRADE_WRITE_DOCS=1 cargo test -p sqlgrade-core findings_reference` to rewrite it"
        );
    }
}
