//! The text of the DDL files in `deploy/clickhouse/`: how a file splits into statements, the
//! guard a statement may carry (`-- migrate: skip if table NAME exists`), and the check that
//! skips a statement already applied. Pure string handling, shared by `migrate` (which runs the
//! statements) and `cluster` (which rewrites them for a cluster); no I/O.

/// The query that says whether `statement` is already applied, for DDL that has no
/// `IF NOT EXISTS` on every release: an `ALTER TABLE t ADD COLUMN c …` (one column per
/// statement; 18.16 has no `ADD COLUMN IF NOT EXISTS`) is skipped when `t` already has `c`. The
/// query returns a count; non-zero means skip.
pub fn skip_if(statement: &str) -> Option<String> {
    let (table, column) = added_column(statement)?;
    Some(column_exists(table, column))
}

/// `(table, column)` of an `ALTER TABLE t ADD COLUMN c …` that adds one plain-named column.
fn added_column(statement: &str) -> Option<(&str, &str)> {
    let words: Vec<&str> = statement.split_whitespace().collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let is = |i: usize, w: &str| upper.get(i).is_some_and(|u| u == w);
    if !(is(0, "ALTER") && is(1, "TABLE") && is(3, "ADD") && is(4, "COLUMN")) {
        return None;
    }
    let table = words.get(2)?.trim_matches('`');
    let column = words.get(5)?.trim_matches('`');
    if !(valid_identifier(table) && valid_identifier(column))
        || statement.matches("ADD COLUMN").count() > 1
    {
        return None;
    }
    Some((table, column))
}

fn column_exists(table: &str, column: &str) -> String {
    format!(
        "SELECT count() FROM system.columns WHERE database = currentDatabase() \
         AND table = '{table}' AND name = '{column}'"
    )
}

/// One statement of a migration file, with its guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL, comments removed.
    pub sql: String,
    /// From a `-- migrate: skip if table NAME exists` line right before the statement: the
    /// statement is skipped once `NAME` exists (for the steps of a table rebuild that must not
    /// run again after the swap, should a run be interrupted half way).
    pub skip_when_table_exists: Option<String>,
}

impl Statement {
    /// The query that says whether to skip the statement (a count; non-zero means skip): its
    /// guard line, else [`skip_if`]. `table` maps a table name to the one the query should
    /// look for (the local table on a cluster).
    pub fn skip_query(&self, table: impl Fn(&str) -> String) -> Option<String> {
        if let Some(name) = &self.skip_when_table_exists {
            return Some(format!(
                "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = '{}'",
                table(name)
            ));
        }
        let (named, column) = added_column(&self.sql)?;
        Some(column_exists(&table(named), column))
    }
}

const GUARD_PREFIX: &str = "migrate: skip if table ";
const GUARD_SUFFIX: &str = " exists";

/// Split a DDL file into statements: `;` ends a statement unless inside quotes; `--` line
/// comments are removed (a `-- migrate: skip if table NAME exists` line guards the statement
/// that follows it); empty statements are dropped.
pub fn statements(sql: &str) -> Vec<Statement> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut guard: Option<String> = None;
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    let mut finish = |current: &mut String, guard: &mut Option<String>| {
        let stmt = current.trim();
        if !stmt.is_empty() {
            statements.push(Statement {
                sql: stmt.to_string(),
                skip_when_table_exists: guard.take(),
            });
        }
        current.clear();
    };
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                current.push(c);
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        current.push(next);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    current.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    let mut comment = String::new();
                    for skipped in chars.by_ref() {
                        if skipped == '\n' {
                            current.push('\n');
                            break;
                        }
                        comment.push(skipped);
                    }
                    let text = comment.trim_start_matches('-').trim();
                    if let Some(name) = text
                        .strip_prefix(GUARD_PREFIX)
                        .and_then(|t| t.strip_suffix(GUARD_SUFFIX))
                        .filter(|n| valid_identifier(n))
                        && current.trim().is_empty()
                    {
                        guard = Some(name.to_string());
                    }
                }
                ';' => finish(&mut current, &mut guard),
                _ => current.push(c),
            },
        }
    }
    finish(&mut current, &mut guard);
    statements
}

/// The statements of a DDL file without their guards (see [`statements`]).
pub fn split_statements(sql: &str) -> Vec<String> {
    statements(sql).into_iter().map(|s| s.sql).collect()
}

pub(crate) fn valid_identifier(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
