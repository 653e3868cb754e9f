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

/// The longest of [`ABBREVIATIONS`]' short forms and of [`STOP_WORDS`], in bytes: a longer word
/// is neither, and is not searched for in them.
const ABBREVIATION_MAX_LEN: usize = {
    let mut max = 0;
    let mut i = 0;
    while i < ABBREVIATIONS.len() {
        if ABBREVIATIONS[i].0.len() > max {
            max = ABBREVIATIONS[i].0.len();
        }
        i += 1;
    }
    max
};
const STOP_WORD_MAX_LEN: usize = {
    let mut max = 0;
    let mut i = 0;
    while i < STOP_WORDS.len() {
        if STOP_WORDS[i].len() > max {
            max = STOP_WORDS[i].len();
        }
        i += 1;
    }
    max
};

/// Whether `word` (lowercase) is one of [`STOP_WORDS`].
pub fn is_stop_word(word: &str) -> bool {
    word.len() <= STOP_WORD_MAX_LEN && STOP_WORDS.contains(&word)
}

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
    if word.len() <= ABBREVIATION_MAX_LEN
        && let Some((_, full)) = ABBREVIATIONS.iter().find(|(a, _)| *a == word)
    {
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
    let mut out = Vec::new();
    // Cuts fall between ASCII bytes, so every piece is a `str` of its own.
    ascii_piece_ranges(text, split_camel, |piece| {
        out.push(text[piece].to_ascii_lowercase())
    });
    out
}

/// Where [`ascii_pieces`] cuts ASCII `text`: each piece's byte range, in order, to `push`.
fn ascii_piece_ranges(text: &str, split_camel: bool, mut push: impl FnMut(std::ops::Range<usize>)) {
    let bytes = text.as_bytes();
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
    if name.is_ascii() {
        return ascii_identifier_words(name);
    }
    identifier_words_of_pieces(raw_pieces(name, true))
}

/// [`identifier_words`] from the name's pieces: stop words dropped, the rest normalized.
fn identifier_words_of_pieces(mut words: Vec<String>) -> Vec<String> {
    words.retain(|w| !is_stop_word(w));
    for w in &mut words {
        if let Some(n) = normal(w) {
            *w = n;
        }
    }
    words
}

/// Longest piece lowercased on the stack by [`ascii_identifier_words`]; longer ones are
/// lowercased into a `String` of their own.
const STACK_PIECE_BYTES: usize = 32;

/// [`identifier_words`] of an ASCII name (every question comes this way): each piece is
/// lowercased on the stack, so a stop word costs no allocation and a kept word one, of its
/// final form.
fn ascii_identifier_words(name: &str) -> Vec<String> {
    let mut words = Vec::with_capacity(name.len() / 6 + 1);
    ascii_piece_ranges(name, true, |range| {
        let piece = &name.as_bytes()[range.clone()];
        let mut stack = [0u8; STACK_PIECE_BYTES];
        let heap;
        let lower: &str = match stack.get_mut(..piece.len()) {
            // Already lowercase (most pieces): the name's own text, no copy to validate.
            _ if !piece.iter().any(u8::is_ascii_uppercase) => name.get(range).unwrap_or_default(),
            Some(buffer) => {
                for (to, from) in buffer.iter_mut().zip(piece) {
                    *to = from.to_ascii_lowercase();
                }
                // Lowercased ASCII is ASCII.
                std::str::from_utf8(buffer).unwrap_or_default()
            }
            None => {
                heap = String::from_utf8_lossy(piece).to_ascii_lowercase();
                &heap
            }
        };
        if !is_stop_word(lower) {
            words.push(normal(lower).unwrap_or_else(|| lower.to_string()));
        }
    });
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
        texts.extend(crate::shared_data::random_texts(
            b"aZbYc09 _-.(xXyA1Bq'",
            20_000,
            12,
            0x2545_f491_4f6c_dd1d_u64,
        ));
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
    fn ascii_names_give_the_words_of_their_pieces() {
        // Every question, evidence and SQL text of the shared data (words of every length,
        // stop words, abbreviations, plurals), long pieces past the stack buffer, and random
        // ASCII made of the characters that decide a cut or a fold.
        let mut texts = crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence", "gold_sql", "query"],
        );
        texts.extend([
            "a".repeat(STACK_PIECE_BYTES),
            "B".repeat(STACK_PIECE_BYTES + 1),
            format!("the {}ies of AvgScr", "x".repeat(40)),
            "Of THE Avg_scr NUM cities Classes".to_string(),
        ]);
        texts.extend(crate::shared_data::random_texts(
            b"aZs eiOfThN_1-(Av",
            20_000,
            14,
            0x9e37_79b9_7f4a_7c15_u64,
        ));
        let mut dropped = 0;
        for t in texts.iter().filter(|t| t.is_ascii()) {
            let pieces = ascii_pieces(t, true);
            let expected = identifier_words_of_pieces(pieces.clone());
            dropped += pieces.len() - expected.len();
            assert_eq!(ascii_identifier_words(t), expected, "{t:?}");
        }
        assert!(dropped > 1_000, "stop words dropped: {dropped}");
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
