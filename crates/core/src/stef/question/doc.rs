//! A tokenized question text ([`Doc`]) and its content-word set.

use std::borrow::Cow;

use crate::stef::text::{
    QuestionTexts, Token, TokenKind, canonical_number, singular_form, strip_possessive,
};

use super::lexicon::number_word;

/// Lowercase singular words of Qu's word tokens (hyphenated words kept whole), deduplicated and
/// ordered by [`word_order`] (look one up with [`word_set_contains`]).
pub(crate) fn word_set(doc: &Doc<'_>) -> Vec<String> {
    let mut words: Vec<String> = Vec::with_capacity(doc.toks.len() + 4);
    for i in 0..doc.toks.len() {
        let w = doc.w(i);
        if w.is_empty() {
            continue;
        }
        words.push(stem(w));
        if let Some((head, _)) = w.split_once('-') {
            // "double-bond" also says "double" and "bond"; "non-carcinogenic" says neither
            // "carcinogenic" nor anything positive.
            if !matches!(head, "non" | "un" | "anti" | "not" | "in" | "dis") {
                words.extend(w.split('-').filter(|p| !p.is_empty()).map(stem));
            }
        } else if matches!(w, "not" | "non" | "no") {
            // "not carcinogenic" is "non-carcinogenic".
            let next = doc.w(i + 1);
            if !next.is_empty() {
                words.push(stem(&format!("non-{next}")));
            }
        }
    }
    words.sort_unstable_by(|a, b| word_order(a, b));
    words.dedup();
    words
}

/// The order of a [`word_set`]: by length, then by bytes. Any total order serves a membership
/// test; this one settles most comparisons on the lengths, without comparing bytes.
fn word_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Whether `word` is in `set` (a [`word_set`]).
pub(crate) fn word_set_contains(set: &[String], word: &str) -> bool {
    set.binary_search_by(|w| word_order(w, word)).is_ok()
}

/// Crude stem for definition-subject matching: singular, minus `-ed`/`-ing` on long words.
pub(super) fn stem(w: &str) -> String {
    stem_form(w).into_owned()
}

/// [`stem`], borrowed from `w` unless the singular changes a letter (`-ies` → `-y`).
pub(super) fn stem_form(w: &str) -> Cow<'_, str> {
    let w = strip_possessive(w);
    let base = if w.len() > 5 {
        w.strip_suffix("ing")
            .or_else(|| w.strip_suffix("ed"))
            .unwrap_or(w)
    } else {
        w
    };
    singular_form(base)
}

/// A tokenized text with an ASCII-lowercased copy (same byte offsets).
pub(crate) struct Doc<'a> {
    pub(crate) text: &'a str,
    pub(crate) lower: &'a str,
    pub(crate) toks: &'a [Token<'a>],
}

impl<'a> Doc<'a> {
    /// The question of `texts`, with the tokens and lowercased copy made once per event.
    pub(crate) fn question(texts: &'a QuestionTexts<'_>) -> Doc<'a> {
        Doc {
            text: texts.question,
            lower: &texts.question_ascii_lower,
            toks: &texts.question_tokens,
        }
    }

    /// Lowercase text of token `i` if it is a word, else "".
    pub(super) fn w(&self, i: usize) -> &'a str {
        match self.toks.get(i) {
            Some(t) if t.kind == TokenKind::Word => self
                .lower
                .get(t.start..t.start + t.text.len())
                .unwrap_or(""),
            _ => "",
        }
    }

    pub(super) fn tok(&self, i: usize) -> Option<&Token<'a>> {
        self.toks.get(i)
    }

    pub(super) fn is_punct(&self, i: usize, p: &str) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| t.kind == TokenKind::Punct && t.text == p)
    }

    pub(super) fn number(&self, i: usize) -> Option<String> {
        let t = self.toks.get(i)?;
        match t.kind {
            TokenKind::Number => canonical_number(&t.text.replace(',', "")),
            TokenKind::Word => number_word(self.w(i)).map(|n| n.to_string()),
            _ => None,
        }
    }
}
