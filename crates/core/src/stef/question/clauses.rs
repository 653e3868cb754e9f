//! Reading the enriched question clause by clause: splitting, definitions (`X refers to …`),
//! declarations (`'v' is a …`), and whether a definition's subject is about the question.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::stef::text::{
    EvidenceClause, QuestionTexts, TokenKind, WordSet, lower_collapsed, tokenize,
};

use super::doc::{Doc, stem_form, word_set};
use super::lexicon::{ENTITY_STOP, PHRASE_STOP, SUBJECT_STOP, is_in};

/// The part of Qe that states requirements: every clause that is not a definition, plus the
/// constraint side of definitions whose subject is (mostly) made of Qu's words. Glossary
/// definitions about things Qu does not mention (`label = '+' means carcinogenic` for a question
/// about bond types) are dropped. Subjects of kept definitions are collected in `defined`.
///
/// The clauses are the evidence's, read once per event ([`evidence_clauses`],
/// [`definition_relevance`]); when Qe starts with Qu verbatim, Qe's own clauses (question
/// included) are read here.
pub(crate) fn required_text(
    texts: &QuestionTexts<'_>,
    enriched: &str,
    defined: &mut Vec<(String, String)>,
) -> String {
    let mut out = String::with_capacity(enriched.len());
    if texts.question_included {
        for (clause, definition) in clauses_with_definitions(enriched) {
            let relevant = || {
                definition
                    .is_some_and(|(subject, _)| subject_matches(subject, question_words(texts)))
            };
            push_required(
                texts,
                clause,
                definition,
                relevant,
                Some(&mut *defined),
                &mut out,
            );
        }
    } else {
        for (i, clause) in evidence_clauses(texts).iter().enumerate() {
            let relevant = || definition_relevance(texts).get(i).copied().unwrap_or(false);
            push_required(
                texts,
                clause.text,
                clause.definition,
                relevant,
                None,
                &mut out,
            );
        }
        // The kept definitions are the relevant ones, in order, lowercased once per event.
        defined.extend_from_slice(relevant_definitions_lowered(texts));
    }
    out
}

/// One clause's part of [`required_text`].
fn push_required(
    texts: &QuestionTexts<'_>,
    clause: &str,
    definition: Option<(&str, &str)>,
    relevant: impl FnOnce() -> bool,
    defined: Option<&mut Vec<(String, String)>>,
    out: &mut String,
) {
    let piece = match definition {
        None => match declared_value(clause) {
            // A declaration about a value Qu does not mention is glossary, too.
            Some(value) => {
                if !subject_matches(value, question_words(texts)) {
                    return;
                }
                value
            }
            None => clause,
        },
        Some((subject, definition)) => {
            if !relevant() {
                return;
            }
            if let Some(defined) = defined {
                defined.push((lower_collapsed(subject), lower_collapsed(definition)));
            }
            definition
        }
    };
    if !out.is_empty() {
        out.push_str(" ; ");
    }
    out.push_str(crate::sqlspec::trimmed(piece));
}

/// Qu's content-word set ([`word_set`]), made once per event when a definition needs it.
fn question_words<'t>(texts: &'t QuestionTexts<'_>) -> &'t WordSet {
    texts
        .question_words
        .get_or_init(|| word_set(&Doc::question(texts)))
}

/// The clauses of the event's evidence ([`QuestionTexts::evidence`]) with their definition
/// parts, split and read once per event: the enrichment validation, the required text, the
/// definition matching and the formula check all read them.
pub(crate) fn evidence_clauses<'t, 'a>(texts: &'t QuestionTexts<'a>) -> &'t [EvidenceClause<'a>] {
    texts.evidence_clauses.get_or_init(|| {
        texts
            .evidence
            .map(clauses_with_definitions)
            .unwrap_or_default()
            .into_iter()
            .map(|(text, definition)| EvidenceClause { text, definition })
            .collect()
    })
}

/// Per evidence clause ([`evidence_clauses`]): whether it is a definition whose subject is
/// (mostly) made of Qu's words ([`subject_matches`]), decided once per event.
pub(crate) fn definition_relevance<'t>(texts: &'t QuestionTexts<'_>) -> &'t [bool] {
    texts.definition_relevance.get_or_init(|| {
        evidence_clauses(texts)
            .iter()
            .map(|clause| {
                clause
                    .definition
                    .is_some_and(|(subject, _)| subject_matches(subject, question_words(texts)))
            })
            .collect()
    })
}

/// [`relevant_definitions`], subject and definition `lower_collapsed`, once per event (the
/// required text and the evidence checks both read them).
pub(crate) fn relevant_definitions_lowered<'t>(
    texts: &'t QuestionTexts<'_>,
) -> &'t [(String, String)] {
    texts.relevant_definitions_lowered.get_or_init(|| {
        relevant_definitions(texts)
            .into_iter()
            .map(|(subject, definition)| (lower_collapsed(subject), lower_collapsed(definition)))
            .collect()
    })
}

/// The definitions of Qe whose subject is (mostly) made of Qu's words, as written:
/// `(subject, definition)` — what the evidence checks hold the SQL to. Glossary definitions about
/// other things are left out, as in [`required_text`].
pub(crate) fn relevant_definitions<'e>(texts: &QuestionTexts<'e>) -> Vec<(&'e str, &'e str)> {
    evidence_clauses(texts)
        .iter()
        .zip(definition_relevance(texts))
        .filter(|(_, relevant)| **relevant)
        .filter_map(|(clause, _)| clause.definition)
        .map(|(subject, definition)| {
            (
                crate::sqlspec::trimmed(subject),
                crate::sqlspec::trimmed(definition),
            )
        })
        .collect()
}

/// `<value> is a|an|the <description>` ("'Vice President' is a position of Student Club",
/// "TR000 is the molecule id"): only the value is a requirement, the description names its
/// column. Returns the value part.
pub(super) fn declared_value(clause: &str) -> Option<&str> {
    // Searchers built once: this runs for every clause of every enriched question.
    static MARKERS: LazyLock<[Finder<'static>; 6]> = LazyLock::new(|| {
        [
            " is a ",
            " is an ",
            " is the ",
            " are the ",
            " are a ",
            " are ",
        ]
        .map(Finder::new)
    });
    let lower = clause.to_ascii_lowercase();
    for m in MARKERS.iter() {
        if let Some(pos) = m.find(lower.as_bytes()) {
            let value = crate::sqlspec::trimmed(clause.get(..pos)?);
            // Only short value-like subjects ('President', TR000, Women's Soccer), never prose
            // ("What is the …", "In how many atoms is …").
            let first = value
                .split_whitespace()
                .next()
                .map(|w| {
                    w.trim_matches(|c: char| !c.is_alphanumeric())
                        .to_ascii_lowercase()
                })
                .unwrap_or_default();
            let value_like = value
                .chars()
                .any(|c| c == '\'' || c == '"' || c.is_ascii_digit() || c.is_uppercase());
            let short = (1..=4).contains(&value.split_whitespace().count());
            if short && value_like && !has_constraint(value) && !is_in(ENTITY_STOP, &first) {
                return Some(value);
            }
            return None;
        }
    }
    None
}

/// Split text into clauses at `;`, newlines and sentence ends (`.`, `?`, `!` before whitespace
/// or the end), outside parentheses — clauses chaining definitions ("element = 'o' means
/// Oxygen, element = 's' means Sulfur") again at their commas — each with its definition parts
/// ([`definition_parts_at`]). The definition marker the split looks for in a clause (to tell
/// chained definitions apart) is the one its parts are cut at: found once per clause.
pub(crate) fn clauses_with_definitions(text: &str) -> Vec<(&str, Option<(&str, &str)>)> {
    split_marked(text)
        .into_iter()
        .map(|(clause, marker)| (clause, definition_parts_at(clause, marker)))
        .collect()
}

/// The clauses of `text`, each with its first definition marker ([`find_marker`]).
fn split_marked(text: &str) -> Vec<(&str, Option<(usize, usize)>)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        let end_here = match b {
            b'(' => {
                depth += 1;
                false
            }
            b')' => {
                depth -= 1;
                false
            }
            b';' | b'\n' => depth <= 0,
            b'.' | b'?' | b'!' => {
                let next_word = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                depth <= 0
                    && bytes.get(i + 1).is_none_or(|c| c.is_ascii_whitespace())
                    // `element ! = 'br'` is an operator, not a sentence end.
                    && !(b == b'!' && next_word == Some(&b'='))
            }
            _ => false,
        };
        if end_here {
            if let Some(piece) = text.get(start..i)
                && !crate::sqlspec::trimmed(piece).is_empty()
            {
                out.push(piece);
            }
            start = i + 1;
            depth = 0;
        }
    }
    if let Some(piece) = text.get(start..)
        && !crate::sqlspec::trimmed(piece).is_empty()
    {
        out.push(piece);
    }
    // "element = 'o' means Oxygen, element = 's' means Sulfur": chained definitions in one
    // clause are split at their commas.
    let mut split = Vec::with_capacity(out.len());
    for clause in out {
        let marker = find_marker(clause);
        if !marker.is_some_and(|first| has_marker_after(clause, first)) {
            split.push((clause, marker));
            continue;
        }
        let mut depth = 0i32;
        let mut from = 0usize;
        for (i, b) in clause.bytes().enumerate() {
            match b {
                b'(' => depth += 1,
                b')' => depth -= 1,
                b',' if depth <= 0 => {
                    if let Some(piece) = clause.get(from..i)
                        && !crate::sqlspec::trimmed(piece).is_empty()
                    {
                        split.push((piece, find_marker(piece)));
                    }
                    from = i + 1;
                }
                _ => {}
            }
        }
        if let Some(piece) = clause.get(from..)
            && !crate::sqlspec::trimmed(piece).is_empty()
        {
            split.push((piece, find_marker(piece)));
        }
    }
    split
}

/// Definition verbs (longest first where one is a prefix of another), matched as whole words.
pub(super) const DEFINITION_MARKERS: &[&str] = &[
    "refers to",
    "refer to",
    "refers",
    "refer",
    "means",
    "mean",
    "stands for",
    "is defined as",
    "indicates",
    "represents",
    "denotes",
];

/// Byte range (leading and trailing space included) of the first definition marker, scanning
/// word starts once (ASCII case-insensitive, no allocation).
pub(super) fn find_marker(text: &str) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    for i in 1..b.len() {
        if b[i - 1] != b' ' || !b[i].is_ascii_alphabetic() {
            continue;
        }
        let first = b[i].to_ascii_lowercase();
        if !matches!(first, b'r' | b'm' | b's' | b'i' | b'd') {
            continue;
        }
        for m in DEFINITION_MARKERS {
            let end = i + m.len();
            if end < b.len() && b[end] == b' ' && b[i..end].eq_ignore_ascii_case(m.as_bytes()) {
                return Some((i - 1, m.len() + 2));
            }
        }
    }
    None
}

/// Whether `text` has another definition marker after `first` (its first, [`find_marker`]).
fn has_marker_after(text: &str, (pos, len): (usize, usize)) -> bool {
    text.get(pos + len - 1..)
        .is_some_and(|rest| find_marker(rest).is_some())
}

/// Whether a piece of a clause states a constraint or a formula (comparison, function call).
pub(super) fn has_constraint(s: &str) -> bool {
    s.bytes().any(|b| matches!(b, b'=' | b'<' | b'>' | b'('))
        || s.split_ascii_whitespace().any(|w| {
            w.eq_ignore_ascii_case("like")
                || w.eq_ignore_ascii_case("in")
                || w.eq_ignore_ascii_case("between")
        })
}

/// Split a definition clause into (subject, definition): `<subject> refers to <definition>`,
/// `<definition> means <subject>`, `<multi-word subject> = <formula>`. `None` for clauses that
/// are not definitions.
///
/// `marker` is the clause's first definition marker ([`find_marker`]), found while splitting.
fn definition_parts_at(clause: &str, marker: Option<(usize, usize)>) -> Option<(&str, &str)> {
    if let Some((pos, len)) = marker {
        let left = clause.get(..pos)?;
        let right = clause.get(pos + len..)?;
        return if has_constraint(right) || !has_constraint(left) {
            Some((left, right))
        } else {
            Some((right, left))
        };
    }
    // `average number of oxygen atoms = AVG(...)`: a multi-word NL subject before `=`.
    let pos = clause.find('=')?;
    let left = clause.get(..pos)?.trim_end_matches(['!', '<', '>']);
    let words = left
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count();
    let identifier_like = left.contains(['_', '.', '(', '\'', '"']);
    if words >= 2 && !identifier_like && !has_constraint(left) {
        return Some((left, clause.get(pos + 1..)?));
    }
    None
}

/// Whether at least two thirds of a subject's content words are words of Qu (a hyphenated
/// subject word also matches when all of its parts are in Qu; Qu's `double-bond` also counts as
/// `double` and `bond`, but `non-carcinogenic` is never `carcinogenic`, and `not carcinogenic`
/// counts as `non-carcinogenic`). For `<noun> are|is <predicate>` subjects only the predicate is
/// compared.
pub(crate) fn subject_matches(subject: &str, qu_words: &WordSet) -> bool {
    // "molecules are carcinogenic": the predicate is the distinctive part.
    static COPULAS: LazyLock<[Finder<'static>; 2]> =
        LazyLock::new(|| [" are ", " is "].map(Finder::new));
    let lower = subject.to_ascii_lowercase();
    // The compared part: after the copula when there is one; `from` is where it starts.
    let from = COPULAS
        .iter()
        .find_map(|m| m.find(lower.as_bytes()).map(|pos| pos + m.needle().len()))
        .filter(|&from| subject.get(from..).is_some_and(|r| !r.trim().is_empty()))
        .unwrap_or(0);
    let Some(compared) = subject.get(from..) else {
        return false;
    };
    let in_question = |w: &str| qu_words.contains(&stem_form(w));
    let mut total = 0usize;
    let mut found = 0usize;
    for t in &tokenize(compared) {
        if t.kind != TokenKind::Word {
            continue;
        }
        // The word lowercased: the same bytes of the lowercased subject.
        let start = from + t.start;
        let Some(w) = lower.get(start..start + t.text.len()) else {
            continue;
        };
        if w.len() < 2 || is_in(PHRASE_STOP | SUBJECT_STOP, w) {
            continue;
        }
        total += 1;
        let hit = in_question(w)
            || (w.contains('-') && w.split('-').filter(|p| !p.is_empty()).all(&in_question));
        if hit {
            found += 1;
        }
    }
    total > 0 && found * 3 >= total * 2
}
