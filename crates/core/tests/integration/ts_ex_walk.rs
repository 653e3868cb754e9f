//! `ts_ex` reads every expression of a query: on every gold and predicted SQL in `shared/data`
//! (BIRD and Spider dev gold, three prediction files each), each string and number literal the
//! *tokenizer* sees — an account independent of any AST walk — is among the literals `ts_ex`
//! plants in generated databases ([`ts_ex::literals`]), and every table name written after
//! FROM / JOIN is among [`ts_ex::tables_read`]. A walk that skipped an expression kind (a
//! function's FILTER, a CASE inside a window, a subquery in a join) would miss its literals
//! and fail here; the hand-written walk this replaced failed it with 1,041 misses over the
//! 5,855 queries: LIMIT counts, every argument of `SUBSTR` (sqlparser's own `Expr::Substring`,
//! which its `_ => {}` skipped: `SUBSTR(atom_id, 7, 2) = '45'` compared nothing it knew) and the
//! conditions of subqueries joined in FROM (`JOIN (SELECT … WHERE bond_type = '=') AS T`).

use crate::support;

use sqlgrade_core::metrics::ts_ex::{Literal, literals, tables_read};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};
use support::{SQL_CORPUS, data_dir};

/// The literals and FROM / JOIN table names of `sql` as the tokenizer sees them. Numbers
/// inside a type's parentheses (`DECIMAL(10, 2)`) and strings after AS (an alias) are not
/// values and are left out.
fn tokens(sql: &str) -> Option<(Vec<String>, Vec<f64>, Vec<String>)> {
    let tokens: Vec<Token> = Tokenizer::new(&SQLiteDialect {}, sql)
        .tokenize()
        .ok()?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let (mut texts, mut numbers, mut tables) = (Vec::new(), Vec::new(), Vec::new());
    let mut in_type = false;
    for (i, token) in tokens.iter().enumerate() {
        let previous = i.checked_sub(1).and_then(|p| tokens.get(p));
        match token {
            Token::Word(w)
                if matches!(
                    w.keyword,
                    Keyword::DECIMAL | Keyword::NUMERIC | Keyword::VARCHAR | Keyword::CHAR
                ) =>
            {
                in_type = true
            }
            Token::RParen => in_type = false,
            // `AS 'name'` is an alias, not a value.
            Token::SingleQuotedString(s) if !matches!(previous, Some(Token::Word(p)) if p.keyword == Keyword::AS) => {
                texts.push(s.clone())
            }
            Token::Number(n, _) if !in_type => {
                if let Ok(x) = n.parse::<f64>() {
                    numbers.push(x);
                }
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    || w.quote_style == Some('`')
                    || w.quote_style == Some('"') =>
            {
                if let Some(Token::Word(p)) = previous
                    && matches!(p.keyword, Keyword::FROM | Keyword::JOIN)
                    && w.keyword != Keyword::SELECT
                    && !matches!(tokens.get(i + 1), Some(Token::LParen))
                {
                    tables.push(w.value.to_lowercase());
                }
            }
            _ => {}
        }
    }
    Some((texts, numbers, tables))
}

#[test]
fn every_literal_and_table_of_the_corpus_reaches_ts_ex() {
    let data = data_dir();
    let (mut queries, mut checked) = (0usize, 0usize);
    let mut failures: Vec<String> = Vec::new();
    for (file, field) in SQL_CORPUS {
        let path = data.join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let value: serde_json::Value = serde_json::from_str(line).expect("JSON line");
            let Some(sql) = value[field].as_str() else {
                continue;
            };
            queries += 1;
            let found = literals(sql);
            // Only queries the walk can parse (the rest have no literals by contract).
            if found.is_empty() && tables_read(sql).is_empty() {
                continue;
            }
            let Some((texts, numbers, tables)) = tokens(sql) else {
                continue;
            };
            checked += 1;
            for t in &texts {
                if !found.contains(&Literal::Text(t.clone())) {
                    failures.push(format!(
                        "{file}: text '{t}' not among the literals of: {sql}"
                    ));
                }
            }
            for x in &numbers {
                if !found.contains(&Literal::Number(*x)) {
                    failures.push(format!(
                        "{file}: number {x} not among the literals of: {sql}"
                    ));
                }
            }
            let read = tables_read(sql);
            for t in &tables {
                if !read.contains(t) {
                    failures.push(format!(
                        "{file}: table {t} not among the tables read by: {sql}"
                    ));
                }
            }
        }
    }
    println!("{checked} of {queries} queries checked");
    assert!(checked > 5_000, "{checked} of {queries}");
    assert!(
        failures.is_empty(),
        "{} misses:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}
