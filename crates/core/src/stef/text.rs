//! Shared text helpers for STEF: value and name normalization, a small allocation-light
//! tokenizer for questions, and renderings of filters.
//!
//! Value normalization mirrors `sqlspec`'s literal normalization (lowercase, whitespace collapsed,
//! surrounding quotes removed, numbers canonical: `507.0` → `507`), so question values and SQL
//! literals compare like with like. Names are compared through [`name_key`], which also drops
//! table qualifiers and every non-alphanumeric character (`T1."Eye_Colour"` ≡ `eye colour`).

use std::borrow::Cow;

pub use crate::sqlspec::canonical_number;
use crate::sqlspec::{Filter, FilterOp, FilterValue, normalize_text_value};

/// Normalize a literal value exactly as sqlspec normalizes SQL literals: numeric strings become
/// canonical numbers (`507.0` → `507`), anything else goes through
/// [`crate::sqlspec::normalize_text_value`] (trim, one pair of quotes removed, whitespace
/// collapsed, lowercase).
pub fn normalize_value(raw: &str) -> String {
    let trimmed = crate::sqlspec::trimmed(strip_quotes(crate::sqlspec::trimmed(raw)));
    if let Some(n) = canonical_number(trimmed) {
        return n;
    }
    normalize_text_value(raw)
}

/// Longest text the lexical analysis looks at (per question text). Questions are sentences; a
/// multi-megabyte "question" is clipped so that scoring stays linear and bounded.
pub const MAX_TEXT_BYTES: usize = 32 * 1024;

/// `text` clipped to at most `max` bytes, at a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` clipped to at most `max` bytes at a character boundary, with `…` when something was
/// cut (evidence texts, prompt cells).
pub fn clip_marked(text: &str, max: usize) -> String {
    let clipped = clip(text, max);
    if clipped.len() == text.len() {
        clipped.to_string()
    } else {
        format!("{clipped}…")
    }
}

/// One clause of the evidence as every reader of the evidence needs it: the enrichment
/// validation, the required text, the definition matching and the formula check each read
/// every clause, and read it the same way, so it is split and read once per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvidenceClause<'a> {
    /// The clause as written.
    pub text: &'a str,
    /// `(subject, definition)` when the clause is a definition (`question::clauses_with_definitions`).
    pub definition: Option<(&'a str, &'a str)>,
}

/// A set of words held in one buffer, each word a range of it: a question's content words,
/// made with one buffer and one list instead of a `String` per word. Membership is a scan that
/// compares lengths first (a question has a few dozen words; sorting and deduplicating them cost
/// more than the lookups they would speed up).
#[derive(Debug, Clone, Default)]
pub struct WordSet {
    text: String,
    words: Vec<(usize, usize)>,
}

impl WordSet {
    /// An empty set whose buffer holds `bytes` and whose list holds `words` before growing.
    pub(crate) fn with_capacity(bytes: usize, words: usize) -> Self {
        WordSet {
            text: String::with_capacity(bytes),
            words: Vec::with_capacity(words),
        }
    }

    /// Add `word` (a repeat is harmless).
    pub(crate) fn push(&mut self, word: &str) {
        let start = self.text.len();
        self.text.push_str(word);
        self.words.push((start, self.text.len()));
    }

    /// Whether `word` is in the set.
    pub fn contains(&self, word: &str) -> bool {
        let text = self.text.as_bytes();
        self.words.iter().any(|&(start, end)| {
            end - start == word.len() && text.get(start..end) == Some(word.as_bytes())
        })
    }

    /// The words, in the order they were added (repeats included).
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.words
            .iter()
            .map(|&(start, end)| self.text.get(start..end).unwrap_or_default())
    }
}

/// One event's question texts as every phrase search reads them, built once per event: the
/// question and the enriched question clipped to [`MAX_TEXT_BYTES`] (a blank enriched question
/// is none), and both lowercased with whitespace collapsed ([`lower_collapsed`]). The question
/// extractor, the enrichment validation and the checks share it instead of lowercasing the same
/// texts again each (they did, seven times per event). The question's tokens, its
/// ASCII-lowercased copy (same byte offsets), its content-word set and the evidence's clauses
/// (both filled on first use) are shared the same way.
#[derive(Debug, Clone)]
pub struct QuestionTexts<'a> {
    /// The question, clipped.
    pub question: &'a str,
    /// The enriched question, clipped; `None` when absent or blank.
    pub enriched: Option<&'a str>,
    /// `lower_collapsed(question)`.
    pub question_lower: String,
    /// `lower_collapsed(enriched)`.
    pub enriched_lower: Option<String>,
    /// `tokenize(question)`.
    pub question_tokens: Vec<Token<'a>>,
    /// `question.to_ascii_lowercase()` (byte offsets as in `question`).
    pub question_ascii_lower: String,
    /// The question's content-word set, computed once when a definition needs it.
    pub question_words: std::cell::OnceCell<WordSet>,
    /// The enriched question without the question repeated at its start (BIRD's evidence is
    /// appended to the question), else the whole enriched question.
    pub evidence: Option<&'a str>,
    /// Whether the enriched question starts with the question verbatim.
    pub question_included: bool,
    /// The evidence's clauses, split and read once when first needed
    /// (`question::evidence_clauses`).
    pub evidence_clauses: std::cell::OnceCell<Vec<EvidenceClause<'a>>>,
    /// The question's structure read on its own (`question::extract`): the spec it states and
    /// which tokens it used, made once per event (the extraction and the enrichment validation
    /// both start from it).
    pub question_structure: std::cell::OnceCell<(crate::stef::QuestionSpec, Vec<bool>)>,
    /// Per evidence clause, whether it is a definition whose subject is about the question
    /// (`question::definition_relevance`), decided once when first needed.
    pub definition_relevance: std::cell::OnceCell<Vec<bool>>,
    /// The relevant definitions (`question::relevant_definitions`), subject and definition
    /// `lower_collapsed`, made once when first needed.
    pub relevant_definitions_lowered: std::cell::OnceCell<Vec<(String, String)>>,
    /// `words::text_words(question)`, split once when first needed ([`QuestionTexts::words`]).
    pub comparable_words: std::cell::OnceCell<Vec<String>>,
}

impl<'a> QuestionTexts<'a> {
    /// Clip, drop a blank enrichment, lowercase.
    pub fn new(question: &'a str, enriched: Option<&'a str>) -> Self {
        let question = clip(question, MAX_TEXT_BYTES);
        let enriched = enriched
            .filter(|e| !crate::sqlspec::trimmed(e).is_empty())
            .map(|e| clip(e, MAX_TEXT_BYTES));
        let appended = enriched.and_then(|e| {
            e.trim_start()
                .strip_prefix(crate::sqlspec::trimmed(question))
        });
        QuestionTexts {
            question,
            enriched,
            evidence: appended.or(enriched),
            question_included: appended.is_some(),
            evidence_clauses: std::cell::OnceCell::new(),
            definition_relevance: std::cell::OnceCell::new(),
            relevant_definitions_lowered: std::cell::OnceCell::new(),
            question_structure: std::cell::OnceCell::new(),
            question_lower: lower_collapsed(question),
            enriched_lower: enriched.map(lower_collapsed),
            question_tokens: tokenize(question),
            question_ascii_lower: question.to_ascii_lowercase(),
            question_words: std::cell::OnceCell::new(),
            comparable_words: std::cell::OnceCell::new(),
        }
    }

    /// The question's words in the comparable form (`words::text_words`), split once.
    pub fn words(&self) -> &[String] {
        self.comparable_words
            .get_or_init(|| crate::words::text_words(self.question))
    }
}

/// Remove one pair of matching surrounding quotes (`'x'`, `"x"`, `` `x` ``).
pub fn strip_quotes(s: &str) -> &str {
    let bytes = s.as_bytes();
    if bytes.len() >= 2 {
        let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
        if first == last && matches!(first, b'\'' | b'"' | b'`') {
            return &s[1..s.len() - 1];
        }
    }
    s
}

/// Comparison key of a column-ish name: lowercased, table qualifier dropped, quotes/brackets
/// removed, every non-alphanumeric character dropped. Function-call forms keep their function
/// name (`year(t.order_date)` → `yearorderdate`).
pub fn name_key(name: &str) -> String {
    if name.is_ascii() {
        // Bytes, not chars: no decoding per character; the key is ASCII, pushed as it is made
        // (no UTF-8 validation of the whole key afterwards).
        let mut key = String::with_capacity(name.len());
        let mut ident_start = 0usize;
        for b in name.bytes() {
            match b {
                b'.' => key.truncate(ident_start),
                b'(' | b',' | b' ' => ident_start = key.len(),
                b if b.is_ascii_alphanumeric() => key.push(char::from(b.to_ascii_lowercase())),
                _ => {}
            }
        }
        return key;
    }
    name_key_chars(name)
}

/// [`name_key`] char by char (any text; the ASCII path is the same rule on bytes).
fn name_key_chars(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    // Drop qualifiers: keep what follows the last '.' that is outside parentheses and quotes,
    // applied per identifier by resetting on '.'.
    let mut ident_start = 0usize;
    for ch in name.chars() {
        if ch == '.' {
            out.truncate(ident_start);
            continue;
        }
        if ch == '(' || ch == ',' || ch == ' ' {
            ident_start = out.len();
            continue;
        }
        if ch.is_alphanumeric() {
            for lower in ch.to_lowercase() {
                out.push(lower);
            }
        }
    }
    out
}

/// The words of a name, lowercased, split on non-alphanumerics and camelCase boundaries, with a
/// trailing plural `s` removed (`EyeColours` → `eye`, `colour`).
pub fn name_words(name: &str) -> Vec<String> {
    if name.is_ascii() {
        let mut words = Vec::new();
        // The same rule on bytes: each word is one lowercased slice of `name`.
        let bytes = name.as_bytes();
        let mut start: Option<usize> = None;
        let mut prev_lower = false;
        for (i, &b) in bytes.iter().enumerate() {
            if b.is_ascii_alphanumeric() {
                if b.is_ascii_uppercase()
                    && prev_lower
                    && let Some(s) = start
                {
                    words.push(name[s..i].to_ascii_lowercase());
                    start = Some(i);
                }
                start.get_or_insert(i);
                prev_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
            } else {
                prev_lower = false;
                if let Some(s) = start.take() {
                    words.push(name[s..i].to_ascii_lowercase());
                }
            }
        }
        if let Some(s) = start {
            words.push(name[s..].to_ascii_lowercase());
        }
        singular_in_place(&mut words);
        return words;
    }
    name_words_by_chars(name)
}

/// [`name_words`] by characters (any input; the ASCII path above gives the same words).
fn name_words_by_chars(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if ch.is_alphanumeric() {
            if ch.is_uppercase() && prev_lower && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
            for lower in ch.to_lowercase() {
                cur.push(lower);
            }
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    singular_in_place(&mut words);
    words
}

/// Replace every word by its [`singular`], reusing its allocation when the form is a prefix.
fn singular_in_place(words: &mut [String]) {
    for w in words {
        match singular_form(w) {
            Cow::Borrowed(form) => {
                let len = form.len();
                w.truncate(len);
            }
            Cow::Owned(form) => *w = form,
        }
    }
}

/// `word` without trailing possessive `'s` (what `trim_end_matches("'s")` does, without building
/// a substring searcher per call: this runs once per question word).
pub fn strip_possessive(word: &str) -> &str {
    let mut w = word;
    while let Some(rest) = w.strip_suffix("'s") {
        w = rest;
    }
    w
}

/// Naive English singular of a lowercase word (`categories` → `category`, `heroes` → `hero`,
/// `powers` → `power`; `class`, `status`, `bus` unchanged).
pub fn singular(word: &str) -> String {
    singular_form(word).into_owned()
}

/// [`singular`] without allocating unless the form changes a letter (`-ies` → `-y`): every other
/// singular is a prefix of the word.
pub fn singular_form(word: &str) -> Cow<'_, str> {
    let n = word.len();
    if n <= 3 || !word.ends_with('s') {
        return Cow::Borrowed(word);
    }
    if word.ends_with("ss") || word.ends_with("us") || word.ends_with("is") {
        return Cow::Borrowed(word);
    }
    if let Some(stem) = word.strip_suffix("ies")
        && stem.len() >= 2
    {
        return Cow::Owned(format!("{stem}y"));
    }
    for suffix in ["oes", "ses", "xes", "zes", "ches", "shes"] {
        if word.ends_with(suffix) {
            // `-oes` → `-o`, `-ches` → `-ch`: the suffix minus its `es`.
            return Cow::Borrowed(&word[..n - 2]);
        }
    }
    Cow::Borrowed(&word[..n - 1])
}

/// Whether two lowercase words name the same thing: equal singulars, one a prefix of the other
/// of at least five letters (`colour`/`colours`, `publish`/`publisher`), or one a suffix of the
/// other of at least four (`hero`/`superhero`).
pub fn words_match(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (sa, sb) = (singular_form(a), singular_form(b));
    if sa == sb {
        return true;
    }
    let (short, long) = if sa.len() <= sb.len() {
        (&sa, &sb)
    } else {
        (&sb, &sa)
    };
    short.len() >= 5 && long.starts_with(short.as_ref())
}

/// Comparison text of a filter value (`None` for non-literal values).
pub fn value_text(value: &FilterValue) -> Option<&str> {
    match value {
        FilterValue::Text(s) | FilterValue::Number(s) => Some(s.as_str()),
        _ => None,
    }
}

/// Render a filter value for display (`'china'`, `2023`, `('a', 'b')`, `<subquery>`).
pub fn render_value(value: &FilterValue) -> String {
    let mut out = String::new();
    push_value(&mut out, value);
    out
}

/// [`render_value`] appended to `out` (renderings run per filter per event: plain pushes, not
/// `format!`).
fn push_value(out: &mut String, value: &FilterValue) {
    match value {
        FilterValue::Text(s) => {
            out.push('\'');
            out.push_str(s);
            out.push('\'');
        }
        FilterValue::Number(s) | FilterValue::Column(s) | FilterValue::Expr(s) => out.push_str(s),
        FilterValue::List(items) => {
            out.push('(');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(out, item);
            }
            out.push(')');
        }
        FilterValue::Subquery => out.push_str("<subquery>"),
        FilterValue::Null => out.push_str("null"),
    }
}

/// Render an SQL filter as `lhs op rhs` (`IS NULL` forms without a right-hand side).
pub fn render_filter(filter: &Filter) -> String {
    let mut out = String::with_capacity(filter.lhs.len() + 24);
    out.push_str(&filter.lhs);
    out.push(' ');
    out.push_str(filter.op.symbol());
    if !matches!(filter.op, FilterOp::IsNull | FilterOp::IsNotNull) {
        out.push(' ');
        push_value(&mut out, &filter.rhs);
    }
    out
}

/// Render a question filter (`?` stands for an unknown dimension).
pub fn render_question_filter(filter: &super::QuestionFilter) -> String {
    let lhs = filter.lhs.as_deref().unwrap_or("?");
    let mut out = String::with_capacity(lhs.len() + filter.value.len() + 16);
    out.push_str(lhs);
    out.push(' ');
    out.push_str(filter.op.symbol());
    if !matches!(filter.op, FilterOp::IsNull | FilterOp::IsNotNull) {
        out.push(' ');
        if canonical_number(&filter.value).is_some() {
            out.push_str(&filter.value);
        } else {
            out.push('\'');
            out.push_str(&filter.value);
            out.push('\'');
        }
    }
    out
}

/// Kind of a question token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A run of letters/digits/underscores/apostrophes-inside-words/hyphens-inside-words.
    Word,
    /// A number (`12`, `3.5`, `-4` only when the sign stands alone before digits).
    Number,
    /// A quoted span (`'Super Strength'`, `"x"`); text excludes the quotes.
    Quoted,
    /// A single punctuation or operator character (or a two-char operator like `>=`).
    Punct,
}

/// One token with its byte span in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// Kind.
    pub kind: TokenKind,
    /// Source text (without quotes for [`TokenKind::Quoted`]).
    pub text: &'a str,
    /// Byte offset of `text` in the source.
    pub start: usize,
    /// Parenthesis depth at the token.
    pub depth: u32,
    /// Whether the token starts a sentence (first token, or after `.`, `?`, `!`, `;`, `:`).
    pub sentence_start: bool,
}

impl Token<'_> {
    /// Lowercase comparison helper.
    pub fn is(&self, word: &str) -> bool {
        self.text.eq_ignore_ascii_case(word)
    }

    /// Whether the word starts with an uppercase letter.
    pub fn is_capitalized(&self) -> bool {
        self.text.chars().next().is_some_and(char::is_uppercase)
    }
}

/// Split text into tokens. Apostrophes inside words (`hero's`, `don't`) stay in the word;
/// a quote at a word boundary opens a quoted span that closes at the next matching quote followed
/// by a non-word character (unterminated quotes become punctuation).
pub fn tokenize(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::with_capacity(text.len() / 4 + 4);
    let mut i = 0usize;
    let mut depth: u32 = 0;
    let mut sentence_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if b == b'\'' || b == b'"' || b == b'`' {
            let prev_is_word = i > 0 && is_word_byte(bytes[i - 1]);
            if !prev_is_word && let Some(close) = find_closing_quote(bytes, i + 1, b) {
                tokens.push(Token {
                    kind: TokenKind::Quoted,
                    text: &text[i + 1..close],
                    start: i + 1,
                    depth,
                    sentence_start,
                });
                sentence_start = false;
                i = close + 1;
                continue;
            }
            tokens.push(Token {
                kind: TokenKind::Punct,
                text: &text[i..i + 1],
                start,
                depth,
                sentence_start,
            });
            i += 1;
            continue;
        }
        if b.is_ascii_digit()
            || (b == b'.'
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
                && !prev_word(bytes, i))
        {
            let mut j = i;
            let mut seen_dot = false;
            while j < bytes.len() {
                let c = bytes[j];
                if c.is_ascii_digit() {
                    j += 1;
                } else if c == b'.' && !seen_dot && bytes.get(j + 1).is_some_and(u8::is_ascii_digit)
                {
                    seen_dot = true;
                    j += 1;
                } else if c == b',' && bytes.get(j + 1).is_some_and(u8::is_ascii_digit) && {
                    // Thousands separator: exactly three digits follow.
                    let end = j + 4;
                    end <= bytes.len()
                        && bytes[j + 1..end].iter().all(u8::is_ascii_digit)
                        && bytes.get(end).is_none_or(|c| !c.is_ascii_digit())
                } {
                    j += 1;
                } else {
                    break;
                }
            }
            // Digits glued to letters (`2nd`, `h2o`, `id123`, `3-D`) form a word.
            let glued = j < bytes.len()
                && (bytes[j].is_ascii_alphabetic()
                    || bytes[j] == b'_'
                    || (bytes[j] == b'-' && bytes.get(j + 1).is_some_and(u8::is_ascii_alphabetic)));
            if glued {
                let end = word_end(text, j);
                tokens.push(Token {
                    kind: TokenKind::Word,
                    text: &text[i..end],
                    start,
                    depth,
                    sentence_start,
                });
                sentence_start = false;
                i = end;
                continue;
            }
            tokens.push(Token {
                kind: TokenKind::Number,
                text: &text[i..j],
                start,
                depth,
                sentence_start,
            });
            sentence_start = false;
            i = j;
            continue;
        }
        // An ASCII byte is its character (no decoding on the common path).
        let ch = if b.is_ascii() {
            char::from(b)
        } else {
            text[i..].chars().next().unwrap_or(' ')
        };
        if ch.is_alphanumeric() || ch == '_' {
            let end = word_end(text, i);
            tokens.push(Token {
                kind: TokenKind::Word,
                text: &text[i..end],
                start,
                depth,
                sentence_start,
            });
            sentence_start = false;
            i = end;
            continue;
        }
        // Punctuation / operators.
        let len = ch.len_utf8();
        let two = if i + 2 <= bytes.len() {
            text.get(i..i + 2)
        } else {
            None
        };
        let (tok_len, is_two) = match two {
            Some(">=" | "<=" | "<>" | "!=" | "==") => (2, true),
            _ => (len, false),
        };
        let piece = &text[i..i + tok_len];
        match piece {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(Token {
            kind: TokenKind::Punct,
            text: piece,
            start,
            depth,
            sentence_start,
        });
        sentence_start = !is_two && matches!(piece, "." | "?" | "!" | ";" | ":" | "\n");
        i += tok_len;
    }
    tokens
}

fn prev_word(bytes: &[u8], i: usize) -> bool {
    i > 0 && is_word_byte(bytes[i - 1])
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// ASCII letters, digits and `_` (the bytes a word runs over), looked up in one load instead of
/// three range tests per byte.
static ASCII_WORD_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = byte.is_ascii_alphanumeric() || byte == b'_';
        b += 1;
    }
    table
};

/// End of a word starting at `i`: alphanumerics, `_`, and `'`/`-` between word characters.
fn word_end(text: &str, i: usize) -> usize {
    let bytes = text.as_bytes();
    let mut j = i;
    // ASCII fast path; at the first non-ASCII byte the character loop takes over.
    while let Some(&b) = bytes.get(j) {
        if ASCII_WORD_BYTES[usize::from(b)] {
            j += 1;
        } else if b == b'\'' || b == b'-' {
            match bytes.get(j + 1) {
                Some(next) if next.is_ascii_alphanumeric() => j += 2,
                Some(next) if !next.is_ascii() => return word_end_chars(text, j),
                _ => return j,
            }
        } else if b.is_ascii() {
            return j;
        } else {
            return word_end_chars(text, j);
        }
    }
    j
}

/// [`word_end`] by characters, from byte `i` on.
fn word_end_chars(text: &str, i: usize) -> usize {
    let mut end = i;
    let mut iter = text[i..].char_indices().peekable();
    while let Some((off, ch)) = iter.next() {
        if ch.is_alphanumeric() || ch == '_' {
            end = i + off + ch.len_utf8();
        } else if ch == '\'' || ch == '-' || ch == '’' {
            match iter.peek() {
                Some((_, next)) if next.is_alphanumeric() => {
                    end = i + off + ch.len_utf8();
                }
                _ => break,
            }
        } else {
            break;
        }
    }
    end
}

fn find_closing_quote(bytes: &[u8], from: usize, quote: u8) -> Option<usize> {
    let mut j = from;
    while j < bytes.len() {
        if bytes[j] == quote {
            // SQL-style doubled quote inside a literal.
            if bytes.get(j + 1) == Some(&quote) {
                j += 2;
                continue;
            }
            let next_is_word = bytes
                .get(j + 1)
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_');
            if !next_is_word {
                return Some(j);
            }
        }
        if bytes[j] == b'\n' {
            return None;
        }
        j += 1;
    }
    None
}

/// Longest needle [`find_bytes`] verifies at each occurrence of its first byte; a longer one
/// goes to `memchr::memmem`, whose search stays linear in the haystack whatever the input.
const SHORT_NEEDLE_BYTES: usize = 32;

/// Where `needle` first occurs in `haystack` (as `memchr::memmem::find`, and `str::find` for
/// text). The checks search the short texts of an event (a question, a clause, a filter, the
/// SQL) many times each, mostly for short words: building a searcher — `memmem`'s (pair
/// selection, a Rabin–Karp hash) or `str::find`'s two-way one — cost more than the search. A
/// short needle is found by `memchr` on its first byte and a comparison of the rest at each
/// hit, which needs no set-up and does at most [`SHORT_NEEDLE_BYTES`] byte comparisons per
/// haystack byte.
pub fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, rest)) = needle.split_first() else {
        return Some(0);
    };
    if needle.len() > SHORT_NEEDLE_BYTES {
        return memchr::memmem::find(haystack, needle);
    }
    let mut from = 0;
    while let Some(pos) = haystack.get(from..).and_then(|h| memchr::memchr(first, h)) {
        let at = from + pos;
        if haystack
            .get(at + 1..)
            .is_some_and(|after| after.starts_with(rest))
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The part of a dotted name after its last `.` (`t1.name` → `name`), the whole name without
/// one: `rsplit('.').next()` by one `memrchr`.
pub fn last_dotted_part(name: &str) -> &str {
    match memchr::memrchr(b'.', name.as_bytes()) {
        Some(dot) => name.get(dot + 1..).unwrap_or_default(),
        None => name,
    }
}

/// Where each occurrence of `needle` (not empty) starts in `haystack`, left to right and not
/// overlapping (as `str::match_indices`), found by [`find_bytes`]: no searcher built per call.
pub fn match_starts<'a>(haystack: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || {
        if needle.is_empty() {
            return None;
        }
        let at = from + find_bytes(haystack.as_bytes().get(from..)?, needle.as_bytes())?;
        from = at + needle.len();
        Some(at)
    })
}

/// Whether `needle` (already normalized/lowercase) occurs in `haystack` (lowercase) with word
/// boundaries on both sides (a boundary is a non-alphanumeric character or the text edge).
pub fn contains_phrase(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let hb = haystack.as_bytes();
    let mut from = 0usize;
    // `find_bytes` rather than `str::find`: this runs several times per event on short texts,
    // where building a searcher cost more than the search.
    while let Some(pos) = find_bytes(&hb[from..], needle.as_bytes()) {
        let at = from + pos;
        let end = at + needle.len();
        let left_ok = at == 0 || !is_alnum_before(haystack, at);
        let right_ok = end >= hb.len() || !is_alnum_at(haystack, end);
        if left_ok && right_ok {
            return true;
        }
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
        if from >= haystack.len() {
            break;
        }
    }
    false
}

fn is_alnum_before(s: &str, at: usize) -> bool {
    s[..at]
        .chars()
        .next_back()
        .is_some_and(char::is_alphanumeric)
}

fn is_alnum_at(s: &str, at: usize) -> bool {
    s[at..].chars().next().is_some_and(char::is_alphanumeric)
}

/// Lowercase and collapse whitespace (for phrase search in question text).
pub fn lower_collapsed(text: &str) -> String {
    if text.is_ascii() {
        if crate::sqlspec::single_spaced(text.as_bytes()) {
            // Already collapsed (most questions): one copy, lowercased in place.
            return text.to_ascii_lowercase();
        }
        let mut out = String::with_capacity(text.len());
        for w in text.split_ascii_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
        out.make_ascii_lowercase();
        return out;
    }
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        for lower in ch.to_lowercase() {
            out.push(lower);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `find_bytes` finds what `memchr::memmem::find` finds: every text of the shared data
    /// searched for the words and phrases the checks look for and for pieces of itself, and
    /// random texts over a four-letter alphabet (partial matches everywhere), with needles
    /// from empty to past the short-needle bound.
    #[test]
    fn find_bytes_finds_what_memmem_finds() {
        let mut texts = crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence", "gold_sql", "query"],
        );
        let mut state = 0x2d35_8dcc_aa6c_78a5_u64;
        let mut random = |len: usize| {
            (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(b"aab."[(state % 4) as usize])
                })
                .collect::<String>()
        };
        let mut needles: Vec<String> = [
            "",
            "a",
            ".*",
            "decimal",
            "round",
            "distinct",
            "group by",
            "number of",
            " is ",
            "select",
            "aab",
            "ba.",
            "aaaa",
        ]
        .map(String::from)
        .to_vec();
        for len in [
            1,
            2,
            3,
            5,
            8,
            SHORT_NEEDLE_BYTES,
            SHORT_NEEDLE_BYTES + 1,
            40,
        ] {
            needles.push(random(len));
            needles.push("a".repeat(len));
        }
        for len in [0, 1, 7, 64, 200] {
            for _ in 0..200 {
                texts.push(random(len));
            }
        }
        let mut found = 0;
        for text in &texts {
            let own: Vec<String> = [(0, 4), (3, 12), (10, 45)]
                .iter()
                .filter_map(|&(from, to)| text.get(from..to.min(text.len())).map(String::from))
                .collect();
            for needle in needles.iter().chain(&own) {
                let expected = memchr::memmem::find(text.as_bytes(), needle.as_bytes());
                assert_eq!(
                    find_bytes(text.as_bytes(), needle.as_bytes()),
                    expected,
                    "{needle:?} in {text:?}"
                );
                found += usize::from(expected.is_some_and(|at| at > 0));
            }
        }
        assert!(found > 10_000, "found past the start {found} times");
    }

    #[test]
    fn numbers_are_canonical() {
        assert_eq!(canonical_number("507.0").as_deref(), Some("507"));
        assert_eq!(canonical_number("0.50").as_deref(), Some("0.5"));
        assert_eq!(canonical_number("-0").as_deref(), Some("0"));
        assert_eq!(canonical_number("+007").as_deref(), Some("7"));
        assert_eq!(canonical_number(".5").as_deref(), Some("0.5"));
        assert_eq!(canonical_number("-"), None);
        assert_eq!(canonical_number(""), None);
    }

    #[test]
    fn values_normalize_like_sqlspec() {
        assert_eq!(normalize_value("  'Super   Strength' "), "super strength");
        assert_eq!(normalize_value("\"2023\""), "2023");
        assert_eq!(normalize_value("2023.0"), "2023");
        assert_eq!(normalize_value("-"), "-");
    }

    #[test]
    fn ascii_name_keys_are_the_char_by_char_keys() {
        let mut texts = crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence", "gold_sql", "query"],
        );
        texts.extend(crate::shared_data::random_texts(
            b"aZ9_.(, )'\"`[]-",
            20_000,
            12,
            0x6a09_e667_f3bc_c908_u64,
        ));
        let mut truncated = 0;
        for t in texts.iter().filter(|t| t.is_ascii()) {
            let expected = name_key_chars(t);
            assert_eq!(name_key(t), expected, "{t:?}");
            truncated += usize::from(t.contains('.') && !expected.is_empty());
        }
        assert!(truncated > 1_000, "{truncated} keys past a qualifier");
    }

    #[test]
    fn name_keys_drop_qualifiers_and_punctuation() {
        assert_eq!(name_key("T1.\"Eye_Colour\""), "eyecolour");
        assert_eq!(name_key("eye colour"), "eyecolour");
        assert_eq!(name_key("year(t.order_date)"), "yearorderdate");
        assert_eq!(name_words("EyeColours"), vec!["eye", "colour"]);
        assert_eq!(name_words("superhero_names"), vec!["superhero", "name"]);
    }

    #[test]
    fn tokenizer_handles_quotes_numbers_and_depth() {
        let toks =
            tokenize("How many heroes' powers are 'Super Strength' (AVG(x = 'o')) over 1,000.5?");
        let kinds: Vec<(TokenKind, &str)> = toks.iter().map(|t| (t.kind, t.text)).collect();
        assert!(kinds.contains(&(TokenKind::Quoted, "Super Strength")));
        assert!(kinds.contains(&(TokenKind::Number, "1,000.5")));
        let o = toks.iter().find(|t| t.text == "o").unwrap();
        assert_eq!((o.kind, o.depth), (TokenKind::Quoted, 2));
        assert!(toks[0].sentence_start && !toks[1].sentence_start);
        let toks = tokenize("Who is Hero's friend? Name them.");
        assert!(toks.iter().any(|t| t.text == "Hero's"));
        assert!(
            toks.iter()
                .find(|t| t.text == "Name")
                .unwrap()
                .sentence_start
        );
    }

    #[test]
    fn word_ends_agree_with_the_character_rule() {
        // The ASCII fast path must end every word where the character loop does, non-ASCII
        // letters, curly apostrophes and hyphens included.
        for text in [
            "Hero's powers",
            "l'été d'Anjou",
            "naïve-approach",
            "Women’s Soccer",
            "rock-'n'-roll",
            "x-é y'",
            "trailing-",
            "a'-b",
            "snake_case_2 'quoted'",
            "Ünïcode-ß's",
        ] {
            for i in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
                assert_eq!(
                    word_end(text, i),
                    word_end_chars(text, i),
                    "{text:?} at {i}"
                );
            }
        }
        assert_eq!(strip_possessive("Hero's"), "Hero");
        assert_eq!(strip_possessive("boss"), "boss");
        assert_eq!(singular_form("categories"), "category");
        assert_eq!(singular_form("matches"), "match");
        assert_eq!(singular_form("status"), "status");
        assert!(words_match("colours", "colour") && words_match("heroes", "hero"));
        assert_eq!(name_key("Größe.Ümlaut"), "ümlaut");
        for (name, words) in [
            ("T1.EyeColours", vec!["t1", "eye", "colour"]),
            ("superhero_names", vec!["superhero", "name"]),
            (
                "COUNT(DISTINCT molecule_id)",
                vec!["count", "distinct", "molecule", "id"],
            ),
            ("HTTPStatus2xx", vec!["httpstatus2xx"]),
            ("aB", vec!["a", "b"]),
        ] {
            assert_eq!(name_words(name), words, "{name}");
            assert_eq!(name_words_by_chars(name), words, "{name}");
        }
    }

    #[test]
    fn phrase_search_respects_word_boundaries() {
        assert!(contains_phrase(
            "heroes from marvel comics.",
            "marvel comics"
        ));
        assert!(!contains_phrase("non-carcinogenic", "carcinogen"));
        assert!(contains_phrase("label = '-'", "label"));
        assert!(!contains_phrase("abc", ""));
    }

    #[test]
    fn lower_collapsed_joins_ascii_words_with_one_space() {
        // ASCII whitespace runs become one space, none at either end, letters lowercased;
        // \x0b is not ASCII whitespace. Non-ASCII text takes the character path.
        let mut cases: Vec<String> = [
            "",
            "   ",
            "What IS  the\tname?",
            "\n a\r\nb \x0c c\x0bd ",
            "element = 'Cl'  AND\t\tlabel='+'",
        ]
        .map(String::from)
        .to_vec();
        // Every question and evidence text of the shared data, and random texts heavy in
        // whitespace runs and capitals.
        cases.extend(crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence"],
        ));
        assert!(cases.len() > 1_000, "{} texts", cases.len());
        cases.extend(crate::shared_data::random_texts(
            b" \t\n\r\x0c\x0baZ.'",
            20_000,
            16,
            0x9e37_79b9_7f4a_7c15,
        ));
        // Longer runs of letters, the bytes either side of 'A'..'Z' and of 0x20, and an
        // occasional space.
        cases.extend(crate::shared_data::random_texts(
            b"@AMZ[`amz{~!\x1f\x7fbQ ",
            20_000,
            48,
            0x2545_f491_4f6c_dd1d,
        ));
        for text in cases.iter().filter(|t| t.is_ascii()) {
            let expected = text
                .split_ascii_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_lowercase();
            assert_eq!(lower_collapsed(text), expected, "{text:?}");
        }
        assert_eq!(lower_collapsed("Évora  Est"), "évora est");
    }
}
