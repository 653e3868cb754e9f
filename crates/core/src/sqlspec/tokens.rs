//! A fast tokenizer for the everyday shape of SQL that yields exactly sqlparser's tokens, and
//! defers to sqlparser's own tokenizer for everything else.
//!
//! Why: sqlparser's tokenizer walks a `Peekable<Chars>`, grows every word's `String` one `char`
//! at a time and binary-searches ~900 keywords per word. On the line-rate STEF path that was
//! 18 % of an event's instructions — more than the whole question-side analysis.
//!
//! What it promises: for input it accepts, [`tokenize`] pushes the token sequence sqlparser 0.63's
//! `Tokenizer` (with `unescape`, spans dropped) produces for the same dialect — token for token,
//! whitespace included — so the parse, and every row built from it, is unchanged. It accepts
//! ASCII text made of whitespace (space, tab, newline, CR), words (the dialect's identifier
//! characters), plain decimal numbers, single-quoted strings (doubled quotes unescaped),
//! identifiers quoted the dialect's way (`"x"`, `` `x` ``, `[x]`), and the common punctuation and
//! operators. It returns `false` — the caller then runs sqlparser's tokenizer on the same text —
//! on anything whose tokenization depends on the dialect in ways it does not model or that is
//! rare on the hot path: non-ASCII text, comments, prefixed literals (`X'…'`, `N'…'`, `E'…'`,
//! `b'…'`, `U&'…'`), exponents and hex numbers, backslashes in strings of dialects that escape
//! with them, triple-quoted strings, custom operators, placeholders, unterminated quotes.
//!
//! Dialect facts are read from sqlparser's own [`Dialect`] methods (once per dialect, see
//! [`DialectChars::of`]), not restated here. `tests/sqlspec_tokens.rs` checks the equality on
//! every gold and predicted query in `shared/data` for several dialects, and the unit tests below
//! on randomly assembled SQL-like text.

use std::sync::OnceLock;

use sqlparser::dialect::Dialect;
use sqlparser::keywords::{ALL_KEYWORDS, ALL_KEYWORDS_INDEX, Keyword};
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Whitespace, Word};

const IDENT_START: u8 = 1;
const IDENT_PART: u8 = 2;
const DELIMITED_START: u8 = 4;
const CUSTOM_OPERATOR_PART: u8 = 8;

/// What the fast path needs to know of one dialect, read from its [`Dialect`] methods.
#[derive(Debug)]
pub struct DialectChars {
    /// Per ASCII byte: `IDENT_START` | `IDENT_PART` | `DELIMITED_START` | `CUSTOM_OPERATOR_PART`.
    class: [u8; 128],
    /// `\` escapes inside string literals.
    backslash_escape: bool,
    /// `'''…'''` is a string: quotes are left to sqlparser.
    triple_quoted_strings: bool,
}

impl DialectChars {
    /// Ask `dialect` about every ASCII character once.
    pub fn of(dialect: &dyn Dialect) -> Self {
        let mut class = [0u8; 128];
        for (byte, flags) in class.iter_mut().enumerate() {
            let ch = char::from(byte as u8);
            if dialect.is_identifier_start(ch) {
                *flags |= IDENT_START;
            }
            if dialect.is_identifier_part(ch) {
                *flags |= IDENT_PART;
            }
            if dialect.is_delimited_identifier_start(ch) {
                *flags |= DELIMITED_START;
            }
            if dialect.is_custom_operator_part(ch) {
                *flags |= CUSTOM_OPERATOR_PART;
            }
        }
        DialectChars {
            class,
            backslash_escape: dialect.supports_string_literal_backslash_escape(),
            triple_quoted_strings: dialect.supports_triple_quoted_string(),
        }
    }

    fn has(&self, byte: Option<u8>, flag: u8) -> bool {
        byte.is_some_and(|b| {
            self.class
                .get(usize::from(b))
                .is_some_and(|c| c & flag != 0)
        })
    }
}

/// Tokenize `sql` into `out` (appending; spans empty), or return `false` — with `out` in an
/// unspecified state — when the text needs sqlparser's tokenizer (see the module docs).
pub fn tokenize(sql: &str, dialect: &DialectChars, out: &mut Vec<TokenWithSpan>) -> bool {
    if !sql.is_ascii() {
        return false;
    }
    let b = sql.as_bytes();
    let mut i = 0usize;
    while let Some(&c) = b.get(i) {
        let at = |k: usize| b.get(i + k).copied();
        let next = match c {
            b' ' => Some((1, Token::Whitespace(Whitespace::Space))),
            b'\t' => Some((1, Token::Whitespace(Whitespace::Tab))),
            b'\n' => Some((1, Token::Whitespace(Whitespace::Newline))),
            b'\r' => Some((
                if at(1) == Some(b'\n') { 2 } else { 1 },
                Token::Whitespace(Whitespace::Newline),
            )),
            b'(' => Some((1, Token::LParen)),
            b')' => Some((1, Token::RParen)),
            b',' => Some((1, Token::Comma)),
            b';' => Some((1, Token::SemiColon)),
            b'+' => Some((1, Token::Plus)),
            b'*' => Some((1, Token::Mul)),
            b'=' | b'!' | b'<' | b'>' | b'-' | b'/' | b'%' | b'|' | b':' | b'.' => {
                operator_at(b, i, dialect)
            }
            b'0'..=b'9' => number(b, i, dialect)
                .map(|end| (end - i, Token::Number(sql[i..end].to_string(), false))),
            b'\'' if !dialect.triple_quoted_strings => {
                quoted(sql, i, b'\'', dialect.backslash_escape)
                    .map(|(end, value)| (end - i, Token::SingleQuotedString(value)))
            }
            b'"' | b'`' | b'[' if dialect.has(Some(c), DELIMITED_START) => {
                delimited_identifier(sql, i, c)
            }
            c if (c.is_ascii_alphabetic() || c == b'_') && dialect.has(Some(c), IDENT_START) => {
                word(sql, i, dialect)
            }
            _ => None,
        };
        let Some((len, token)) = next else {
            return false;
        };
        out.push(TokenWithSpan {
            token,
            span: Span::empty(),
        });
        i += len;
    }
    true
}

/// The token of the operator or punctuation character at `i` (`=`, `!`, `<`, `>`, `-`, `/`, `%`,
/// `|`, `:`, `.`): its length and token, or `None` when sqlparser must decide (a comment, a
/// custom operator, a number starting with `.`).
#[inline]
fn operator_at(b: &[u8], i: usize, dialect: &DialectChars) -> Option<(usize, Token)> {
    let at = |k: usize| b.get(i + k).copied();
    // A binary operator that sqlparser extends with custom-operator characters: defer when
    // the next character would extend it.
    let operator = |len: usize, token: Token| {
        (!dialect.has(at(len), CUSTOM_OPERATOR_PART)).then_some((len, token))
    };
    match at(0)? {
        b'=' => match at(1) {
            Some(b'>') => Some((2, Token::RArrow)),
            Some(b'=') => Some((2, Token::DoubleEq)),
            _ => Some((1, Token::Eq)),
        },
        b'!' if at(1) == Some(b'=') => Some((2, Token::Neq)),
        b'<' => match at(1) {
            Some(b'=') => match at(2) {
                Some(b'>') => None,
                Some(b'+' | b'-') => Some((2, Token::LtEq)),
                _ => operator(2, Token::LtEq),
            },
            Some(b'>') => operator(2, Token::Neq),
            Some(b'+') => Some((1, Token::Lt)),
            Some(b'|' | b'<' | b'-' | b'^' | b'@') => None,
            _ => operator(1, Token::Lt),
        },
        b'>' => match at(1) {
            Some(b'=') => operator(2, Token::GtEq),
            Some(b'>' | b'^') => None,
            _ => operator(1, Token::Gt),
        },
        b'-' => match at(1) {
            Some(b'-' | b'>') => None,
            _ => operator(1, Token::Minus),
        },
        b'/' => match at(1) {
            Some(b'*' | b'/') => None,
            _ => Some((1, Token::Div)),
        },
        b'%' => match at(1) {
            Some(n) if n.is_ascii_whitespace() || n == 0x0b => Some((1, Token::Mod)),
            Some(_) if dialect.has(Some(b'%'), IDENT_START) => None,
            _ => operator(1, Token::Mod),
        },
        b'|' => match (at(1), at(2)) {
            (Some(b'|'), Some(b'/')) => None,
            (Some(b'|'), _) => operator(2, Token::StringConcat),
            _ => None,
        },
        b':' => match at(1) {
            Some(b':') => Some((2, Token::DoubleColon)),
            Some(b'=') => Some((2, Token::Assignment)),
            _ => Some((1, Token::Colon)),
        },
        b'.' => match at(1) {
            Some(n) if n.is_ascii_digit() || n == b'_' => None,
            _ => Some((1, Token::Period)),
        },
        _ => None,
    }
}

/// A delimited identifier opened by `open` (`"…"`, `` `…` ``, `[…]`) at `i`: its length and
/// token, or `None` when it is not closed.
#[inline]
fn delimited_identifier(sql: &str, i: usize, open: u8) -> Option<(usize, Token)> {
    let close = if open == b'[' { b']' } else { open };
    quoted(sql, i, close, false).map(|(end, value)| {
        let word = Word {
            value,
            quote_style: Some(char::from(open)),
            keyword: Keyword::NoKeyword,
        };
        (end - i, Token::Word(word))
    })
}

/// A word (keyword or identifier) starting at `i`: its length and token, or `None` when it is a
/// prefixed literal's prefix (`X'…'`, `N'…'`, `b"…"`, `U&'…'`, `nq'…'` and friends).
#[inline]
fn word(sql: &str, i: usize, dialect: &DialectChars) -> Option<(usize, Token)> {
    let b = sql.as_bytes();
    let mut end = i + 1;
    while dialect.has(b.get(end).copied(), IDENT_PART) {
        end += 1;
    }
    if matches!(b.get(end), Some(b'\'' | b'"' | b'&')) {
        return None;
    }
    let text = &sql[i..end];
    let word = Word {
        value: text.to_string(),
        quote_style: None,
        keyword: keyword(text),
    };
    Some((end - i, Token::Word(word)))
}

/// End of a plain decimal number starting at `start` (`12`, `1.5`, `3.`), or `None` when what
/// follows would make sqlparser read more (an exponent, a `0x` prefix, an `L` suffix, digit
/// separators, an identifier with a numeric prefix, a second period).
fn number(b: &[u8], start: usize, dialect: &DialectChars) -> Option<usize> {
    let digits_from = |mut at: usize| {
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        at
    };
    let mut end = digits_from(start);
    if b.get(end) == Some(&b'.') {
        end = digits_from(end + 1);
    }
    let next = b.get(end).copied();
    let extends = next.is_some_and(|n| n.is_ascii_alphanumeric() || matches!(n, b'_' | b'.'))
        || dialect.has(next, IDENT_PART);
    (!extends).then_some(end)
}

/// A quoted text opening at `start` and closing with `close` — a `'…'` literal or a quoted
/// identifier: its end and unescaped value (a doubled `close` stands for itself). `None` when
/// unterminated, or when `backslash_escape` and a backslash would be an escape.
fn quoted(sql: &str, start: usize, close: u8, backslash_escape: bool) -> Option<(usize, String)> {
    let b = sql.as_bytes();
    let mut value = String::new();
    let mut run = start + 1;
    loop {
        let end = run + b.get(run..)?.iter().position(|&c| c == close)?;
        let text = &sql[run..end];
        if backslash_escape && text.contains('\\') {
            return None;
        }
        value.push_str(text);
        if b.get(end + 1) == Some(&close) {
            value.push(char::from(close));
            run = end + 2;
        } else {
            return Some((end + 1, value));
        }
    }
}

/// Longest keyword, in bytes.
const MAX_KEYWORD_LEN: usize = 48;

/// Keywords sharing a first byte and a length, with their text.
type KeywordBucket = Vec<(&'static [u8], Keyword)>;

/// sqlparser's keywords bucketed by (first byte, length) ([`bucket`]): a lookup compares a
/// handful of candidates instead of binary-searching them all.
fn keyword_table() -> &'static [KeywordBucket] {
    static TABLE: OnceLock<Vec<KeywordBucket>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut buckets = vec![Vec::new(); 128 * (MAX_KEYWORD_LEN + 1)];
        for (text, &keyword) in ALL_KEYWORDS.iter().zip(ALL_KEYWORDS_INDEX) {
            if let Some(slot) = bucket(text.as_bytes()) {
                buckets[slot].push((text.as_bytes(), keyword));
            }
        }
        buckets
    })
}

fn bucket(word: &[u8]) -> Option<usize> {
    let first = usize::from(word.first()?.to_ascii_uppercase());
    (first < 128 && word.len() <= MAX_KEYWORD_LEN)
        .then(|| first * (MAX_KEYWORD_LEN + 1) + word.len())
}

/// The keyword an unquoted word is (ASCII case-insensitively), as sqlparser decides it. A
/// bucket holds ~7 keywords (28 for `S` and six letters): their last bytes are compared first,
/// so a word is compared in full with one candidate or none, mostly.
fn keyword(word: &str) -> Keyword {
    let word = word.as_bytes();
    let Some(&last) = word.last() else {
        return Keyword::NoKeyword;
    };
    let last = last.to_ascii_uppercase();
    bucket(word)
        .and_then(|slot| keyword_table().get(slot))
        .and_then(|candidates| {
            candidates.iter().find(|(text, _)| {
                text.last().map(u8::to_ascii_uppercase) == Some(last)
                    && text.eq_ignore_ascii_case(word)
            })
        })
        .map_or(Keyword::NoKeyword, |&(_, keyword)| keyword)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::{
        AnsiDialect, BigQueryDialect, ClickHouseDialect, DatabricksDialect, DuckDbDialect,
        GenericDialect, HiveDialect, MsSqlDialect, MySqlDialect, PostgreSqlDialect,
        RedshiftSqlDialect, SQLiteDialect, SnowflakeDialect,
    };
    use sqlparser::tokenizer::Tokenizer;

    fn reference(dialect: &dyn Dialect, sql: &str) -> Option<Vec<TokenWithSpan>> {
        let mut tokens = Vec::new();
        Tokenizer::new(dialect, sql)
            .with_unescape(true)
            .tokenize_with_location_into_buf_with_mapper(&mut tokens, |mut t| {
                t.span = Span::empty();
                t
            })
            .ok()?;
        Some(tokens)
    }

    /// Fast tokens equal sqlparser's whenever the fast path accepts; `true` if it accepted.
    fn check(dialect: &dyn Dialect, chars: &DialectChars, sql: &str) -> bool {
        let mut fast = Vec::new();
        if !tokenize(sql, chars, &mut fast) {
            return false;
        }
        assert_eq!(
            Some(fast),
            reference(dialect, sql),
            "tokens differ for {sql:?} in {dialect:?}"
        );
        true
    }

    fn dialects() -> Vec<Box<dyn Dialect>> {
        vec![
            Box::new(SQLiteDialect {}),
            Box::new(GenericDialect),
            Box::new(MySqlDialect {}),
            Box::new(PostgreSqlDialect {}),
            Box::new(AnsiDialect {}),
            Box::new(SnowflakeDialect),
            Box::new(BigQueryDialect),
            Box::new(MsSqlDialect {}),
            Box::new(ClickHouseDialect {}),
            Box::new(DuckDbDialect),
            Box::new(RedshiftSqlDialect {}),
            Box::new(HiveDialect {}),
            Box::new(DatabricksDialect),
        ]
    }

    #[test]
    fn everyday_sql_takes_the_fast_path_with_sqlparsers_tokens() {
        let sqlite = SQLiteDialect {};
        let chars = DialectChars::of(&sqlite);
        for sql in [
            "SELECT T1.name, COUNT(*) FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.sid \
             WHERE T2.year >= 2014 AND T1.country <> 'France' GROUP BY T1.name ORDER BY 2 DESC \
             LIMIT 3;",
            "select `Free Meal Count (K-12)` / `Enrollment (K-12)` from frpm where \"County Name\" = 'Alameda'",
            "SELECT [first name] FROM t WHERE a != 1.5 AND b <= 3. AND c = 'it''s' || x % 2",
            "SELECT CAST(a AS REAL) * 100 / b, a::int, x := 1 FROM t\r\nWHERE c <+ 1 AND d <=-2",
        ] {
            assert!(check(&sqlite, &chars, sql), "deferred: {sql}");
        }
    }

    #[test]
    fn unusual_text_is_left_to_sqlparser() {
        let sqlite = SQLiteDialect {};
        let chars = DialectChars::of(&sqlite);
        for sql in [
            "SELECT 'café'",
            "SELECT 1 -- comment",
            "SELECT /* c */ 1",
            "SELECT X'ab'",
            "SELECT 1e5",
            "SELECT 0x1F",
            "SELECT .5",
            "SELECT 'unterminated",
            "SELECT \"unterminated",
            "SELECT a ->> 'b'",
            "SELECT ?1",
            "SELECT $1",
            "SELECT a # b",
        ] {
            let mut out = Vec::new();
            assert!(!tokenize(sql, &chars, &mut out), "accepted: {sql}");
        }
        // Backslashes are plain characters in SQLite strings but escapes in MySQL's.
        assert!(check(&sqlite, &chars, r"SELECT 'a\'"));
        let mysql = MySqlDialect {};
        let mut out = Vec::new();
        assert!(!tokenize(
            r"SELECT 'a\'b'",
            &DialectChars::of(&mysql),
            &mut out
        ));
    }

    #[test]
    fn keywords_are_looked_up_as_sqlparser_does() {
        for text in ALL_KEYWORDS {
            for variant in [text.to_string(), text.to_lowercase(), {
                let mut mixed = text.to_lowercase();
                mixed[..1].make_ascii_uppercase();
                mixed
            }] {
                let Token::Word(expected) = Token::make_word(&variant, None) else {
                    unreachable!("make_word makes words")
                };
                assert_eq!(keyword(&variant), expected.keyword, "{variant}");
            }
        }
        for word in ["singer", "t1", "_x", "selectx", "a"] {
            let Token::Word(expected) = Token::make_word(word, None) else {
                unreachable!("make_word makes words")
            };
            assert_eq!(keyword(word), expected.keyword, "{word}");
        }
    }

    /// Random text assembled from SQL fragments and single characters, in every dialect: the
    /// fast path either defers or yields sqlparser's tokens.
    #[test]
    fn random_sql_like_text_tokenizes_as_sqlparser_does() {
        const FRAGMENTS: &[&str] = &[
            "SELECT",
            "select",
            "FROM",
            "where",
            "T1",
            "t.name",
            "x_1",
            "\"q\"",
            "\"a\"\"b\"",
            "`b c`",
            "[d]",
            "'s'",
            "'it''s'",
            "''",
            "12",
            "3.5",
            "7.",
            "0",
            "(",
            ")",
            ",",
            ";",
            "=",
            "==",
            "=>",
            "!=",
            "<>",
            "<=",
            ">=",
            "<",
            ">",
            "+",
            "-",
            "*",
            "/",
            "%",
            "||",
            "|",
            "::",
            ":",
            ".",
            " ",
            " ",
            " ",
            "\t",
            "\n",
            "\r\n",
            "\r",
            "AS",
            "e",
            "x",
            "N",
            "b",
            "u",
            "&",
            "'",
            "\"",
            "`",
            "[",
            "]",
            "\\",
            "#",
            "@",
            "$",
            "?",
            "~",
            "^",
            "_",
            "L",
            "1e",
            "--",
            "/*",
            "*/",
            "é",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for dialect in dialects() {
            let chars = DialectChars::of(dialect.as_ref());
            let mut accepted = 0;
            for _ in 0..20_000 {
                let len = 1 + (next() % 12) as usize;
                let sql: String = (0..len)
                    .map(|_| FRAGMENTS[(next() % FRAGMENTS.len() as u64) as usize])
                    .collect();
                if check(dialect.as_ref(), &chars, &sql) {
                    accepted += 1;
                }
            }
            assert!(accepted > 2_000, "{dialect:?}: only {accepted} accepted");
        }
    }
}
