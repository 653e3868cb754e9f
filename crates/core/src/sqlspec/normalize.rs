//! Text normalization shared by the SQL side and (through the re-exports in `sqlspec`) the
//! question side, so that both sides compare names and values under the same rules (STEF §2.3).
//!
//! Everything here is allocation-light and regex-free: it runs for every identifier and literal
//! of every query.

/// Normalize an identifier: strip quoting (`"x"`, `` `x` ``, `[x]`), drop qualifiers
/// (`T1.Name` → `name`) and lowercase.
pub fn normalize_name(name: &str) -> String {
    let trimmed = name.trim();
    let last = last_name_part(trimmed);
    let unquoted = strip_identifier_quotes(last);
    lowercase(unquoted)
}

/// The last dot-separated part of a (possibly quoted) qualified name.
fn last_name_part(name: &str) -> &str {
    // Dots inside quotes belong to the identifier: scan from the end respecting quotes.
    let bytes = name.as_bytes();
    let Some(&last_byte) = bytes.last() else {
        return name;
    };
    let closing = match last_byte {
        b'"' => Some(b'"'),
        b'`' => Some(b'`'),
        b']' => Some(b'['),
        _ => None,
    };
    match closing {
        Some(open) => {
            // Find the matching opening quote before the last character.
            let body = &name[..name.len() - 1];
            match body.rfind(open as char) {
                Some(pos) => &name[pos..],
                None => name,
            }
        }
        None => match name.rfind('.') {
            Some(pos) => &name[pos + 1..],
            None => name,
        },
    }
}

/// Remove one level of identifier quoting.
fn strip_identifier_quotes(name: &str) -> &str {
    match name.as_bytes() {
        [b'"', .., b'"'] | [b'`', .., b'`'] | [b'[', .., b']'] => {
            name.get(1..name.len() - 1).unwrap_or(name)
        }
        _ => name,
    }
}

/// Lowercase with an ASCII fast path.
pub(crate) fn lowercase(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.to_lowercase()
    }
}

/// Append `s` lowercased to `out` (ASCII fast path, no intermediate allocation).
pub(crate) fn push_lowercase(out: &mut String, s: &str) {
    if s.is_ascii() {
        out.reserve(s.len());
        for c in s.chars() {
            out.push(c.to_ascii_lowercase());
        }
    } else {
        for c in s.chars() {
            out.extend(c.to_lowercase());
        }
    }
}

/// `text.trim()`, answered without decoding when both ends are printable ASCII (no whitespace
/// there, Unicode's included): most values, names and clauses are, and `str::trim` decodes a
/// character at each end to test it.
#[inline]
pub(crate) fn trimmed(text: &str) -> &str {
    match text.as_bytes() {
        [first, .., last] if first.is_ascii_graphic() && last.is_ascii_graphic() => text,
        [only] if only.is_ascii_graphic() => text,
        _ => text.trim(),
    }
}

/// Whether ASCII `bytes` needs no collapsing: no byte below `0x21` but spaces, and no space at
/// either end or next to another. Checked a `u64` word at a time; a word it cannot clear
/// (a control byte, two spaces, or a `!` after a space, which the test cannot tell from a
/// space) answers `false`, and the caller collapses the text the long way.
pub(crate) fn single_spaced(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    if bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ') {
        return false;
    }
    let mut chunks = bytes.chunks_exact(8);
    let mut space_before = false;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        // Lanes below 0x20 (ASCII: no lane has its high bit set).
        if word.wrapping_sub(ONES * 0x20) & !word & HIGHS != 0 {
            return false;
        }
        // Space lanes (exact up to the first; a lane after a space may be flagged too).
        let x = word ^ (ONES * u64::from(b' '));
        let spaces = x.wrapping_sub(ONES) & !x & HIGHS;
        if spaces & (spaces << 8) != 0 || (space_before && spaces & 0x80 != 0) {
            return false;
        }
        space_before = spaces >> 63 != 0;
    }
    for &b in chunks.remainder() {
        if b < 0x20 || (b == b' ' && space_before) {
            return false;
        }
        space_before = b == b' ';
    }
    true
}

/// Normalize a text value: lowercase, trim, collapse internal whitespace runs to one space, and
/// remove one level of surrounding quotes (`'x'`, `"x"`) if present.
pub fn normalize_text_value(value: &str) -> String {
    let v = unquoted_trimmed(value);
    if v.is_ascii() && single_spaced(v.as_bytes()) {
        // Nothing to collapse (most values): one copy, lowercased in place.
        return v.to_ascii_lowercase();
    }
    lowercase_collapsed_chars(v)
}

/// `value` trimmed, and without one pair of surrounding quotes, trimmed again.
fn unquoted_trimmed(value: &str) -> &str {
    let v = trimmed(value);
    match v.as_bytes() {
        [b'\'', .., b'\''] | [b'"', .., b'"'] => trimmed(v.get(1..v.len() - 1).unwrap_or(v)),
        _ => v,
    }
}

/// `v` lowercased character by character, each whitespace run one space, none at the ends.
fn lowercase_collapsed_chars(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut pending_space = false;
    for c in v.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Canonical form of a decimal number literal: `507.0` → `507`, `0.50` → `0.5`, `.5` → `0.5`,
/// `007` → `7`, `-0` → `0`, `1e3` → `1000`. `None` if `s` is not a plain decimal number.
pub fn canonical_number(s: &str) -> Option<String> {
    let s = trimmed(s);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    // A number starts with a digit or a period, with an exponent or without (text — most
    // literals and question values — is turned away here, before any scan or float parse).
    if !digits
        .as_bytes()
        .first()
        .is_some_and(|&c| c.is_ascii_digit() || c == b'.')
    {
        return None;
    }
    if digits.bytes().any(|c| c == b'e' || c == b'E') {
        return canonical_exponent(s);
    }
    let (int_part, frac_part) = match digits.find('.') {
        Some(pos) => (&digits[..pos], &digits[pos + 1..]),
        None => (digits, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|c| c.is_ascii_digit())
        || !frac_part.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let int_trimmed = int_part.trim_start_matches('0');
    let frac_trimmed = frac_part.trim_end_matches('0');
    let mut out = String::with_capacity(digits.len() + 2);
    let is_zero = int_trimmed.is_empty() && frac_trimmed.is_empty();
    if negative && !is_zero {
        out.push('-');
    }
    if int_trimmed.is_empty() {
        out.push('0');
    } else {
        out.push_str(int_trimmed);
    }
    if !frac_trimmed.is_empty() {
        out.push('.');
        out.push_str(frac_trimmed);
    }
    Some(out)
}

/// Numbers with an exponent: through f64 (exact for the magnitudes SQL literals use).
fn canonical_exponent(s: &str) -> Option<String> {
    let v: f64 = s.parse().ok()?;
    if !v.is_finite() {
        return None;
    }
    if v == 0.0 {
        return Some("0".to_string());
    }
    let text = format!("{v}");
    canonical_number(&text).or(Some(text))
}

/// A four-digit year (`"2023"`, `2023`, `"2023.0"` is not), as a number.
pub(crate) fn as_year(s: &str) -> Option<u32> {
    let s = s.trim();
    if s.len() == 4 && s.bytes().all(|c| c.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// Clean SQL for the lenient retry: extract the body of a markdown code fence, drop a leading
/// `SQL:` label and trailing semicolons / whitespace. Returns `None` when nothing changed.
pub(crate) fn lenient_clean(sql: &str) -> Option<String> {
    let mut text = sql.trim();
    if let Some(start) = text.find("```") {
        let after = &text[start + 3..];
        // Skip an info string such as `sql` up to the end of the line.
        let body_start = after.find('\n').map(|p| p + 1).unwrap_or(0);
        let after = &after[body_start..];
        let body = match after.find("```") {
            Some(end) => &after[..end],
            None => after,
        };
        text = body.trim();
    }
    for label in ["sql:", "sqlite:", "query:"] {
        if text.len() >= label.len()
            && text.is_char_boundary(label.len())
            && text[..label.len()].eq_ignore_ascii_case(label)
        {
            text = text[label.len()..].trim_start();
        }
    }
    let text = text.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    if text == sql {
        None
    } else {
        Some(text.to_string())
    }
}

/// The first keyword of a statement (comments and parentheses skipped), uppercased; for
/// `CREATE`/`DROP`/`ALTER` the object kind is appended (`DROP TABLE`).
pub(crate) fn leading_keyword(sql: &str) -> String {
    let mut rest = sql;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.find('\n').map(|p| &after[p + 1..]).unwrap_or("");
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map(|p| &after[p + 2..]).unwrap_or("");
        } else {
            break;
        }
    }
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
            .collect::<String>()
            .to_ascii_uppercase()
    };
    let first = word(rest);
    if matches!(first.as_str(), "CREATE" | "DROP" | "ALTER") {
        let after = rest[first.len()..].trim_start();
        let second = word(after);
        if !second.is_empty() {
            return format!("{first} {second}");
        }
    }
    if first.is_empty() {
        "UNKNOWN".to_string()
    } else {
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(normalize_name("T1.\"Name\""), "name");
        assert_eq!(normalize_name("`Full Name`"), "full name");
        assert_eq!(normalize_name("[a.b]"), "a.b");
        assert_eq!(normalize_name("s.t.Col"), "col");
        assert_eq!(normalize_name("Ünïcode"), "ünïcode");
    }

    #[test]
    fn values() {
        assert_eq!(normalize_text_value("  'Hello   World' "), "hello world");
        assert_eq!(normalize_text_value("\"China\""), "china");
        assert_eq!(normalize_text_value("ÉCOLE\t x"), "école x");
    }

    /// The single-spaced shortcut changes nothing: every question, evidence and SQL text of the
    /// shared data and its quoted literals, and random texts heavy in whitespace, quotes and
    /// capitals, normalized as the character loop alone normalizes them.
    #[test]
    fn text_values_are_normalized_as_by_the_character_loop() {
        let by_chars = |value: &str| lowercase_collapsed_chars(unquoted_trimmed(value));
        let texts = crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence", "gold_sql"],
        );
        let mut values: Vec<String> = texts
            .iter()
            .flat_map(|t| t.split('\'').skip(1).step_by(2).map(|v| format!("'{v}'")))
            .collect();
        values.extend(texts);
        assert!(values.len() > 4_000, "{} values", values.len());
        values.extend(crate::shared_data::random_texts(
            b" \t\n\x0b\x0c\raZ'\"!",
            20_000,
            12,
            0x0dd_c0ffee,
        ));
        values.extend(["\u{a0}x", "x\u{2003}y", "É  t", "'a'", "' A '", "\"\""].map(String::from));
        for value in &values {
            assert_eq!(normalize_text_value(value), by_chars(value), "{value:?}");
        }
        assert!(single_spaced(b"a b cd efgh ijklmno pq"));
        assert!(!single_spaced(b"a b  c"));
        assert!(!single_spaced(b" ab"));
        assert!(!single_spaced(b"abcdefg\t"));
    }

    #[test]
    fn numbers() {
        assert_eq!(canonical_number("507.0").as_deref(), Some("507"));
        assert_eq!(canonical_number("0.50").as_deref(), Some("0.5"));
        assert_eq!(canonical_number(".5").as_deref(), Some("0.5"));
        assert_eq!(canonical_number("007").as_deref(), Some("7"));
        assert_eq!(canonical_number("-0.0").as_deref(), Some("0"));
        assert_eq!(canonical_number("-12.30").as_deref(), Some("-12.3"));
        assert_eq!(canonical_number("1e3").as_deref(), Some("1000"));
        assert_eq!(canonical_number("abc"), None);
        assert_eq!(canonical_number("."), None);
        assert_eq!(canonical_number("-"), None);
        // Exponents with a sign or a leading period; text with an `e` and the float words that
        // `f64` parses are not numbers.
        assert_eq!(canonical_number("-.5e1").as_deref(), Some("-5"));
        assert_eq!(canonical_number("+2E2").as_deref(), Some("200"));
        assert_eq!(canonical_number(" 1.5e-1 ").as_deref(), Some("0.15"));
        for text in [
            "e5",
            "E",
            "inf",
            "-infinity",
            "NaN",
            "the",
            "-e3",
            "+-1e3",
            ".e3",
            "1e",
        ] {
            assert_eq!(canonical_number(text), None, "{text}");
        }
    }

    #[test]
    fn lenient() {
        assert_eq!(
            lenient_clean("```sql\nSELECT 1;\n```").as_deref(),
            Some("SELECT 1")
        );
        assert_eq!(lenient_clean("SQL: SELECT 1").as_deref(), Some("SELECT 1"));
        assert_eq!(lenient_clean("SELECT 1"), None);
    }

    #[test]
    fn keywords() {
        assert_eq!(leading_keyword("  -- hi\n drop table x"), "DROP TABLE");
        assert_eq!(leading_keyword("/* x */ INSERT INTO t"), "INSERT");
        assert_eq!(leading_keyword(""), "UNKNOWN");
    }
}
