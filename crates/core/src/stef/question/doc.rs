//! A tokenized question text ([`Doc`]) and its content-word set.

use std::borrow::Cow;

use crate::stef::text::{
    QuestionTexts, Token, TokenKind, WordSet, canonical_number, singular_form, strip_possessive,
};

use super::lexicon::number_word;

/// Lowercase singular words of Qu's word tokens (hyphenated words kept whole, and their parts);
/// look one up with [`WordSet::contains`].
pub(crate) fn word_set(doc: &Doc<'_>) -> WordSet {
    let mut words = WordSet::with_capacity(doc.lower.len() + 16, doc.toks.len() + 4);
    for i in 0..doc.toks.len() {
        let w = doc.w(i);
        if w.is_empty() {
            continue;
        }
        words.push(&stem_form(w));
        if let Some(hyphen) = w.bytes().position(|b| b == b'-') {
            // "double-bond" also says "double" and "bond"; "non-carcinogenic" says neither
            // "carcinogenic" nor anything positive.
            if !matches!(&w[..hyphen], "non" | "un" | "anti" | "not" | "in" | "dis") {
                for part in w.split('-').filter(|p| !p.is_empty()) {
                    words.push(&stem_form(part));
                }
            }
        } else if matches!(w, "not" | "non" | "no") {
            // "not carcinogenic" is "non-carcinogenic".
            let next = doc.w(i + 1);
            if !next.is_empty() {
                words.push(&stem_form(&format!("non-{next}")));
            }
        }
    }
    words
}

/// Crude stem for definition-subject matching: singular, minus `-ed`/`-ing` on long words.
#[cfg(test)]
pub(super) fn stem(w: &str) -> String {
    stem_form(w).into_owned()
}

/// The crude stem for definition-subject matching — singular, minus `-ed`/`-ing` on long
/// words — borrowed from `w` unless the singular changes a letter (`-ies` → `-y`).
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
