//! Words of schema names and of questions, in one comparable form, so that a question's phrase
//! can be matched with a table or column name: `AvgScrRead`, `avg_scr_read`, "average scores in
//! Reading" and "the highest average score in reading" all come down to the same words
//! (`average score reading`).
//!
//! The rules, the same on both sides (so a match never depends on which side a word came from):
//! split at anything that is not a letter or digit and at camel-case humps (`MailStrAbr` →
//! `mail str abr`, `NCESDist` → `nces dist`); lowercase; expand the abbreviations schema names
//! use often ([`ABBREVIATIONS`]: `avg` → `average`, `scr` → `score`, `num` → `number`, …); fold
//! a plural to its singular ([`singular`]: `scores` → `score`, `cities` → `city`); drop the
//! function words that carry no meaning in a name ([`STOP_WORDS`]: "of", "the", "in", …).
//!
//! Pure and allocation-light: one `Vec<String>` per name or text. Schema names are split once
//! per catalogue load (`catalogue::DbSchema::words`); a question once per event.

use std::borrow::Cow;

/// Abbreviations common in schema names, with the word they stand for.
pub const ABBREVIATIONS: [(&str, &str); 22] = [
    ("abr", "abbreviation"),
    ("addr", "address"),
    ("amt", "amount"),
    ("avg", "average"),
    ("cnt", "count"),
    ("desc", "description"),
    ("dob", "birthday"),
    ("dt", "date"),
    ("enroll", "enrollment"),
    ("fname", "first"),
    ("lname", "last"),
    ("max", "maximum"),
    ("min", "minimum"),
    ("nbr", "number"),
    ("num", "number"),
    ("pct", "percent"),
    ("perc", "percent"),
    ("qty", "quantity"),
    ("scr", "score"),
    ("tst", "test"),
    ("takr", "taker"),
    ("yr", "year"),
];

/// Words that carry no meaning in a name or a phrase.
pub const STOP_WORDS: [&str; 24] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "does", "for", "from", "has", "have", "in",
    "is", "it", "its", "of", "on", "or", "that", "the", "to", "with",
];

/// The singular of an English plural (`scores` → `score`, `cities` → `city`, `classes` →
/// `class`, `matches` → `match`); other words unchanged. Short words and words that only look
/// plural (`status`, `class`, `analysis`) are left alone.
pub fn singular(word: &str) -> Cow<'_, str> {
    let n = word.len();
    if n < 4 || !word.ends_with('s') || ["ss", "us", "is"].iter().any(|s| word.ends_with(s)) {
        return Cow::Borrowed(word);
    }
    if let Some(stem) = word.strip_suffix("ies").filter(|s| s.len() >= 2) {
        return Cow::Owned(format!("{stem}y"));
    }
    if ["sses", "xes", "ches", "shes"]
        .iter()
        .any(|s| word.ends_with(s))
    {
        return Cow::Borrowed(&word[..n - 2]);
    }
    Cow::Borrowed(&word[..n - 1])
}

/// One word in the comparable form (lowercase input): abbreviation expanded, singular; `None`
/// when it is already in that form.
fn normal(word: &str) -> Option<String> {
    if let Some((_, full)) = ABBREVIATIONS.iter().find(|(a, _)| *a == word) {
        return Some((*full).to_string());
    }
    match singular(word) {
        Cow::Borrowed(s) if s.len() == word.len() => None,
        s => Some(s.into_owned()),
    }
}

/// Split at non-alphanumerics and camel-case humps, lowercased, before normalization.
fn raw_pieces(text: &str, split_camel: bool) -> Vec<String> {
    if text.is_ascii() {
        return ascii_pieces(text, split_camel);
    }
    raw_pieces_chars(text, split_camel)
}

/// [`raw_pieces`] of ASCII text, byte by byte: each piece is cut out of the text and lowercased
/// in one allocation of its own length (the questions of every event come this way).
fn ascii_pieces(text: &str, split_camel: bool) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    // Cuts fall between ASCII bytes, so every piece is a `str` of its own.
    let mut push = |piece: std::ops::Range<usize>| out.push(text[piece].to_ascii_lowercase());
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let mut start = i;
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            let (prev, c) = (bytes[i - 1], bytes[i]);
            if split_camel && c.is_ascii_uppercase() {
                let next_lower = bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase);
                if prev.is_ascii_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_ascii_uppercase() && next_lower)
                {
                    push(start..i);
                    start = i;
                }
            }
            i += 1;
        }
        push(start..i);
    }
    out
}

/// [`raw_pieces`] of any text, char by char (Unicode letters and digits, Unicode lowercase).
fn raw_pieces_chars(text: &str, split_camel: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev = None;
            continue;
        }
        if split_camel
            && !current.is_empty()
            && c.is_uppercase()
            && let Some(p) = prev
        {
            let next_lower = chars.peek().is_some_and(|n| n.is_lowercase());
            // `mailStreet` → `mail street`; `NCESDist` → `nces dist` (an upper before a lower
            // after a run of uppers starts a word).
            if p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next_lower) {
                out.push(std::mem::take(&mut current));
            }
        }
        if c.is_ascii() {
            current.push(c.to_ascii_lowercase());
        } else {
            current.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The words of a schema name (table or column, as written: `AvgScrRead`, `free meal count
/// (k-12)`, `team_long_name`), in order, stop words dropped.
pub fn identifier_words(name: &str) -> Vec<String> {
    let mut words = raw_pieces(name, true);
    words.retain(|w| !STOP_WORDS.contains(&w.as_str()));
    for w in &mut words {
        if let Some(n) = normal(w) {
            *w = n;
        }
    }
    words
}

/// The words of a natural-language text (a question, a natural column name), in order, stop
/// words dropped. Camel case inside the text is split too (a question that quotes a column).
pub fn text_words(text: &str) -> Vec<String> {
    identifier_words(text)
}

/// Whether `phrase` occurs in `words` as a contiguous run; returns where it starts.
pub fn find_phrase(words: &[String], phrase: &[String]) -> Option<usize> {
    if phrase.is_empty() || phrase.len() > words.len() {
        return None;
    }
    words.windows(phrase.len()).position(|w| w == phrase)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(text: &str) -> Vec<String> {
        text_words(text)
    }

    #[test]
    fn ascii_pieces_are_the_char_by_char_pieces() {
        // Every question and evidence text of the shared data, and random ASCII made of the
        // characters that decide a split (humps, digits, separators).
        let mut texts = crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence", "gold_sql", "query"],
        );
        let alphabet = b"aZbYc09 _-.(xXyA1Bq'";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            let len = (state % 12) as usize;
            let mut t = String::new();
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                t.push(char::from(
                    alphabet[(state % alphabet.len() as u64) as usize],
                ));
            }
            texts.push(t);
        }
        for t in texts.iter().filter(|t| t.is_ascii()) {
            for camel in [true, false] {
                assert_eq!(
                    ascii_pieces(t, camel),
                    raw_pieces_chars(t, camel),
                    "{t:?} camel={camel}"
                );
            }
        }
    }

    #[test]
    fn schema_names_and_questions_meet() {
        assert_eq!(identifier_words("AvgScrRead"), ["average", "score", "read"]);
        assert_eq!(
            w("average scores in Reading"),
            ["average", "score", "reading"]
        );
        assert_eq!(
            identifier_words("MailStrAbr"),
            ["mail", "str", "abbreviation"]
        );
        // Acronyms fold like words (`NCES` → `nce`): both sides fold alike, so they still meet.
        assert_eq!(identifier_words("NCESDist"), ["nce", "dist"]);
        assert_eq!(identifier_words("team_long_name"), ["team", "long", "name"]);
        assert_eq!(
            identifier_words("Free Meal Count (K-12)"),
            ["free", "meal", "count", "k", "12"]
        );
        assert_eq!(identifier_words("borderColor"), ["border", "color"]);
        assert_eq!(w("cities"), ["city"]);
        assert_eq!(w("classes status matches"), ["class", "status", "match"]);
        assert_eq!(
            w("the border colors of a card"),
            ["border", "color", "card"]
        );
    }

    #[test]
    fn phrases_are_contiguous() {
        let q = w("What is the border color of the card?");
        assert_eq!(find_phrase(&q, &identifier_words("borderColor")), Some(1));
        assert_eq!(find_phrase(&q, &w("card color")), None);
        assert_eq!(find_phrase(&q, &[]), None);
    }
}
