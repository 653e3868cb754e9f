//! What an event is about, in the schema's terms — the keys "where the agent goes wrong" is
//! counted by: the tables, columns and join edges the SQL reads ([`QueryNames`], stored as
//! `details.reads`), the elements each finding names ([`name_findings`]), a question type read
//! from the question alone ([`question_type`], `details.question_type`) and the query's shape
//! ([`query_shape`], `details.query_shape`).
//!
//! Names are canonical through the catalogue when the event has one (the catalogue's spelling:
//! `superhero.id`), and as the SQL writes them otherwise, lowercased, a column qualified by the
//! table its qualifier or its scope's only table names. Everything here comes from what the
//! extraction already walked (the spec and its references); the question is split into words
//! once more for the question type.
//!
//! A finding names an element when its evidence text writes it: a column by its name (its
//! table's name or alias also written where two tables read a column of that name), a table by
//! its name or an alias used as a qualifier, a value quoted as the SQL writes it, a join edge
//! when both its columns are named — or, for the findings about joins, both its tables. The
//! evidence is the checks' own sentence, so what it names is what the check looked at.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde::{Deserialize, Serialize};

use super::checks::{Resolved, Resolver, contains_word};
use super::text::QuestionTexts;
use super::{Elements, Finding, FindingCode};
use crate::catalogue::DbSchema;
use crate::sqlspec::{Clause, RefSourceKind, SqlSpec};

/// The tables, columns, join edges and compared literals of one query, with the names its
/// evidence texts may use for them (what [`name_findings`] matches), and the catalogue the
/// evidence may name other columns of.
#[derive(Debug, Clone, Default)]
pub struct QueryNames<'s> {
    schema: Option<&'s DbSchema>,
    tables: Vec<NamedTable>,
    columns: Vec<NamedColumn>,
    /// Join edges: the canonical text and the two columns (indices into `columns`).
    joins: Vec<(String, usize, usize)>,
    /// Literals the SQL compares columns with, as written.
    values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct NamedTable {
    canonical: String,
    /// The table's name, lowercased.
    name: String,
    /// Aliases, lowercased (matched only as qualifiers: `t1.`).
    aliases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct NamedColumn {
    canonical: String,
    /// Index into `tables`, when known.
    table: Option<usize>,
    /// The column's name, lowercased.
    name: String,
}

impl<'s> QueryNames<'s> {
    /// The names of `spec`'s query: from its references when the extraction collected them
    /// (resolved through `schema` when there is one, scope by scope otherwise), else from the
    /// spec's tables and bare column names.
    pub fn of(spec: &SqlSpec, schema: Option<&'s DbSchema>) -> QueryNames<'s> {
        QueryNames::resolved(spec, schema, None)
    }

    /// [`QueryNames::of`] with the references already resolved through `schema` (index by
    /// index, as the catalogue checks resolve them), so nothing is resolved twice.
    pub(crate) fn resolved(
        spec: &SqlSpec,
        schema: Option<&'s DbSchema>,
        resolved: Option<&[Resolved]>,
    ) -> QueryNames<'s> {
        let mut names = QueryNames {
            schema,
            ..QueryNames::default()
        };
        match spec.references.as_deref() {
            Some(refs) => names.add_references(refs, schema, resolved),
            None => names.add_spec(spec),
        }
        names
    }

    /// The table named `name` — spelled as given when `exact` (the catalogue's spelling),
    /// lowercased otherwise — added when new (nothing is allocated for one already there).
    fn table(&mut self, name: &str, exact: bool) -> usize {
        let same = |t: &NamedTable| {
            if exact {
                t.canonical == name
            } else {
                t.canonical.eq_ignore_ascii_case(name)
            }
        };
        if let Some(i) = self.tables.iter().position(same) {
            return i;
        }
        let canonical = if exact {
            name.to_string()
        } else {
            name.to_ascii_lowercase()
        };
        self.tables.push(NamedTable {
            name: canonical.to_ascii_lowercase(),
            canonical,
            aliases: Vec::new(),
        });
        self.tables.len() - 1
    }

    /// The column `name` of `table` (spelled as given when `exact`, lowercased otherwise),
    /// added when new (nothing is allocated for one already there).
    fn column(&mut self, table: Option<usize>, name: &str, exact: bool) -> usize {
        if let Some(i) = self
            .columns
            .iter()
            .position(|c| c.table == table && c.name.eq_ignore_ascii_case(name))
        {
            return i;
        }
        let lower = name.to_ascii_lowercase();
        let written = if exact { name } else { lower.as_str() };
        let canonical = match table.and_then(|t| self.tables.get(t)) {
            Some(t) => {
                let mut c = String::with_capacity(t.canonical.len() + 1 + written.len());
                c.push_str(&t.canonical);
                c.push('.');
                c.push_str(written);
                c
            }
            None => lower.clone(),
        };
        self.columns.push(NamedColumn {
            canonical,
            table,
            name: lower,
        });
        self.columns.len() - 1
    }

    fn add_references(
        &mut self,
        refs: &crate::sqlspec::QueryReferences,
        schema: Option<&DbSchema>,
        already: Option<&[Resolved]>,
    ) {
        // Every scope's table sources, with their aliases.
        for source in refs.scopes.iter().flat_map(|s| &s.sources) {
            let RefSourceKind::Table(name) = &source.kind else {
                continue;
            };
            let t = match schema.and_then(|s| Some((s, s.table_index(name)?))) {
                Some((s, t)) => self.table(&s.tables[t], true),
                None => self.table(name, false),
            };
            let table = &mut self.tables[t];
            if !source.binding.eq_ignore_ascii_case(&table.name)
                && !table
                    .aliases
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(&source.binding))
            {
                table.aliases.push(source.binding.to_ascii_lowercase());
            }
        }
        // Each reference, resolved; `None` for what is no column of a table (an alias of the
        // projection, a derived table's column, a string in double quotes).
        let mut scratch = Vec::new();
        let mut resolved: Vec<Option<usize>> = Vec::with_capacity(refs.columns.len());
        for (i, c) in refs.columns.iter().enumerate() {
            let at = match schema {
                Some(schema) => match already
                    .and_then(|r| r.get(i).copied())
                    .unwrap_or_else(|| (Resolver { schema, refs }).resolve(i, &mut scratch))
                {
                    Resolved::Column(t, col) => {
                        let table = self.table(&schema.tables[t], true);
                        Some(self.column(Some(table), &schema.columns[col].name, true))
                    }
                    _ => None,
                },
                None => self.written_column(refs, c),
            };
            resolved.push(at);
        }
        for &(a, b) in &refs.equalities {
            let (Some(Some(a)), Some(Some(b))) = (resolved.get(a), resolved.get(b)) else {
                continue;
            };
            let (ca, cb) = (&self.columns[*a], &self.columns[*b]);
            if ca.table.is_none() || cb.table.is_none() || ca.table == cb.table {
                continue;
            }
            let (first, second) = if ca.canonical <= cb.canonical {
                (*a, *b)
            } else {
                (*b, *a)
            };
            // Pushed, not `format!`ted: the formatting machinery cost more than the copy.
            let (x, y) = (
                &self.columns[first].canonical,
                &self.columns[second].canonical,
            );
            let mut edge = String::with_capacity(x.len() + 3 + y.len());
            edge.push_str(x);
            edge.push_str(" = ");
            edge.push_str(y);
            if !self.joins.iter().any(|(e, _, _)| *e == edge) {
                self.joins.push((edge, first, second));
            }
        }
        for (_, _, literal) in &refs.comparisons {
            if !self.values.contains(&literal.text) {
                self.values.push(literal.text.clone());
            }
        }
    }

    /// A reference resolved without a catalogue: its qualifier's table, else its scope's only
    /// table; a bare name when neither says; `None` for a projection alias or a derived
    /// table's column.
    fn written_column(
        &mut self,
        refs: &crate::sqlspec::QueryReferences,
        c: &crate::sqlspec::ColumnRef,
    ) -> Option<usize> {
        let mut scope = Some(c.scope);
        let mut hops = 0;
        while let Some(s) = scope.and_then(|s| refs.scopes.get(s)) {
            match &c.qualifier {
                Some(q) => {
                    if let Some(source) = s
                        .sources
                        .iter()
                        .find(|src| src.binding.eq_ignore_ascii_case(q))
                    {
                        return match &source.kind {
                            RefSourceKind::Table(name) => {
                                let t = self.table(name, false);
                                Some(self.column(Some(t), &c.name, false))
                            }
                            RefSourceKind::Derived(_) => None,
                        };
                    }
                }
                None => {
                    if s.aliases.iter().any(|a| a.eq_ignore_ascii_case(&c.name)) {
                        return None;
                    }
                    return match s.sources.as_slice() {
                        [only] => match &only.kind {
                            RefSourceKind::Table(name) => {
                                let t = self.table(name, false);
                                Some(self.column(Some(t), &c.name, false))
                            }
                            RefSourceKind::Derived(_) => None,
                        },
                        _ if c.double_quoted => None,
                        _ => Some(self.column(None, &c.name, false)),
                    };
                }
            }
            scope = s.parent;
            hops += 1;
            if hops > 64 {
                break;
            }
        }
        None
    }

    /// Without references: the spec's tables and the bare column names its projections,
    /// aggregations, grouping and filters use (qualified when the query reads one table).
    fn add_spec(&mut self, spec: &SqlSpec) {
        for table in &spec.tables {
            self.table(table, false);
        }
        let only = (self.tables.len() == 1).then_some(0);
        let identifier =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let mut bare: Vec<&str> = Vec::new();
        bare.extend(
            spec.projections
                .iter()
                .flat_map(|p| p.columns.iter().map(String::as_str)),
        );
        bare.extend(spec.aggregations.iter().filter_map(|a| a.column.as_deref()));
        bare.extend(spec.group_by.iter().map(String::as_str));
        bare.extend(spec.filters.iter().map(|f| f.lhs.as_str()));
        let aliases: Vec<&str> = spec
            .projections
            .iter()
            .filter_map(|p| p.alias.as_deref())
            .collect();
        for name in bare {
            if identifier(name) && !aliases.contains(&name) && name != "*" {
                self.column(only, name, false);
            }
        }
    }

    /// What the query reads (`details.reads`): its tables, columns and join edges, each
    /// sorted.
    pub fn reads(&self) -> Elements {
        let sorted = |mut v: Vec<String>| {
            v.sort_unstable();
            v
        };
        Elements {
            tables: sorted(self.tables.iter().map(|t| t.canonical.clone()).collect()),
            columns: sorted(self.columns.iter().map(|c| c.canonical.clone()).collect()),
            joins: sorted(self.joins.iter().map(|(e, _, _)| e.clone()).collect()),
            values: Vec::new(),
        }
    }

    /// The elements one evidence text names (module docs).
    fn named_in(&self, code: FindingCode, evidence: &str) -> Elements {
        let text = evidence.to_ascii_lowercase();
        // The evidence's words, sorted: a name of identifier characters is written as a word
        // exactly when it is one of them (what `contains_word` tests, without a scan per name).
        let mut words: Vec<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        words.sort_unstable();
        words.dedup();
        let writes = |name: &str| {
            if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                words
                    .binary_search_by(|w| {
                        w.bytes().cmp(name.bytes().map(|b| b.to_ascii_lowercase()))
                    })
                    .is_ok()
            } else {
                contains_word(&text, &name.to_ascii_lowercase())
            }
        };
        let table_named: Vec<bool> = self
            .tables
            .iter()
            .map(|t| {
                writes(&t.name)
                    || t.aliases.iter().any(|a| {
                        text.match_indices(a.as_str())
                            .any(|(at, _)| text.as_bytes().get(at + a.len()) == Some(&b'.'))
                    })
            })
            .collect();
        let mut columns: Vec<usize> = Vec::new();
        for (i, c) in self.columns.iter().enumerate() {
            if !writes(&c.name) {
                continue;
            }
            let namesakes = self.columns.iter().filter(|o| o.name == c.name).count();
            let own_table_named = c.table.is_some_and(|t| table_named[t]);
            let some_namesake_table_named = self
                .columns
                .iter()
                .any(|o| o.name == c.name && o.table.is_some_and(|t| table_named[t]));
            if namesakes == 1 || own_table_named || !some_namesake_table_named {
                columns.push(i);
            }
        }
        // Columns of the tables the query reads that the evidence names although the query
        // does not read them (`superhero.superhero_name` for a name it never returns).
        let mut unread: Vec<String> = Vec::new();
        if let Some(schema) = self.schema {
            for table in &self.tables {
                let Some(t) = schema.table_index(&table.canonical) else {
                    continue;
                };
                for (_, c) in schema.columns_of(t) {
                    if !writes(&c.name) {
                        continue;
                    }
                    let lower = c.name.to_ascii_lowercase();
                    let canonical = format!("{}.{}", table.canonical, c.name);
                    if !self.columns.iter().any(|q| q.canonical == canonical)
                        && (self.columns.iter().all(|q| q.name != lower)
                            || text.contains(&format!("{}.{lower}", table.name)))
                    {
                        unread.push(canonical);
                    }
                }
            }
        }
        let mut tables: Vec<usize> = (0..self.tables.len()).filter(|&t| table_named[t]).collect();
        for &c in &columns {
            if let Some(t) = self.columns[c].table
                && !tables.contains(&t)
            {
                tables.push(t);
            }
        }
        let about_joins = matches!(
            code,
            FindingCode::JoinOffKeys
                | FindingCode::JoinSkipsLinkTable
                | FindingCode::JoinTypeMismatch
                | FindingCode::UnusedJoinTable
                | FindingCode::CountFanOut
        );
        let joins: Vec<String> = self
            .joins
            .iter()
            .filter(|(_, a, b)| {
                (columns.contains(a) && columns.contains(b))
                    || about_joins
                        && [a, b]
                            .iter()
                            .all(|c| self.columns[**c].table.is_some_and(|t| tables.contains(&t)))
            })
            .map(|(e, _, _)| e.clone())
            .collect();
        let values: Vec<String> = self
            .values
            .iter()
            .filter(|v| text.contains(&format!("'{}'", v.to_ascii_lowercase())))
            .cloned()
            .collect();
        let mut columns: Vec<String> = columns
            .iter()
            .map(|&c| self.columns[c].canonical.clone())
            .chain(unread)
            .collect();
        columns.sort_unstable();
        let mut tables: Vec<String> = tables
            .iter()
            .map(|&t| self.tables[t].canonical.clone())
            .collect();
        tables.sort_unstable();
        Elements {
            tables,
            columns,
            joins,
            values,
        }
    }
}

/// Fill in the elements of the findings that name none yet (idempotent: the probe's findings,
/// added later, are named by a second call).
pub fn name_findings(findings: &mut [Finding], names: &QueryNames) {
    for finding in findings.iter_mut().filter(|f| f.elements.is_empty()) {
        finding.elements = names.named_in(finding.code, &finding.evidence);
    }
}

/// What a question asks for, read from its words alone (never the SQL, never the agent's
/// enriched question): the first that applies of ratio, count, comparison, aggregate, top k,
/// list, and lookup for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionIntent {
    /// A percentage, ratio, proportion, share or rate.
    Ratio,
    /// How many / the number of.
    Count,
    /// Two things compared (difference, compare, more … than which).
    Comparison,
    /// An average, total, sum, maximum or minimum.
    Aggregate,
    /// The most / least / highest / top k.
    TopK,
    /// A list of things (list, which, name, what are).
    List,
    /// One fact looked up.
    Lookup,
}

impl QuestionIntent {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionIntent::Ratio => "ratio",
            QuestionIntent::Count => "count",
            QuestionIntent::Comparison => "comparison",
            QuestionIntent::Aggregate => "aggregate",
            QuestionIntent::TopK => "top_k",
            QuestionIntent::List => "list",
            QuestionIntent::Lookup => "lookup",
        }
    }

    /// Words that only say the intent (left out of a question's key nouns).
    fn words(self) -> &'static [&'static str] {
        match self {
            QuestionIntent::Ratio => &[
                "percentage",
                "percent",
                "ratio",
                "proportion",
                "fraction",
                "share",
                "rate",
            ],
            QuestionIntent::Count => &["number", "count", "many"],
            QuestionIntent::Comparison => &[
                "difference",
                "compare",
                "compared",
                "versus",
                "more",
                "less",
            ],
            QuestionIntent::Aggregate => &["average", "mean", "total", "sum", "maximum", "minimum"],
            QuestionIntent::TopK => &[
                "most", "least", "highest", "lowest", "top", "largest", "smallest", "best",
                "worst", "common",
            ],
            QuestionIntent::List => &["list", "name", "names", "give", "show", "provide", "state"],
            QuestionIntent::Lookup => &[],
        }
    }
}

/// The intent of a lowercased question, in one pass over its words (module docs: the first of
/// ratio, count, comparison, aggregate, top k, list that its words say; lookup otherwise).
pub fn question_intent(question_lower: &str) -> QuestionIntent {
    const RATIO: u16 = 1;
    const COUNT: u16 = 1 << 1;
    const COMPARE: u16 = 1 << 2;
    const AGGREGATE: u16 = 1 << 3;
    const TOP: u16 = 1 << 4;
    const LIST: u16 = 1 << 5;
    const WHICH: u16 = 1 << 6;
    const OR: u16 = 1 << 7;
    const COMPARATIVE: u16 = 1 << 8;
    let mut seen = 0u16;
    // Split on bytes: a non-ASCII character's bytes are separators, as the character is.
    for word in question_lower
        .as_bytes()
        .split(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
        .filter(|w| (2..=10).contains(&w.len()))
    {
        seen |= match word {
            b"percentage" | b"percent" | b"ratio" | b"proportion" | b"fraction" | b"rate" => RATIO,
            b"count" => COUNT,
            b"difference" | b"compare" | b"compared" | b"versus" | b"vs" => COMPARE,
            b"average" | b"mean" | b"total" | b"sum" | b"maximum" | b"minimum" => AGGREGATE,
            b"most" | b"least" | b"highest" | b"lowest" | b"top" | b"largest" | b"smallest"
            | b"best" | b"worst" | b"oldest" | b"youngest" | b"latest" | b"earliest" | b"first"
            | b"last" => TOP,
            b"list" | b"all" => LIST,
            b"which" => WHICH,
            b"or" => OR,
            b"more" | b"less" | b"higher" | b"lower" | b"larger" | b"smaller" => COMPARATIVE,
            _ => 0,
        };
    }
    let has = |bits: u16| seen & bits == bits;
    // Searchers built once (a search by the phrase's first byte stopped at every `n` and `h`).
    static PHRASES: LazyLock<[Finder<'static>; 3]> =
        LazyLock::new(|| ["number of", "how much more", "how much less"].map(Finder::new));
    let [number_of, how_much_more, how_much_less] = &*PHRASES;
    let contains = |phrase: &Finder<'_>| phrase.find(question_lower.as_bytes()).is_some();
    if has(RATIO) {
        QuestionIntent::Ratio
    } else if has(COUNT) || question_lower.starts_with("how many") || contains(number_of) {
        QuestionIntent::Count
    } else if has(COMPARE)
        || has(WHICH | OR | COMPARATIVE)
        || contains(how_much_more)
        || contains(how_much_less)
    {
        QuestionIntent::Comparison
    } else if has(AGGREGATE) {
        QuestionIntent::Aggregate
    } else if has(TOP) {
        QuestionIntent::TopK
    } else if has(LIST)
        || [
            "list",
            "which",
            "name ",
            "what are",
            "give",
            "show",
            "provide",
            "state the",
        ]
        .iter()
        .any(|p| question_lower.starts_with(p))
    {
        QuestionIntent::List
    } else {
        QuestionIntent::Lookup
    }
}

/// Words that ask rather than name (left out of a question's key nouns).
const QUESTION_WORDS: [&str; 14] = [
    "what", "which", "who", "whom", "whose", "where", "when", "how", "why", "are", "was", "were",
    "does", "did",
];

/// Most subjects a question type names.
pub const MAX_SUBJECTS: usize = 3;

/// The readable label of a question type's key (`count:colour+superhero` →
/// `count · colour, superhero`): derived, never stored.
pub fn question_type_label(key: &str) -> String {
    match key.split_once(':') {
        Some((intent, subjects)) => format!(
            "{} · {}",
            intent.replace('_', " "),
            subjects.replace('+', ", ")
        ),
        None => key.replace('_', " "),
    }
}

/// The question type of the event's question (`details.question_type`; the user's question
/// only, `texts.question`): its intent and what it is about — the tables its words name through
/// the catalogue (a table's name, or a column's natural or written name of two words or more;
/// its words split once per event, [`QuestionTexts::words`], shared with the grounded checks),
/// else its first two key nouns — as a short stable key, `intent:subject+subject` (subjects
/// sorted; `intent` alone when none is found). [`question_type_label`] reads it.
///
/// `grounding`: the question's grounding in `schema` when the checks computed one (its links
/// through the question's own words are used; the evidence's are not).
pub fn question_type(
    texts: &QuestionTexts<'_>,
    schema: Option<&DbSchema>,
    grounding: Option<&super::grounding::Grounding>,
) -> String {
    let lower = texts.question_lower.as_str();
    let intent = question_intent(lower);
    let mut subjects: Vec<String> = Vec::new();
    match schema {
        Some(schema) => {
            let words = texts.words();
            let table_words = &schema.words().tables;
            let mut tables: Vec<usize> = (0..schema.tables.len())
                .filter(|&t| {
                    table_words
                        .get(t)
                        .is_some_and(|w| !w.is_empty() && names_phrase(words, w))
                })
                .collect();
            let computed;
            let links: &[super::grounding::ColumnLink] = match grounding {
                Some(g) => &g.columns,
                None => {
                    computed = super::grounding::question_links(words, schema);
                    &computed
                }
            };
            for link in links
                .iter()
                .filter(|l| l.via != super::grounding::LinkVia::Evidence)
            {
                if let Some(c) = schema.columns.get(link.column)
                    && c.table < schema.tables.len()
                    && !tables.contains(&c.table)
                {
                    tables.push(c.table);
                }
            }
            tables.sort_unstable();
            subjects.extend(
                tables
                    .iter()
                    .take(MAX_SUBJECTS)
                    .map(|&t| schema.tables[t].clone()),
            );
            subjects.sort_unstable();
        }
        None => {
            // Its first two key nouns: words of three letters or more that neither ask, nor
            // say the intent, nor are function words or numbers, in the singular.
            for word in lower
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.len() > 2)
            {
                if subjects.len() >= 2 {
                    break;
                }
                if word.bytes().any(|b| b.is_ascii_digit())
                    || QUESTION_WORDS.contains(&word)
                    || intent.words().contains(&word)
                    || QuestionIntent::TopK.words().contains(&word)
                    || crate::words::is_stop_word(word)
                {
                    continue;
                }
                let word = crate::words::singular(word).into_owned();
                if !subjects.contains(&word) {
                    subjects.push(word);
                }
            }
            subjects.sort_unstable();
        }
    }
    let intent = intent.as_str();
    if subjects.is_empty() {
        return intent.to_string();
    }
    let mut key = String::with_capacity(
        intent.len() + 1 + subjects.iter().map(|s| s.len() + 1).sum::<usize>(),
    );
    key.push_str(intent);
    for (i, subject) in subjects.iter().enumerate() {
        key.push(if i == 0 { ':' } else { '+' });
        key.push_str(subject);
    }
    key
}

/// Whether `phrase` (a table's name as words) occurs in `words` as a contiguous run, a word
/// also matching its `-oes` plural as `words::text_words` leaves it (`superheroes` → `superheroe`).
fn names_phrase(words: &[String], phrase: &[String]) -> bool {
    let same = |w: &String, p: &String| {
        w == p || (w.ends_with("oe") && w.strip_suffix('e') == Some(p.as_str()))
    };
    !phrase.is_empty()
        && phrase.len() <= words.len()
        && words
            .windows(phrase.len())
            .any(|run| run.iter().zip(phrase).all(|(w, p)| same(w, p)))
}

/// The query's shape (`details.query_shape`): what it selects, the tables it reads (sorted,
/// `⋈` between them) and the clauses it has — literals, aliases and expressions left out
/// (`select aggregate · atom ⋈ molecule · where · group by`).
pub fn query_shape(spec: &SqlSpec, reads: &Elements) -> String {
    let select = if spec.distinct {
        "select distinct"
    } else if !spec.projections.is_empty() && spec.projections.iter().all(|p| p.is_aggregate()) {
        "select aggregate"
    } else {
        "select"
    };
    let mut tables: Vec<&str> = reads.tables.iter().map(String::as_str).collect();
    if tables.is_empty() {
        tables = spec.tables.iter().map(String::as_str).collect();
    }
    tables.sort_unstable();
    tables.dedup();
    let mut shape = String::with_capacity(64);
    shape.push_str(select);
    for (i, table) in tables.iter().enumerate() {
        shape.push_str(if i == 0 { " · " } else { " ⋈ " });
        shape.push_str(table);
    }
    let clause = |c: Clause| spec.filters.iter().any(|f| f.clause == c);
    for (present, name) in [
        (clause(Clause::Where), "where"),
        (!spec.group_by.is_empty(), "group by"),
        (clause(Clause::Having), "having"),
        (!spec.order_by.is_empty(), "order by"),
        (spec.limit.is_some(), "limit"),
        (spec.subqueries > 0, "subquery"),
        (spec.set_operations, "set operation"),
        (spec.window_functions, "window"),
    ] {
        if present {
            shape.push_str(" · ");
            shape.push_str(name);
        }
    }
    shape
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::SchemaCatalog;
    use crate::sqlspec::{ExtractOptions, extract_with};
    use crate::stef::{ErrorCategory, Severity};

    fn heroes() -> SchemaCatalog {
        SchemaCatalog::parse_tables_json(
            r#"[{"db_id": "heroes",
                "table_names_original": ["superhero", "colour"],
                "table_names": ["superhero", "colour"],
                "column_names_original": [[-1, "*"], [0, "id"], [0, "superhero_name"],
                    [0, "eye_colour_id"], [1, "id"], [1, "colour"]],
                "column_names": [[-1, "*"], [0, "id"], [0, "superhero name"],
                    [0, "eye colour id"], [1, "id"], [1, "colour"]],
                "column_types": ["text", "integer", "text", "integer", "integer", "text"],
                "primary_keys": [1, 4], "foreign_keys": [[3, 4]]}]"#,
        )
        .expect("parses")
    }

    fn spec(sql: &str, references: bool) -> SqlSpec {
        let mut options = ExtractOptions::for_dialect(Some("sqlite"));
        options.collect_references = references;
        extract_with(sql, &options).expect("parses")
    }

    fn finding(code: FindingCode, evidence: &str) -> Finding {
        Finding {
            code,
            severity: Severity::Warning,
            category: ErrorCategory::Attribute,
            evidence: evidence.into(),
            confirmed_by: None,
            elements: Elements::default(),
        }
    }

    #[test]
    fn a_query_reads_canonical_tables_columns_and_joins() {
        let catalog = heroes();
        let schema = catalog.get("heroes");
        let sql = "SELECT T1.ID FROM SuperHero AS T1 JOIN colour AS T2 ON T1.eye_colour_id = T2.id WHERE T2.colour = 'Blue'";
        let names = QueryNames::of(&spec(sql, true), schema);
        assert_eq!(
            names.reads(),
            Elements {
                tables: vec!["colour".into(), "superhero".into()],
                columns: vec![
                    "colour.colour".into(),
                    "colour.id".into(),
                    "superhero.eye_colour_id".into(),
                    "superhero.id".into(),
                ],
                joins: vec!["colour.id = superhero.eye_colour_id".into()],
                values: vec![],
            }
        );
        // Without a catalogue: as written, lowercased, through the aliases.
        let names = QueryNames::of(&spec(sql, true), None);
        assert_eq!(
            names.reads().columns,
            vec![
                "colour.colour",
                "colour.id",
                "superhero.eye_colour_id",
                "superhero.id"
            ]
        );
        // Without references: the spec's tables and bare names.
        let names = QueryNames::of(&spec("SELECT name FROM hero WHERE age > 3", false), None);
        assert_eq!(names.reads().tables, vec!["hero"]);
        assert_eq!(names.reads().columns, vec!["hero.age", "hero.name"]);
    }

    #[test]
    fn findings_name_what_their_evidence_writes() {
        let catalog = heroes();
        let schema = catalog.get("heroes");
        let sql = "SELECT T1.id FROM superhero AS T1 JOIN colour AS T2 ON T1.eye_colour_id = T2.id WHERE T2.colour = 'Blue'";
        let names = QueryNames::of(&spec(sql, true), schema);
        let mut findings = vec![
            finding(
                FindingCode::IdInsteadOfName,
                "every output is an id (T1.id) although superhero has superhero_name",
            ),
            finding(
                FindingCode::LiteralNotInQuestion,
                "colour = 'Blue' is not in the question",
            ),
            finding(
                FindingCode::UnusedJoinTable,
                "colour is joined to superhero only to be joined",
            ),
            finding(FindingCode::DistinctMissing, "nothing of the query"),
        ];
        name_findings(&mut findings, &names);
        assert_eq!(
            findings[0].elements.columns,
            vec!["superhero.id", "superhero.superhero_name"],
            "not colour.id; the name it does not read, through the catalogue"
        );
        assert_eq!(findings[0].elements.tables, vec!["superhero"]);
        assert_eq!(findings[1].elements.columns, vec!["colour.colour"]);
        assert_eq!(findings[1].elements.values, vec!["Blue"]);
        assert_eq!(
            findings[2].elements.joins,
            vec!["colour.id = superhero.eye_colour_id"],
            "a join finding names the edge between the tables it names"
        );
        assert!(findings[3].elements.is_empty());
        // Idempotent: named findings keep their elements.
        let before = findings.clone();
        name_findings(&mut findings, &names);
        assert_eq!(findings, before);
    }

    #[test]
    fn a_question_type_is_read_from_the_question_alone() {
        let catalog = heroes();
        let schema = catalog.get("heroes");
        let t = question_type(
            &QuestionTexts::new("How many colours does each superhero have?", None),
            schema,
            None,
        );
        assert_eq!(t, "count:colour+superhero");
        assert_eq!(question_type_label(&t), "count · colour, superhero");
        assert_eq!(question_type_label("top_k"), "top k");
        assert_eq!(
            question_type(
                &QuestionTexts::new("What is the eye colour id of 3-D Man?", None),
                schema,
                None
            ),
            "lookup:colour+superhero"
        );
        assert_eq!(
            question_type(
                &QuestionTexts::new("What percentage of the colours are blue?", None),
                schema,
                None
            ),
            "ratio:colour"
        );
        // Without a catalogue: its first key nouns.
        assert_eq!(
            question_type(
                &QuestionTexts::new("What is the most common bond type?", None),
                None,
                None
            ),
            "top_k:bond+type"
        );
        for (q, intent) in [
            ("List the names of heroes", QuestionIntent::List),
            ("Which hero is the tallest?", QuestionIntent::List),
            ("What is the average height?", QuestionIntent::Aggregate),
            ("Who has the highest score?", QuestionIntent::TopK),
            (
                "What is the difference between a and b?",
                QuestionIntent::Comparison,
            ),
            ("What is the name of hero 5?", QuestionIntent::Lookup),
        ] {
            assert_eq!(question_intent(&q.to_ascii_lowercase()), intent, "{q}");
        }
    }

    #[test]
    fn a_query_shape_abstracts_literals_and_aliases() {
        let s = spec(
            "SELECT COUNT(T1.id) FROM superhero AS T1 JOIN colour AS T2 ON T1.eye_colour_id = T2.id WHERE T2.colour = 'Blue' GROUP BY T2.id ORDER BY 1 LIMIT 3",
            true,
        );
        let names = QueryNames::of(&s, None);
        assert_eq!(
            query_shape(&s, &names.reads()),
            "select aggregate · colour ⋈ superhero · where · group by · order by · limit"
        );
    }
}
