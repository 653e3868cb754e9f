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

/// Every lexicon in one map: word → bit set of the lists it belongs to, so a token's memberships
/// cost one lookup (SipHash lookups per list dominated the first profile). Hashed with
/// `rustc_hash`'s Fx, which reads a word several bytes at a time (a byte-at-a-time FNV-1a cost
/// ~1 % of an event's instructions); the keys are the fixed lists, so a hostile word costs one
/// probe like any other.
pub(super) static LEXICON: LazyLock<HashMap<&'static str, u32, FxBuildHasher>> =
    LazyLock::new(|| {
        let mut map: HashMap<&'static str, u32, FxBuildHasher> = HashMap::default();
        for (list, bit) in [
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
        ] {
            for w in list {
                *map.entry(w).or_insert(0) |= bit;
            }
        }
        map
    });

/// The lexicon bits of a (lowercase) word.
pub(super) fn lex(w: &str) -> u32 {
    if w.is_empty() || w.len() > 24 {
        return 0;
    }
    LEXICON.get(w).copied().unwrap_or(0)
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
