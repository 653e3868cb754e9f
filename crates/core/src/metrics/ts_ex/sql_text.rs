//! The SQL text `ts_ex` writes about values: identifiers and literals as SQLite reads them, and
//! a text's *shape* (digits and letters abstracted: `2020-03-10` → `9999-99-99`), which the
//! constraints mine from the data and the generators keep.
//!
//! Pure string functions, shared by the constraints' violation queries, the suite's checker and
//! its generators.

use crate::exec::SqlValue;

/// A SQL identifier, double-quoted.
pub fn quote_identifier(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// A value as a SQL literal.
pub fn sql_literal(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".into(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => format!("{f:?}"),
        SqlValue::Text(t) => format!("'{}'", t.replace('\'', "''")),
        SqlValue::Blob(b) => {
            let hex: String = b.iter().map(|byte| format!("{byte:02X}")).collect();
            format!("X'{hex}'")
        }
    }
}

/// A text's shape: each digit `9`, each letter `a`, every other character itself
/// (`TR001_10` → `aa999_99`, `2020-03-10` → `9999-99-99`).
pub fn shape_of(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_digit() {
                '9'
            } else if c.is_alphabetic() {
                'a'
            } else {
                c
            }
        })
        .collect()
}

/// A shape as a SQLite `GLOB` pattern (`9` → `[0-9]`, `a` → a letter, `*`, `?` and `[` in
/// brackets).
pub fn shape_glob(shape: &str) -> String {
    shape
        .chars()
        .map(|c| match c {
            '9' => "[0-9]".to_string(),
            'a' => "[A-Za-z]".to_string(),
            '*' | '?' | '[' => format!("[{c}]"),
            other => other.to_string(),
        })
        .collect()
}

/// `literal` made to fit `shape` by completing it with the rest of `like` (a value of that
/// shape): `2020` in a `9999-99-99` column with `2018-05-01` → `2020-05-01`. `None` when the
/// literal is not a start of the shape.
pub fn complete_to_shape(literal: &str, shape: &str, like: &str) -> Option<String> {
    let head = shape_of(literal);
    if head.is_empty() || !shape.starts_with(&head) || shape_of(like) != shape {
        return None;
    }
    let rest: String = like.chars().skip(head.chars().count()).collect();
    Some(format!("{literal}{rest}"))
}
