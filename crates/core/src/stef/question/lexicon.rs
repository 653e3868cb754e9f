//! The lexicon: word lists the extractor recognises, one Fx-hashed map giving a word's list
//! memberships in one lookup, and number words.

use std::collections::HashMap;
use std::sync::LazyLock;

use rustc_hash::FxBuildHasher;

pub(super) const SUBJECT_STOP: u32 = 1 << 15;

pub(super) const SUBJECT_STOP_LIST: &[&str] =
    &["type", "types", "value", "values", "name", "names"];

pub(super) const MAX_WORDS: u32 = 1 << 7;

pub(super) const MAX_WORDS_LIST: &[&str] = &[
    "highest",
    "maximum",
    "max",
    "most",
    "largest",
    "biggest",
    "greatest",
    "tallest",
    "heaviest",
    "longest",
    "top",
    "richest",
    "strongest",
    "fastest",
    "oldest_age",
];

pub(super) const MIN_WORDS: u32 = 1 << 8;

pub(super) const MIN_WORDS_LIST: &[&str] = &[
    "lowest", "minimum", "min", "least", "smallest", "fewest", "shortest", "lightest", "weakest",
    "slowest", "cheapest",
];

pub(super) const ORDER_SUPERLATIVES: u32 = 1 << 11;

pub(super) const ORDER_SUPERLATIVES_LIST: &[&str] = &[
    "youngest",
    "oldest",
    "earliest",
    "latest",
    "newest",
    "best",
    "worst",
    "recent",
    "predominantly",
];

pub(super) const ORDER_WORDS: u32 = 1 << 12;

pub(super) const ORDER_WORDS_LIST: &[&str] = &[
    "ranked",
    "rank",
    "ranking",
    "sorted",
    "sort",
    "ordered",
    "descending",
    "ascending",
    "alphabetical",
    "alphabetically",
    "chronological",
    "chronologically",
    "desc",
    "asc",
];

pub(super) const COMPUTED_WORDS: u32 = 1 << 2;

pub(super) const COMPUTED_WORDS_LIST: &[&str] = &[
    "percentage",
    "percent",
    "ratio",
    "proportion",
    "difference",
    "divide",
    "divided",
    "rate",
];

pub(super) const DISTINCT_WORDS: u32 = 1 << 3;

pub(super) const DISTINCT_WORDS_LIST: &[&str] = &["distinct", "unique"];

pub(super) const AVG_WORDS: u32 = 1 << 0;

pub(super) const AVG_WORDS_LIST: &[&str] = &["average", "mean", "avg"];

pub(super) const LIST_VERBS: u32 = 1 << 6;

pub(super) const LIST_VERBS_LIST: &[&str] = &[
    "list",
    "name",
    "give",
    "show",
    "find",
    "provide",
    "state",
    "tell",
    "identify",
    "display",
    "return",
    "mention",
    "indicate",
    "describe",
    "enumerate",
];

/// Words that end a noun phrase (outputs, grouping dimensions, aggregation columns).
pub(super) const PHRASE_STOP: u32 = 1 << 14;

pub(super) const PHRASE_STOP_LIST: &[&str] = &[
    "otherwise",
    "namely",
    "of",
    "for",
    "from",
    "with",
    "in",
    "who",
    "that",
    "which",
    "whose",
    "where",
    "when",
    "by",
    "on",
    "at",
    "among",
    "if",
    "whether",
    "and",
    "or",
    "than",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "do",
    "does",
    "did",
    "to",
    "as",
    "per",
    "each",
    "every",
    "the",
    "a",
    "an",
    "there",
    "be",
    "been",
    "being",
    "can",
    "could",
    "will",
    "would",
    "should",
    "what",
    "how",
    "whom",
    "why",
    "it",
    "its",
    "their",
    "they",
    "them",
    "this",
    "these",
    "those",
    "all",
    "any",
    "not",
    "no",
    "into",
    "over",
    "under",
    "between",
    "after",
    "before",
    "during",
    "within",
    "refers",
    "refer",
    "means",
    "including",
    "along",
    "respectively",
    "please",
    "also",
    "only",
    "both",
    "whereas",
    "while",
    "but",
    "so",
    "such",
    "belong",
    "belongs",
    "got",
    "get",
];

/// Words skipped before an aggregation's column.
pub(super) const COLUMN_SKIP: u32 = 1 << 1;

pub(super) const COLUMN_SKIP_LIST: &[&str] = &[
    "of",
    "the",
    "a",
    "an",
    "number",
    "amount",
    "different",
    "distinct",
    "unique",
    "common",
    "frequent",
    "many",
    "much",
    "total",
    "count",
    "value",
    "values",
    "all",
    "overall",
];

/// Capitalised words that are never entities.
pub(super) const ENTITY_STOP: u32 = 1 << 4;

pub(super) const ENTITY_STOP_LIST: &[&str] = &[
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "list",
    "name",
    "give",
    "show",
    "find",
    "provide",
    "state",
    "tell",
    "identify",
    "indicate",
    "mention",
    "describe",
    "count",
    "compute",
    "calculate",
    "determine",
    "return",
    "write",
    "display",
    "among",
    "for",
    "in",
    "of",
    "the",
    "a",
    "an",
    "and",
    "or",
    "if",
    "then",
    "also",
    "only",
    "all",
    "each",
    "every",
    "between",
    "from",
    "to",
    "with",
    "by",
    "on",
    "at",
    "as",
    "that",
    "this",
    "these",
    "those",
    "it",
    "its",
    "they",
    "their",
    "there",
    "here",
    "i",
    "id",
    "ids",
    "sql",
    "yes",
    "no",
    "true",
    "false",
    "null",
    "refers",
    "refer",
    "means",
    "please",
    "evidence",
    "hint",
    "hints",
    "note",
    "question",
    "answer",
    "select",
    "sum",
    "avg",
    "max",
    "min",
    "divide",
    "multiply",
    "subtract",
    "add",
    "cast",
    "real",
    "iif",
    "case",
    "when",
    "else",
    "end",
    "not",
    "distinct",
    "where",
    "group",
    "order",
    "limit",
    "like",
    "substr",
    "strftime",
    "year",
    "date",
    "asc",
    "desc",
    "percentage",
    "ratio",
    "total",
    "average",
    "number",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "enumerate",
    "based",
    "according",
    "consider",
    "considering",
    "excluding",
    "including",
    "top",
    "most",
    "least",
    "highest",
    "lowest",
    "other",
    "others",
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "after",
    "before",
    "during",
    "since",
    "until",
    "per",
    "via",
    "using",
    "any",
    "both",
    "either",
    "neither",
    "over",
    "under",
];

pub(super) const PARTICIPLE_BY: u32 = 1 << 13;

pub(super) const PARTICIPLE_BY_LIST: &[&str] = &[
    "made",
    "written",
    "drawn",
    "held",
    "led",
    "run",
    "paid",
    "spent",
    "bought",
    "sold",
    "known",
    "taken",
    "given",
    "done",
    "seen",
    "won",
    "lost",
    "built",
    "caused",
    "owned",
    "driven",
    "ridden",
    "created",
    "multiply",
    "divide",
    "times",
    "rank",
    "sort",
    "order",
    "group",
    "followed",
    "accompanied",
    "represented",
    "identified",
];

/// Nouns that make "<noun> number of X" an attribute, not a count ("phone number of").
pub(super) const NUMBER_ATTRIBUTES: u32 = 1 << 10;

pub(super) const NUMBER_ATTRIBUTES_LIST: &[&str] = &[
    "phone",
    "contact",
    "telephone",
    "mobile",
    "serial",
    "id",
    "identification",
    "card",
    "account",
    "reference",
    "version",
    "model",
    "zip",
    "house",
    "street",
    "room",
    "jersey",
    "part",
    "order",
    "case",
    "file",
    "line",
    "page",
    "flight",
    "tracking",
    "registration",
    "policy",
    "license",
    "licence",
    "passport",
    "fax",
    "cell",
    "social",
    "security",
    "member",
    "student",
    "employee",
    "customer",
    "unit",
    "seat",
    "ticket",
    "invoice",
    "postal",
];

pub(super) const NUMBER_WORDS: &[(&str, u64)] = &[
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("twenty", 20),
];

pub(crate) fn number_word(w: &str) -> Option<u64> {
    NUMBER_WORDS.iter().find(|(n, _)| *n == w).map(|(_, v)| *v)
}

/// Every lexicon in one map: a word's bit set of the lists it belongs to, so a token's
/// memberships cost one lookup (SipHash lookups per list dominated the first profile). The key
/// is the word itself packed into an integer ([`packed_word`]: every list word is at most
/// [`MAX_LEXICON_WORD`] bytes), so a lookup hashes two words and compares two, with no string
/// hashing or `memcmp` per probe (a `&str`-keyed Fx map cost ~67 instructions per lookup, ~78
/// lookups per event). The keys are the fixed lists, so a hostile word costs one probe like any
/// other.
static LEXICON: LazyLock<HashMap<u128, u32, FxBuildHasher>> = LazyLock::new(|| {
    let mut map: HashMap<u128, u32, FxBuildHasher> = HashMap::default();
    for (list, bit) in LISTS {
        for w in list {
            // Every list word packs (a unit test holds the lists to it).
            if let Some(key) = packed_word(w) {
                *map.entry(key).or_insert(0) |= bit;
            }
        }
    }
    map
});

/// Every list with its bit.
const LISTS: [(&[&str], u32); 16] = [
    (AVG_WORDS_LIST, AVG_WORDS),
    (COLUMN_SKIP_LIST, COLUMN_SKIP),
    (COMPUTED_WORDS_LIST, COMPUTED_WORDS),
    (DISTINCT_WORDS_LIST, DISTINCT_WORDS),
    (ENTITY_STOP_LIST, ENTITY_STOP),
    (LESS_WORDS_LIST, LESS_WORDS),
    (LIST_VERBS_LIST, LIST_VERBS),
    (MAX_WORDS_LIST, MAX_WORDS),
    (MIN_WORDS_LIST, MIN_WORDS),
    (NOT_SUPERLATIVE_LIST, NOT_SUPERLATIVE),
    (NUMBER_ATTRIBUTES_LIST, NUMBER_ATTRIBUTES),
    (ORDER_SUPERLATIVES_LIST, ORDER_SUPERLATIVES),
    (ORDER_WORDS_LIST, ORDER_WORDS),
    (PARTICIPLE_BY_LIST, PARTICIPLE_BY),
    (PHRASE_STOP_LIST, PHRASE_STOP),
    (SUBJECT_STOP_LIST, SUBJECT_STOP),
];

/// The longest word a list may hold: [`packed_word`] keeps 15 bytes and the length.
const MAX_LEXICON_WORD: usize = 15;

/// A word of 1–15 bytes as one integer: its bytes little-endian in the low 120 bits (zeros
/// above the last), its length in the top byte — distinct words, distinct keys. Read with at
/// most two loads that may overlap (an overlapping byte is the same in both, so OR keeps it).
/// `None` for the empty word and longer ones (in no list).
fn packed_word(w: &str) -> Option<u128> {
    let b = w.as_bytes();
    let len = b.len();
    if len > MAX_LEXICON_WORD {
        return None;
    }
    let (first, last, width) = match b {
        [] => return None,
        [x] => (u64::from(*x), 0, 1),
        [x, y, ..] if len < 4 => {
            let last = b.last_chunk::<2>().map_or(0, |c| u16::from_le_bytes(*c));
            (u64::from(u16::from_le_bytes([*x, *y])), u64::from(last), 2)
        }
        [x, y, z, t, ..] if len < 8 => {
            let last = b.last_chunk::<4>().map_or(0, |c| u32::from_le_bytes(*c));
            (
                u64::from(u32::from_le_bytes([*x, *y, *z, *t])),
                u64::from(last),
                4,
            )
        }
        _ => (
            b.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c)),
            b.last_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c)),
            8,
        ),
    };
    // `last` holds bytes `len - width ..`; shifted to their place (at most bit 120).
    let bytes = u128::from(first) | (u128::from(last) << (8 * (len - width)));
    Some(bytes | ((len as u128) << 120))
}

/// The lexicon bits of a (lowercase) word.
pub(super) fn lex(w: &str) -> u32 {
    packed_word(w)
        .and_then(|key| LEXICON.get(&key).copied())
        .unwrap_or(0)
}

pub(super) fn is_in(list: u32, w: &str) -> bool {
    lex(w) & list != 0
}

pub(super) const NOT_SUPERLATIVE: u32 = 1 << 9;

pub(super) const NOT_SUPERLATIVE_LIST: &[&str] = &[
    "interest", "forest", "contest", "request", "protest", "harvest", "conquest", "manifest",
    "priest", "honest", "modest", "digest", "suggest", "invest", "latest", "earnest", "arrest",
    "behest", "bequest", "tempest", "inquest",
];

pub(super) const LESS_WORDS: u32 = 1 << 5;

pub(super) const LESS_WORDS_LIST: &[&str] = &[
    "less", "fewer", "lower", "smaller", "shorter", "younger", "lighter", "cheaper", "earlier",
    "lesser", "worse", "below",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The bits of a word straight from the lists: what [`lex`] must return.
    fn listed(w: &str) -> u32 {
        LISTS
            .iter()
            .filter(|(list, _)| list.contains(&w))
            .fold(0, |bits, (_, bit)| bits | bit)
    }

    #[test]
    fn every_list_word_packs() {
        for (list, _) in LISTS {
            for w in list {
                assert!(
                    packed_word(w).is_some(),
                    "{w:?} is longer than {MAX_LEXICON_WORD}"
                );
            }
        }
    }

    /// Packing is one-to-one: the integer gives the word back.
    #[test]
    fn packed_words_give_the_word_back() {
        let mut words: Vec<String> = vec!["a".into(), "ab".into(), "abc".into()];
        for len in 1..=MAX_LEXICON_WORD {
            let word: String = (0..len).map(|i| char::from(b'a' + i as u8)).collect();
            words.push(word.clone());
            words.push(word.to_uppercase());
            words.push(format!("{}\u{e9}", &word[..len.saturating_sub(2)]));
        }
        for w in words.iter().filter(|w| w.len() <= MAX_LEXICON_WORD) {
            let key = packed_word(w).expect("packs");
            let len = (key >> 120) as usize;
            let bytes: Vec<u8> = (0..len).map(|i| (key >> (8 * i)) as u8).collect();
            assert_eq!(len, w.len(), "{w:?}");
            assert_eq!(bytes, w.as_bytes(), "{w:?}");
            assert_eq!(
                (key & ((1u128 << 120) - 1)) >> (8 * len),
                0,
                "{w:?}: zeros above"
            );
        }
        assert_eq!(packed_word(""), None);
        assert_eq!(packed_word("abcdefghijklmnop"), None);
    }

    /// `lex` returns the lists' bits for every list word, every prefix and suffix of one, the
    /// shared data's question and evidence words (lowercased and as written), and random
    /// words over a small alphabet (near misses everywhere).
    #[test]
    fn lex_is_membership_in_the_lists() {
        let mut words: Vec<String> = Vec::new();
        for (list, _) in LISTS {
            for w in list {
                for cut in 0..=w.len() {
                    words.push(w[..cut].to_string());
                    words.push(w[cut..].to_string());
                }
                words.push(format!("{w}s"));
                words.push(w.to_uppercase());
            }
        }
        let texts = crate::shared_data::texts(
            &["bird/dev.jsonl", "spider/dev.jsonl"],
            &["question", "evidence"],
        );
        for text in &texts {
            for w in text.split(|c: char| !c.is_alphanumeric() && c != '_' && c != '\'') {
                words.push(w.to_string());
                words.push(w.to_lowercase());
            }
        }
        words.extend(crate::shared_data::random_texts(
            b"estaxm",
            20_000,
            18,
            0x9e37_79b9,
        ));
        for w in &words {
            assert_eq!(lex(w), listed(w), "{w:?}");
        }
        assert!(texts.len() > 1_000, "shared data");
        assert!(words.iter().filter(|w| lex(w) != 0).count() > 1_000);
    }
}
