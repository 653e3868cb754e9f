//! Parsing with a dialect fallback chain, statement classification, and the entry points
//! [`extract`] / [`extract_with`].
//!
//! Fallback chain: the requested dialect(s) → generic → a lenient retry (markdown fences, a
//! `SQL:` label and trailing semicolons stripped; SQLite and MySQL dialects, which accept
//! backticks, brackets and double-quoted strings). The first dialect that parses wins and is
//! recorded in [`SqlSpec::dialect`]; if none does, the *first* dialect's message is reported.
//!
//! Robustness: sqlparser's recursion limit is set explicitly ([`PARSER_RECURSION_LIMIT`]), the
//! walk bounds its own nesting, and inputs large enough to build very deep left-nested
//! expression trees (`1+1+1+…`, whose parse is iterative but whose drop is recursive) are parsed,
//! walked and dropped on a dedicated stack sized from the input length.

use std::sync::OnceLock;

use sqlparser::ast::{SetExpr, Statement};
use sqlparser::dialect::{
    AnsiDialect, BigQueryDialect, ClickHouseDialect, DatabricksDialect, Dialect, DuckDbDialect,
    GenericDialect, HiveDialect, MsSqlDialect, MySqlDialect, PostgreSqlDialect, RedshiftSqlDialect,
    SQLiteDialect, SnowflakeDialect,
};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Tokenizer};

use super::normalize::{leading_keyword, lenient_clean};
use super::prefix::PlainPrefixes;
use super::tokens::{self, DialectChars};
use super::walk::{references_of_query, spec_of_query};
use super::{SpecError, SqlSpec};

/// Default maximum SQL size accepted for parsing, in bytes.
pub const DEFAULT_MAX_SQL_BYTES: usize = 256 * 1024;

/// Maximum parser recursion depth (nested parentheses, subqueries, prefix operators). Deeper
/// input is a parse error ("recursion limit exceeded"), never a stack overflow.
pub const PARSER_RECURSION_LIMIT: usize = 128;

/// Hard ceiling on the accepted SQL size, whatever [`ExtractOptions::max_sql_bytes`] says: it
/// bounds the dedicated stack reserved for large inputs (≈ 512 MiB of address space at most).
pub const HARD_MAX_SQL_BYTES: usize = 4 * 1024 * 1024;

/// Inputs above this size run on a dedicated stack (see the module docs).
const LARGE_INPUT_BYTES: usize = 4 * 1024;
/// Stack reserved per input byte for large inputs: a left-nested expression costs at most one
/// AST level per two bytes (`+1`), and dropping one level takes 64 (release) to 96 (debug) bytes
/// of stack (measured); sqlparser's own recursive Display and parse functions, and the walk,
/// grow their stacks on demand. The reservation is virtual; only touched pages count.
const STACK_BYTES_PER_INPUT_BYTE: usize = 128;
/// Base stack for large inputs.
const LARGE_INPUT_BASE_STACK: usize = 2 * 1024 * 1024;

/// Knobs for extraction.
#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// Dialect fallback chain, tried in order (`generic` is always tried last). Unknown names
    /// mean generic.
    pub dialects: Vec<String>,
    /// Larger SQL is rejected with [`SpecError::TooLarge`] (capped at [`HARD_MAX_SQL_BYTES`]).
    pub max_sql_bytes: usize,
    /// Also collect [`SqlSpec::references`] (a second, cheaper walk; the catalogue checks need
    /// it, the schema-free path does not).
    pub collect_references: bool,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions {
            dialects: vec!["generic".into()],
            max_sql_bytes: DEFAULT_MAX_SQL_BYTES,
            collect_references: false,
        }
    }
}

impl ExtractOptions {
    /// Options for one dialect (then generic, then the lenient retry).
    pub fn for_dialect(dialect: Option<&str>) -> Self {
        let mut opts = ExtractOptions::default();
        if let Some(d) = dialect {
            opts.dialects.insert(0, d.to_string());
        }
        opts
    }
}

/// Extract the spec of `sql`, parsing with `dialect` (if any) then the generic fallbacks.
pub fn extract(sql: &str, dialect: Option<&str>) -> Result<SqlSpec, SpecError> {
    extract_with(sql, &ExtractOptions::for_dialect(dialect))
}

/// Extract with explicit options.
pub fn extract_with(sql: &str, opts: &ExtractOptions) -> Result<SqlSpec, SpecError> {
    let limit = opts.max_sql_bytes.min(HARD_MAX_SQL_BYTES);
    if sql.len() > limit {
        return Err(SpecError::TooLarge {
            size: sql.len(),
            limit,
        });
    }
    if super::trimmed(sql).is_empty() {
        return Err(SpecError::Empty);
    }
    if sql.len() > LARGE_INPUT_BYTES {
        let stack = LARGE_INPUT_BASE_STACK
            .saturating_add(sql.len().saturating_mul(STACK_BYTES_PER_INPUT_BYTE));
        stacker::grow(stack, || extract_inner(sql, opts))
    } else {
        extract_inner(sql, opts)
    }
}

/// The sqlparser dialects sqlgrade knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlDialect {
    /// sqlparser's permissive generic dialect.
    Generic,
    /// ANSI SQL.
    Ansi,
    /// SQLite (BIRD, Spider).
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MySQL / MariaDB.
    MySql,
    /// Snowflake.
    Snowflake,
    /// Google BigQuery.
    BigQuery,
    /// Microsoft SQL Server (T-SQL).
    MsSql,
    /// ClickHouse.
    ClickHouse,
    /// DuckDB.
    DuckDb,
    /// Apache Hive.
    Hive,
    /// Amazon Redshift.
    Redshift,
    /// Databricks (Spark SQL).
    Databricks,
}

/// Slots of the fast tokenizer's per-dialect table ([`SqlDialect::chars`]): one per variant. A
/// variant beyond it would only miss the fast path, never fail.
const DIALECT_SLOTS: usize = SqlDialect::Databricks as usize + 1;

impl SqlDialect {
    /// Look a dialect up by name (case-insensitive; `postgresql`, `tsql`, `sqlserver`, `spark`
    /// are accepted aliases). `None` for unknown names.
    pub fn from_name(name: &str) -> Option<SqlDialect> {
        let name = super::trimmed(name);
        let is = |candidate: &str| name.eq_ignore_ascii_case(candidate);
        Some(if is("generic") {
            SqlDialect::Generic
        } else if is("ansi") {
            SqlDialect::Ansi
        } else if is("sqlite") || is("sqlite3") {
            SqlDialect::Sqlite
        } else if is("postgres") || is("postgresql") || is("pg") {
            SqlDialect::Postgres
        } else if is("mysql") || is("mariadb") {
            SqlDialect::MySql
        } else if is("snowflake") {
            SqlDialect::Snowflake
        } else if is("bigquery") {
            SqlDialect::BigQuery
        } else if is("mssql") || is("tsql") || is("sqlserver") || is("sql_server") {
            SqlDialect::MsSql
        } else if is("clickhouse") {
            SqlDialect::ClickHouse
        } else if is("duckdb") {
            SqlDialect::DuckDb
        } else if is("hive") {
            SqlDialect::Hive
        } else if is("redshift") {
            SqlDialect::Redshift
        } else if is("databricks") || is("spark") || is("sparksql") {
            SqlDialect::Databricks
        } else {
            return None;
        })
    }

    /// Canonical name, as recorded in [`SqlSpec::dialect`].
    pub fn name(self) -> &'static str {
        match self {
            SqlDialect::Generic => "generic",
            SqlDialect::Ansi => "ansi",
            SqlDialect::Sqlite => "sqlite",
            SqlDialect::Postgres => "postgres",
            SqlDialect::MySql => "mysql",
            SqlDialect::Snowflake => "snowflake",
            SqlDialect::BigQuery => "bigquery",
            SqlDialect::MsSql => "mssql",
            SqlDialect::ClickHouse => "clickhouse",
            SqlDialect::DuckDb => "duckdb",
            SqlDialect::Hive => "hive",
            SqlDialect::Redshift => "redshift",
            SqlDialect::Databricks => "databricks",
        }
    }

    /// Whether a double-quoted single name used as a value is a string in practice (dialects
    /// where `"x"` is a string, or where LLM-written SQL commonly uses it as one).
    fn double_quotes_are_strings(self) -> bool {
        matches!(
            self,
            SqlDialect::Generic
                | SqlDialect::Sqlite
                | SqlDialect::MySql
                | SqlDialect::BigQuery
                | SqlDialect::Hive
                | SqlDialect::Databricks
        )
    }

    /// The fast tokenizer's view of this dialect, read from `dialect` (this dialect's sqlparser
    /// object) the first time it is needed.
    fn chars(self, dialect: &dyn Dialect) -> Option<&'static DialectChars> {
        static CHARS: [OnceLock<DialectChars>; DIALECT_SLOTS] =
            [const { OnceLock::new() }; DIALECT_SLOTS];
        let slot = CHARS.get(self as usize)?;
        Some(slot.get_or_init(|| DialectChars::of(dialect)))
    }

    /// Parse with this dialect; `locations` keeps the tokens' spans (see [`parse_tokens`]).
    fn parse(self, sql: &str, locations: bool) -> Result<Vec<Statement>, ParserError> {
        match self {
            SqlDialect::Generic => parse_tokens(self, &GenericDialect, sql, locations),
            SqlDialect::Ansi => parse_tokens(self, &AnsiDialect {}, sql, locations),
            SqlDialect::Sqlite => parse_tokens(self, &SQLiteDialect {}, sql, locations),
            SqlDialect::Postgres => parse_tokens(self, &PostgreSqlDialect {}, sql, locations),
            SqlDialect::MySql => parse_tokens(self, &MySqlDialect {}, sql, locations),
            SqlDialect::Snowflake => parse_tokens(self, &SnowflakeDialect, sql, locations),
            SqlDialect::BigQuery => parse_tokens(self, &BigQueryDialect, sql, locations),
            SqlDialect::MsSql => parse_tokens(self, &MsSqlDialect {}, sql, locations),
            SqlDialect::ClickHouse => parse_tokens(self, &ClickHouseDialect {}, sql, locations),
            SqlDialect::DuckDb => parse_tokens(self, &DuckDbDialect, sql, locations),
            SqlDialect::Hive => parse_tokens(self, &HiveDialect {}, sql, locations),
            SqlDialect::Redshift => parse_tokens(self, &RedshiftSqlDialect {}, sql, locations),
            SqlDialect::Databricks => parse_tokens(self, &DatabricksDialect, sql, locations),
        }
    }
}

/// Canonical dialect name for a configured name; unknown names map to `generic`.
pub fn canonical_dialect(name: &str) -> &'static str {
    SqlDialect::from_name(name)
        .unwrap_or(SqlDialect::Generic)
        .name()
}

/// What `Parser::try_with_sql` does, with the token buffer sized up front: sqlparser collects
/// tokens (whitespace included, about one per two bytes of SQL) into a growing `Vec` of ~90-byte
/// entries, and the doublings and their copies were a visible share of a line-rate event's CPU.
/// The tokenizer's options are the parser's defaults (`unescape` on), so the tokens are the same.
///
/// Without `locations` the text is first offered to [`super::tokens`], which yields the same
/// tokens several times faster for everyday SQL and defers to sqlparser's tokenizer otherwise,
/// and every token's span is empty: sqlparser formats an error message (with its location) for
/// every speculative alternative it tries and drops — `DATE '…'` before an identifier, a data
/// type before a literal — and rendering those locations was ~3 % of a line-rate event's
/// instructions. Nothing downstream reads spans, so the parse is the same; only a failed
/// parse's message needs them (`extract_inner` parses again with them to report where the SQL
/// went wrong). The parser runs with [`PlainPrefixes`] around the dialect, which parses column
/// names and literals without sqlparser's data-type guess in front of each (same statements).
fn parse_tokens(
    which: SqlDialect,
    dialect: &'static dyn Dialect,
    sql: &str,
    locations: bool,
) -> Result<Vec<Statement>, ParserError> {
    let mut tokens = Vec::with_capacity(sql.len() / 2 + 16);
    let fast = !locations
        && which
            .chars(dialect)
            .is_some_and(|chars| tokens::tokenize(sql, chars, &mut tokens));
    if !fast {
        tokens.clear();
        let mut tokenizer = Tokenizer::new(dialect, sql).with_unescape(true);
        if locations {
            tokenizer.tokenize_with_location_into_buf(&mut tokens)?;
        } else {
            tokenizer.tokenize_with_location_into_buf_with_mapper(&mut tokens, |mut token| {
                token.span = Span::empty();
                token
            })?;
        }
    }
    Parser::new(&PlainPrefixes::new(dialect))
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens)
        .parse_statements()
}

/// Dialects of the lenient retry.
const LENIENT_DIALECTS: [SqlDialect; 2] = [SqlDialect::Sqlite, SqlDialect::MySql];

fn dialect_chain(names: &[String]) -> Vec<SqlDialect> {
    let mut chain: Vec<SqlDialect> = Vec::with_capacity(names.len() + 1);
    for name in names {
        let dialect = SqlDialect::from_name(name).unwrap_or(SqlDialect::Generic);
        if !chain.contains(&dialect) {
            chain.push(dialect);
        }
    }
    if !chain.contains(&SqlDialect::Generic) {
        chain.push(SqlDialect::Generic);
    }
    chain
}

fn extract_inner(sql: &str, opts: &ExtractOptions) -> Result<SqlSpec, SpecError> {
    let chain = dialect_chain(&opts.dialects);
    let mut first_error: Option<(SqlDialect, ParserError)> = None;
    for &dialect in &chain {
        match dialect.parse(sql, false) {
            Ok(statements) => return spec_of_statements(statements, dialect, sql, opts),
            Err(err) => {
                tracing::trace!(dialect = dialect.name(), error = %err, "sqlspec: dialect failed");
                let stop = matches!(err, ParserError::RecursionLimitExceeded);
                first_error.get_or_insert((dialect, err));
                if stop {
                    break;
                }
            }
        }
    }
    let recursion_limited = matches!(first_error, Some((_, ParserError::RecursionLimitExceeded)));
    if !recursion_limited {
        // Lenient retry: cleaned text with every dialect, or the original text with the lenient
        // dialects not tried yet.
        let cleaned = lenient_clean(sql);
        let (text, dialects): (&str, Vec<SqlDialect>) = match &cleaned {
            Some(text) => {
                let mut all = chain.clone();
                all.extend(LENIENT_DIALECTS.iter().filter(|d| !chain.contains(d)));
                (text.as_str(), all)
            }
            None => (
                sql,
                LENIENT_DIALECTS
                    .iter()
                    .copied()
                    .filter(|d| !chain.contains(d))
                    .collect(),
            ),
        };
        if super::trimmed(text).is_empty() {
            return Err(SpecError::Empty);
        }
        for dialect in dialects {
            if let Ok(statements) = dialect.parse(text, false) {
                tracing::debug!(
                    dialect = dialect.name(),
                    cleaned = cleaned.is_some(),
                    "sqlspec: parsed by the lenient retry"
                );
                return spec_of_statements(statements, dialect, text, opts);
            }
        }
    }
    let (dialect, err) = first_error.unwrap_or((
        SqlDialect::Generic,
        ParserError::ParserError("no dialect parsed the SQL".to_string()),
    ));
    // The same failed parse with spans, for a message that says where ("… at Line: 1,
    // Column: 8"); the recursion limit stops it as early as the first time.
    let located = match dialect.parse(sql, true) {
        Err(located) => located,
        Ok(_) => err,
    };
    Err(SpecError::Parse {
        dialect: dialect.name().to_string(),
        message: parser_message(&located),
    })
}

fn parser_message(err: &ParserError) -> String {
    match err {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m.clone(),
        ParserError::RecursionLimitExceeded => "recursion limit exceeded".to_string(),
    }
}

/// Classify parsed statements and walk the query.
fn spec_of_statements(
    statements: Vec<Statement>,
    dialect: SqlDialect,
    sql: &str,
    opts: &ExtractOptions,
) -> Result<SqlSpec, SpecError> {
    let statement = match statements.as_slice() {
        [] => return Err(SpecError::Empty),
        [single] => single,
        many => {
            return Err(SpecError::MultipleStatements { count: many.len() });
        }
    };
    let query = match statement {
        Statement::Query(query) => query,
        Statement::Insert(_) => return not_a_query("INSERT"),
        Statement::Update(_) => return not_a_query("UPDATE"),
        Statement::Delete(_) => return not_a_query("DELETE"),
        _ => return not_a_query(&leading_keyword(sql)),
    };
    match query.body.as_ref() {
        SetExpr::Insert(_) => return not_a_query("INSERT"),
        SetExpr::Update(_) => return not_a_query("UPDATE"),
        SetExpr::Delete(_) => return not_a_query("DELETE"),
        SetExpr::Merge(_) => return not_a_query("MERGE"),
        SetExpr::Select(select) if select.into.is_some() => return not_a_query("SELECT INTO"),
        _ => {}
    }
    match spec_of_query(query, dialect.double_quotes_are_strings()) {
        Ok(mut spec) => {
            spec.dialect = dialect.name().to_string();
            if opts.collect_references {
                spec.references = references_of_query(query).map(Box::new);
            }
            Ok(spec)
        }
        Err(too_deep) => Err(SpecError::Parse {
            dialect: dialect.name().to_string(),
            message: too_deep.to_string(),
        }),
    }
}

fn not_a_query(kind: &str) -> Result<SqlSpec, SpecError> {
    Err(SpecError::NotAQuery {
        kind: kind.to_string(),
    })
}
