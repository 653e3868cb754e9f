//! BADGER Hybrid-EX: an LLM structural-alignment step (Stage 1) followed by fully deterministic
//! cell-level scoring (Stage 2, Algorithm 2 of the paper; see `shared/specs/badger.md` §2).
//!
//! Decisions (badger.md §6): union reading of the shared columns (A6), literal greedy denominator
//! (A5), duplicate index keys fall back to greedy (A7), index keys normalised by type before the
//! join (A8, flagged `key_normalisation`), numeric parsing per A12, dates per A14, type precedence
//! date > numeric > text (A15), C′ empty → 1.0 (A18), lowest index wins argmax ties (A19),
//! verdict `score ≥ cutoff` with cutoff 0.9 (A4). When Stage 1 fails, a deterministic heuristic
//! alignment is used (§2.5) and the row says `alignment_source = "heuristic"`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::exec::{ResultSet, SqlValue};
use crate::judge::StructuredJudge;
use crate::judge::structured::{ReplyCheck, ReplySchema, StructuredReply};

/// Hybrid-EX settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridOptions {
    /// Verdict cut-off θ (pass iff score ≥ θ).
    pub cutoff: f64,
    /// Default relative tolerance δ0.
    pub tolerance: f64,
}

impl HybridOptions {
    /// The verdict for `score`: it passes iff `score ≥ cutoff`.
    pub fn passes(&self, score: f64) -> bool {
        score >= self.cutoff
    }
}

impl Default for HybridOptions {
    fn default() -> Self {
        HybridOptions {
            cutoff: DEFAULT_CUTOFF,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

/// Default relative numeric tolerance δ0.
pub const DEFAULT_TOLERANCE: f64 = 0.01;
/// Default verdict cut-off θ.
pub const DEFAULT_CUTOFF: f64 = 0.9;
/// Rows per table shown to the Stage-1 judge.
pub const PREVIEW_ROWS: usize = 100;

/// Stage-1 `matching_category`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchCategory {
    /// Complete match.
    Complete,
    /// Near-complete match.
    NearComplete,
    /// Partial match.
    Partial,
    /// Overlap only.
    Overlap,
    /// No match.
    NoMatch,
}

/// Columns unique to each side (informational).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UniqueColumns {
    /// Gold-only columns.
    pub gold: Vec<String>,
    /// Prediction-only columns.
    pub pred: Vec<String>,
}

/// The Stage-1 structural alignment (badger.md §2.2 strict schema).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alignment {
    /// Overall match category.
    pub matching_category: Option<MatchCategory>,
    /// LLM-EX score in [0, 1].
    pub llm_judge_score: Option<f64>,
    /// Predicted column → gold column.
    pub column_rename_dict: BTreeMap<String, String>,
    /// Predicted-side helper columns that may be dropped.
    pub trivial_columns: Vec<String>,
    /// Join keys (gold names) for row alignment.
    pub index_columns: Vec<String>,
    /// Sort keys (unused by the score).
    pub order_columns: Vec<String>,
    /// Columns both sides share (informational).
    pub common_columns: Vec<String>,
    /// Columns unique to each side (informational).
    pub unique_columns: UniqueColumns,
    /// Numeric columns (gold names).
    pub numeric_columns: Vec<String>,
    /// Date columns (gold names).
    pub date_columns: Vec<String>,
    /// Exact-match columns (unused by the score).
    pub exact_match_columns: Vec<String>,
    /// Overrides δ0 when present.
    pub recommended_tolerance: Option<f64>,
    /// The judge's explanation.
    pub reasoning: String,
}

static ALIGNMENT_SCHEMA: LazyLock<ReplySchema> = LazyLock::new(|| {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    ReplySchema::new(
        "hybrid_ex_alignment",
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["matching_category", "llm_judge_score", "column_rename_dict",
                "trivial_columns", "index_columns", "order_columns", "common_columns",
                "unique_columns", "numeric_columns", "date_columns", "exact_match_columns",
                "recommended_tolerance", "reasoning"],
            "properties": {
                "matching_category": {"type": ["string", "null"],
                    "enum": ["complete", "near_complete", "partial", "overlap", "no_match", null]},
                "llm_judge_score": {"type": ["number", "null"]},
                "column_rename_dict": {"type": "object", "additionalProperties": {"type": "string"}},
                "trivial_columns": strings,
                "index_columns": strings,
                "order_columns": strings,
                "common_columns": strings,
                "unique_columns": {"type": "object", "additionalProperties": false,
                    "required": ["gold", "pred"],
                    "properties": {"gold": strings, "pred": strings}},
                "numeric_columns": strings,
                "date_columns": strings,
                "exact_match_columns": strings,
                "recommended_tolerance": {"type": ["number", "null"]},
                "reasoning": {"type": "string"}
            }
        }),
    )
});

impl StructuredReply for Alignment {
    fn schema() -> &'static ReplySchema {
        &ALIGNMENT_SCHEMA
    }

    fn validate(&self) -> Result<(), ReplyCheck> {
        if let Some(s) = self.llm_judge_score
            && !(0.0..=1.0).contains(&s)
        {
            return Err(ReplyCheck::new(
                "llm_judge_score",
                format!("{s} is outside [0, 1]"),
            ));
        }
        Ok(())
    }
}

impl Alignment {
    /// Drop (treat as absent) every field that references unknown columns or is out of range
    /// (badger.md §2.2 [R]); returns the names of the dropped fields.
    pub fn sanitize(&mut self, gold_cols: &[String], pred_cols: &[String]) -> Vec<&'static str> {
        let mut dropped = Vec::new();
        let gold: HashSet<&str> = gold_cols.iter().map(String::as_str).collect();
        let pred: HashSet<&str> = pred_cols.iter().map(String::as_str).collect();
        let targets: HashSet<&str> = self
            .column_rename_dict
            .values()
            .map(String::as_str)
            .collect();
        let injective = targets.len() == self.column_rename_dict.len();
        if !injective
            || self
                .column_rename_dict
                .iter()
                .any(|(p, g)| !pred.contains(p.as_str()) || !gold.contains(g.as_str()))
        {
            self.column_rename_dict.clear();
            dropped.push("column_rename_dict");
        }
        if self
            .trivial_columns
            .iter()
            .any(|c| !pred.contains(c.as_str()))
        {
            self.trivial_columns.clear();
            dropped.push("trivial_columns");
        }
        let renamed: HashSet<String> = pred_cols
            .iter()
            .map(|c| self.column_rename_dict.get(c).unwrap_or(c).clone())
            .collect();
        let known = |c: &String| gold.contains(c.as_str()) || renamed.contains(c);
        for (name, list) in [
            ("index_columns", &mut self.index_columns),
            ("numeric_columns", &mut self.numeric_columns),
            ("date_columns", &mut self.date_columns),
        ] {
            if !list.iter().all(known) {
                list.clear();
                dropped.push(name);
            }
        }
        if let Some(t) = self.recommended_tolerance
            && !(0.0..=0.5).contains(&t)
        {
            self.recommended_tolerance = None;
            dropped.push("recommended_tolerance");
        }
        dropped
    }
}

/// Which Stage-2 path produced the score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScorePath {
    /// One or both tables empty.
    Trivial,
    /// Outer join on the index columns.
    IndexMatched,
    /// Greedy best-row matching.
    IndexUnmatched,
}

/// The Stage-2 result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HybridScore {
    /// Score in [0, 1].
    pub score: f64,
    /// Path taken.
    pub path: ScorePath,
    /// Columns NaN-padded (n_∅).
    pub n_padded: usize,
    /// Rows matched.
    pub n_matched: usize,
    /// Rows without a partner.
    pub n_unmatched: usize,
    /// Why the index path was not taken although index columns were given.
    pub index_fallback: Option<&'static str>,
    /// Set when the tables were too large to score (`too_large`): score 0, never truncated.
    pub skip_reason: Option<&'static str>,
}

/// Largest |G|·|P̂| the greedy path scores (badger.md §5 [R] suggests about 5k × 5k; this is
/// 2k × 2k, because greedy is O(|G|·|P̂|·|C′|)). Larger pairs get `skip_reason = "too_large"`.
pub const GREEDY_PAIR_LIMIT: usize = 4_000_000;

/// How a cell is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CellType {
    Numeric,
    Date,
    Text,
}

fn is_null(v: &SqlValue) -> bool {
    match v {
        SqlValue::Null => true,
        SqlValue::Real(f) => !f.is_finite(),
        _ => false,
    }
}

/// Text form of a cell (for the text rule and CSV).
fn text_of(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => String::new(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(s) => s.clone(),
        SqlValue::Blob(b) => hex::encode(b),
    }
}

/// Numeric value of a cell (A12: native numbers; strings trimmed, one leading currency symbol
/// and thousands commas stripped, a trailing `%` dropped without scaling).
fn number_of(v: &SqlValue) -> Option<f64> {
    match v {
        SqlValue::Integer(i) => Some(*i as f64),
        SqlValue::Real(f) => f.is_finite().then_some(*f),
        SqlValue::Text(s) => {
            let t = s.trim();
            let t = t
                .strip_prefix(['$', '€', '£'])
                .unwrap_or(t)
                .trim_end_matches('%')
                .replace(',', "");
            t.trim().parse::<f64>().ok().filter(|f| f.is_finite())
        }
        _ => None,
    }
}

/// Date value of a cell as a UTC timestamp in seconds (A14).
fn date_of(v: &SqlValue) -> Option<i64> {
    let SqlValue::Text(s) = v else { return None };
    let t = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(d.timestamp());
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S%.f",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, fmt) {
            return Some(d.and_utc().timestamp());
        }
    }
    NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp())
}

fn text_match(g: &SqlValue, p: &SqlValue) -> bool {
    text_of(g).trim().to_lowercase() == text_of(p).trim().to_lowercase()
}

/// CELLMATCH of Algorithm 2.
fn cell_match(g: &SqlValue, p: &SqlValue, ty: CellType, delta: f64) -> f64 {
    let score = |b: bool| if b { 1.0 } else { 0.0 };
    match (is_null(g), is_null(p)) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        _ => {}
    }
    match ty {
        CellType::Numeric => match (number_of(g), number_of(p)) {
            (Some(a), Some(b)) => score((a - b).abs() / a.abs().max(b.abs()).max(1e-10) <= delta),
            _ => score(text_match(g, p)),
        },
        CellType::Date => match (date_of(g), date_of(p)) {
            (Some(a), Some(b)) => score(a == b),
            _ => score(text_match(g, p)),
        },
        CellType::Text => score(text_match(g, p)),
    }
}

/// A frame: unique column names and rows (missing cells are NULL).
struct Frame {
    columns: Vec<String>,
    rows: Vec<Vec<SqlValue>>,
}

impl Frame {
    fn from(rs: &ResultSet) -> Frame {
        Frame {
            columns: unique_names(&rs.columns),
            rows: rs.rows.clone(),
        }
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    fn cell(&self, row: usize, col: Option<usize>) -> &SqlValue {
        static NULL: SqlValue = SqlValue::Null;
        col.and_then(|c| self.rows.get(row).and_then(|r| r.get(c)))
            .unwrap_or(&NULL)
    }
}

/// Column names made unique (`name`, `name_2`, …), as data frames require.
pub fn unique_names(columns: &[String]) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    columns
        .iter()
        .map(|c| {
            let n = seen.entry(c.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                c.clone()
            } else {
                format!("{c}_{n}")
            }
        })
        .collect()
}

/// Stage 2: score `pred` against `gold` with alignment `meta` and default tolerance `delta0`.
/// Pure and deterministic.
pub fn score_tables(
    gold: &ResultSet,
    pred: &ResultSet,
    meta: &Alignment,
    delta0: f64,
) -> HybridScore {
    let trivial = |score: f64| HybridScore {
        score,
        path: ScorePath::Trivial,
        n_padded: 0,
        n_matched: 0,
        n_unmatched: 0,
        index_fallback: None,
        skip_reason: None,
    };
    match (gold.rows.is_empty(), pred.rows.is_empty()) {
        (true, true) => return trivial(1.0),
        (true, false) | (false, true) => return trivial(0.0),
        _ => {}
    }
    let delta = meta.recommended_tolerance.unwrap_or(delta0);
    let g = Frame::from(gold);
    let mut p = Frame::from(pred);
    // Drop trivial columns (unless renamed), then rename.
    let keep: Vec<usize> = (0..p.columns.len())
        .filter(|&i| {
            p.columns.get(i).is_none_or(|c| {
                !meta.trivial_columns.contains(c) || meta.column_rename_dict.contains_key(c)
            })
        })
        .collect();
    p = Frame {
        columns: keep
            .iter()
            .filter_map(|&i| p.columns.get(i))
            .map(|c| meta.column_rename_dict.get(c).unwrap_or(c).clone())
            .collect(),
        rows: p
            .rows
            .iter()
            .map(|r| keep.iter().filter_map(|&i| r.get(i).cloned()).collect())
            .collect(),
    };
    // Union of columns, gold first.
    let mut union: Vec<String> = g.columns.clone();
    for c in &p.columns {
        if !union.contains(c) {
            union.push(c.clone());
        }
    }
    let n_padded = union.iter().filter(|c| g.index(c).is_none()).count()
        + union.iter().filter(|c| p.index(c).is_none()).count();
    let ty = |c: &String| {
        if meta.date_columns.contains(c) {
            CellType::Date
        } else if meta.numeric_columns.contains(c) {
            CellType::Numeric
        } else {
            CellType::Text
        }
    };
    let compared: Vec<(Option<usize>, Option<usize>, CellType)> = union
        .iter()
        .filter(|c| !meta.index_columns.contains(c))
        .map(|c| (g.index(c), p.index(c), ty(c)))
        .collect();
    let row_score = |gi: usize, pi: usize| -> f64 {
        if compared.is_empty() {
            return 1.0;
        }
        let sum: f64 = compared
            .iter()
            .map(|&(gc, pc, t)| cell_match(g.cell(gi, gc), p.cell(pi, pc), t, delta))
            .sum();
        sum / compared.len() as f64
    };

    let mut index_fallback = None;
    if !meta.index_columns.is_empty() {
        let gk: Option<Vec<usize>> = meta.index_columns.iter().map(|c| g.index(c)).collect();
        let pk: Option<Vec<usize>> = meta.index_columns.iter().map(|c| p.index(c)).collect();
        match (gk, pk) {
            (Some(gk), Some(pk)) => {
                let types: Vec<CellType> = meta.index_columns.iter().map(ty).collect();
                let key = |f: &Frame, r: usize, cols: &[usize]| -> Vec<String> {
                    cols.iter()
                        .zip(&types)
                        .map(|(&c, &t)| key_text(f.cell(r, Some(c)), t))
                        .collect()
                };
                let gkeys: Vec<Vec<String>> = (0..g.rows.len()).map(|r| key(&g, r, &gk)).collect();
                let pkeys: Vec<Vec<String>> = (0..p.rows.len()).map(|r| key(&p, r, &pk)).collect();
                let unique =
                    |keys: &[Vec<String>]| keys.iter().collect::<HashSet<_>>().len() == keys.len();
                if unique(&gkeys) && unique(&pkeys) {
                    let by_key: HashMap<&Vec<String>, usize> =
                        pkeys.iter().enumerate().map(|(i, k)| (k, i)).collect();
                    let mut total = 0.0;
                    let mut matched = 0;
                    let mut used = HashSet::new();
                    for (gi, k) in gkeys.iter().enumerate() {
                        if let Some(&pi) = by_key.get(k) {
                            total += row_score(gi, pi);
                            matched += 1;
                            used.insert(pi);
                        }
                    }
                    let unmatched = (g.rows.len() - matched) + (p.rows.len() - used.len());
                    let all = matched + unmatched;
                    return HybridScore {
                        score: if all == 0 { 1.0 } else { total / all as f64 },
                        path: ScorePath::IndexMatched,
                        n_padded,
                        n_matched: matched,
                        n_unmatched: unmatched,
                        index_fallback: None,
                        skip_reason: None,
                    };
                }
                index_fallback = Some("duplicate_keys");
            }
            _ => index_fallback = Some("index_column_missing"),
        }
    }
    // Greedy path.
    if g.rows.len().saturating_mul(p.rows.len()) > GREEDY_PAIR_LIMIT {
        return HybridScore {
            score: 0.0,
            path: ScorePath::IndexUnmatched,
            n_padded,
            n_matched: 0,
            n_unmatched: g.rows.len().max(p.rows.len()),
            index_fallback,
            skip_reason: Some("too_large"),
        };
    }
    let mut remaining: Vec<usize> = (0..p.rows.len()).collect();
    let mut total = 0.0;
    let mut matched = 0usize;
    for gi in 0..g.rows.len() {
        let mut best: Option<(usize, f64)> = None;
        for (slot, &pi) in remaining.iter().enumerate() {
            let s = row_score(gi, pi);
            if best.is_none_or(|(_, b)| s > b) {
                best = Some((slot, s));
            }
        }
        let Some((slot, s)) = best else { break };
        remaining.remove(slot);
        total += s;
        matched += 1;
    }
    HybridScore {
        score: if matched == 0 {
            0.0
        } else {
            total / matched as f64
        },
        path: ScorePath::IndexUnmatched,
        n_padded,
        n_matched: matched,
        n_unmatched: g.rows.len().max(p.rows.len()) - matched,
        index_fallback,
        skip_reason: None,
    }
}

/// Join-key normalisation by type (A8).
fn key_text(v: &SqlValue, t: CellType) -> String {
    if is_null(v) {
        return "\u{0}null".to_string();
    }
    match t {
        CellType::Numeric => number_of(v).map_or_else(|| text_of(v), |f| f.to_string()),
        CellType::Date => date_of(v).map_or_else(|| text_of(v), |d| d.to_string()),
        CellType::Text => text_of(v).trim().to_lowercase(),
    }
}

/// Normalised column name for the heuristic alignment: lowercase, qualifiers and a leading `__`
/// stripped.
fn norm_name(c: &str) -> String {
    let lower = c.trim().to_lowercase();
    let last = lower.rsplit('.').next().unwrap_or(&lower).to_string();
    let unquoted = last.trim_matches(|ch| ch == '`' || ch == '"' || ch == '[' || ch == ']');
    unquoted.trim_start_matches("__").to_string()
}

fn column_kind(rs: &ResultSet, col: usize) -> CellType {
    let cells: Vec<&SqlValue> = rs
        .rows
        .iter()
        .filter_map(|r| r.get(col))
        .filter(|v| !is_null(v))
        .collect();
    if cells.is_empty() {
        return CellType::Text;
    }
    let share = |f: &dyn Fn(&SqlValue) -> bool| {
        cells.iter().filter(|v| f(v)).count() as f64 / cells.len() as f64
    };
    if share(&|v| date_of(v).is_some()) >= 0.95 {
        CellType::Date
    } else if share(&|v| number_of(v).is_some()) >= 0.95 {
        CellType::Numeric
    } else {
        CellType::Text
    }
}

/// The deterministic alignment used when Stage 1 fails (badger.md §2.5 step 2): rename on equal
/// normalised names, else positionally when column counts and types agree; numeric/date typing
/// where ≥ 95 % of non-null cells in both frames parse; no index columns (greedy path).
pub fn heuristic_alignment(gold: &ResultSet, pred: &ResultSet) -> Alignment {
    let gcols = unique_names(&gold.columns);
    let pcols = unique_names(&pred.columns);
    let gkinds: Vec<CellType> = (0..gcols.len()).map(|i| column_kind(gold, i)).collect();
    let pkinds: Vec<CellType> = (0..pcols.len()).map(|i| column_kind(pred, i)).collect();
    let mut rename = BTreeMap::new();
    let gnorm: Vec<String> = gcols.iter().map(|c| norm_name(c)).collect();
    let mut taken = HashSet::new();
    for p in &pcols {
        let n = norm_name(p);
        if let Some(gi) = gnorm.iter().position(|g| *g == n)
            && let Some(g) = gcols.get(gi)
            && taken.insert(g.clone())
            && g != p
        {
            rename.insert(p.clone(), g.clone());
        }
    }
    let all_named = pcols
        .iter()
        .all(|p| gcols.contains(rename.get(p).unwrap_or(p)));
    if !all_named && gcols.len() == pcols.len() && gkinds == pkinds {
        rename = pcols
            .iter()
            .zip(&gcols)
            .filter(|(p, g)| p != g)
            .map(|(p, g)| (p.clone(), g.clone()))
            .collect();
    }
    let mut numeric = Vec::new();
    let mut dates = Vec::new();
    for (gi, g) in gcols.iter().enumerate() {
        let pi = pcols.iter().position(|p| rename.get(p).unwrap_or(p) == g);
        let gk = gkinds.get(gi).copied();
        let pk = pi.and_then(|i| pkinds.get(i).copied());
        match (gk, pk) {
            (Some(CellType::Date), Some(CellType::Date)) => dates.push(g.clone()),
            (Some(CellType::Numeric), Some(CellType::Numeric)) => numeric.push(g.clone()),
            _ => {}
        }
    }
    Alignment {
        column_rename_dict: rename,
        numeric_columns: numeric,
        date_columns: dates,
        reasoning: "heuristic alignment (Stage 1 unavailable)".to_string(),
        ..Alignment::default()
    }
}

/// Identical result tables with identical column names (same names in the same order, same
/// multiset of rows): Hybrid-EX is 1.0 without a judge call.
pub fn identical_tables(gold: &ResultSet, pred: &ResultSet) -> bool {
    if gold.columns != pred.columns || gold.rows.len() != pred.rows.len() {
        return false;
    }
    let mut g = gold.keyed_rows();
    let mut p = pred.keyed_rows();
    g.sort();
    p.sort();
    g == p
}

/// CSV of the first `limit` rows (header first), for the Stage-1 prompt.
pub fn csv_preview(rs: &ResultSet, limit: usize) -> String {
    let field = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out = rs
        .columns
        .iter()
        .map(|c| field(c))
        .collect::<Vec<_>>()
        .join(",");
    for row in rs.rows.iter().take(limit) {
        out.push('\n');
        out.push_str(
            &row.iter()
                .map(|v| field(&text_of(v)))
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    out
}

/// Variables of the `hybrid_ex` prompt.
#[derive(Debug, Serialize)]
pub struct HybridVars<'a> {
    /// The user question.
    pub question: &'a str,
    /// Gold SQL.
    pub gold_sql: &'a str,
    /// Predicted SQL.
    pub pred_sql: &'a str,
    /// Gold table as CSV (≤ 100 rows).
    pub gold_csv: String,
    /// Predicted table as CSV (≤ 100 rows).
    pub pred_csv: String,
    /// True gold row count.
    pub gold_rows: usize,
    /// True predicted row count.
    pub pred_rows: usize,
}

/// Score Hybrid-EX for one case: avoidance, Stage 1 through the structured-call layer (or the
/// heuristic alignment when it fails), then Stage 2.
pub async fn score_hybrid(
    judge: &dyn StructuredJudge,
    offload: &dyn super::offload::Offload,
    case: &super::judge_case::GoldCase<'_>,
    options: &HybridOptions,
    avoidance: bool,
    counter: &super::avoid::CallCounter,
) -> super::judge_case::Outcome {
    use super::avoid::Avoidance;
    use super::judge_case::Outcome;
    use crate::evaluation::{Metric, RowStatus};
    use crate::judge::structured::{StructuredCall, call_structured};

    let pred = match case.pred {
        Ok(p) => p,
        Err(e) => {
            counter.avoided(Metric::HybridEx, Avoidance::PredictionFailed);
            return super::flex::exec_failure(e, json!({"match_category": "no_match"}));
        }
    };
    if avoidance && identical_tables(case.gold, pred) {
        counter.avoided(Metric::HybridEx, Avoidance::IdenticalResults);
        return identical_results(options);
    }
    let vars = HybridVars {
        question: case.question,
        gold_sql: case.gold_sql,
        pred_sql: case.pred_sql,
        gold_csv: csv_preview(case.gold, PREVIEW_ROWS),
        pred_csv: csv_preview(pred, PREVIEW_ROWS),
        gold_rows: case.gold.rows.len(),
        pred_rows: pred.rows.len(),
    };
    let call = StructuredCall::new(HYBRID_PROMPT, &vars, "");
    let result = call_structured::<Alignment, _, _>(judge, call, &|_| Ok(())).await;
    counter.call(Metric::HybridEx, result.as_ref().is_ok_and(|o| o.cached));
    let (alignment, source, status, extra) = match result {
        Ok(out) => {
            let mut a = out.value;
            let dropped = a.sanitize(
                &unique_names(&case.gold.columns),
                &unique_names(&pred.columns),
            );
            let extra = json!({"dropped_fields": dropped, "prompt_version": out.prompt_version,
                "cached": out.cached, "prompt_tokens": out.usage.prompt_tokens,
                "completion_tokens": out.usage.completion_tokens,
                "response_mode": out.response_mode, "judge": judge.kind()});
            (a, "llm", RowStatus::Ok, extra)
        }
        Err(e) => (
            heuristic_alignment(case.gold, pred),
            "heuristic",
            RowStatus::JudgeFallback,
            json!({"judge_error": super::judge_case::judge_error_json(&e)}),
        ),
    };
    let scored = match stage_two(offload, case.gold, pred, &alignment, options.tolerance).await {
        Ok(scored) => scored,
        Err(e) => {
            return Outcome {
                value: 0.0,
                verdict: None,
                status: RowStatus::GoldUnavailable,
                details: json!({"error": format!("internal error in Hybrid-EX scoring: {e}")}),
            };
        }
    };
    let coverage = if scored.path == ScorePath::Trivial {
        1.0
    } else {
        scored.n_matched as f64 / case.gold.rows.len().max(pred.rows.len()).max(1) as f64
    };
    let llm = source == "llm";
    let mut details = json!({
        "score": scored.score, "path": scored.path, "n_padded": scored.n_padded,
        "n_matched": scored.n_matched, "n_unmatched": scored.n_unmatched,
        "row_coverage": coverage, "index_fallback": scored.index_fallback,
        "skip_reason": scored.skip_reason,
        "key_normalisation": true, "alignment_source": source,
        "llm_ex": if llm { json!(alignment.llm_judge_score) } else { Value::Null },
        "match_category": if llm { json!(alignment.matching_category) } else { Value::Null },
        "alignment": alignment, "cutoff": options.cutoff,
        "tolerance": alignment.recommended_tolerance.unwrap_or(options.tolerance),
        "llm_calls": 1,
    });
    if let (Some(d), Value::Object(x)) = (details.as_object_mut(), extra) {
        d.extend(x);
    }
    Outcome {
        value: scored.score,
        verdict: Some(options.passes(scored.score)),
        status,
        details,
    }
}

/// The outcome when the two results are identical: 1.0 without a call.
fn identical_results(options: &HybridOptions) -> super::judge_case::Outcome {
    use super::avoid::Avoidance;
    super::judge_case::Outcome {
        value: 1.0,
        verdict: Some(options.passes(1.0)),
        status: crate::evaluation::RowStatus::Ok,
        details: json!({"avoided": Avoidance::IdenticalResults.as_str(),
            "alignment_source": "avoided", "cutoff": options.cutoff, "llm_calls": 0}),
    }
}

/// Stage 2 under `alignment`: inline for small tables; above [`INLINE_PAIR_LIMIT`] pairs the
/// greedy path is CPU-bound and runs on the offload, off the async workers (`Err`: the offload
/// lost the job).
async fn stage_two(
    offload: &dyn super::offload::Offload,
    gold: &std::sync::Arc<ResultSet>,
    pred: &std::sync::Arc<ResultSet>,
    alignment: &Alignment,
    tolerance: f64,
) -> Result<HybridScore, super::offload::OffloadError> {
    if gold.rows.len().saturating_mul(pred.rows.len()) <= INLINE_PAIR_LIMIT {
        return Ok(score_tables(gold, pred, alignment, tolerance));
    }
    let (gold, pred, meta) = (
        std::sync::Arc::clone(gold),
        std::sync::Arc::clone(pred),
        alignment.clone(),
    );
    super::offload::offloaded(offload, move || {
        score_tables(&gold, &pred, &meta, tolerance)
    })
    .await
}

/// Prompt name of the Stage-1 alignment.
pub const HYBRID_PROMPT: &str = "hybrid_ex";

/// Above this many (gold row × predicted row) pairs Stage 2 runs through the [`Offload`](super::offload::Offload).
const INLINE_PAIR_LIMIT: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> SqlValue {
        SqlValue::Text(s.to_string())
    }
    fn r(f: f64) -> SqlValue {
        SqlValue::Real(f)
    }
    fn rs(cols: &[&str], rows: Vec<Vec<SqlValue>>) -> ResultSet {
        ResultSet {
            columns: cols.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }
    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn cell_rules() {
        assert_eq!(
            cell_match(&SqlValue::Null, &r(f64::NAN), CellType::Text, 0.01),
            1.0
        );
        assert_eq!(cell_match(&r(0.0), &r(0.0), CellType::Numeric, 0.01), 1.0);
        assert_eq!(
            cell_match(&t("$1,234,567.89"), &r(1234568.0), CellType::Numeric, 0.01),
            1.0
        );
        assert_eq!(
            cell_match(&t("abc"), &t(" ABC "), CellType::Numeric, 0.01),
            1.0
        );
    }

    #[test]
    fn heuristic_renames_by_name_and_types() {
        let g = rs(&["region", "total_revenue"], vec![vec![t("East"), r(1.5)]]);
        let p = rs(&["s.REGION", "revenue"], vec![vec![t("East"), r(1.5)]]);
        let a = heuristic_alignment(&g, &p);
        assert_eq!(
            a.column_rename_dict.get("s.REGION").map(String::as_str),
            Some("region")
        );
        assert_eq!(
            a.column_rename_dict.get("revenue").map(String::as_str),
            Some("total_revenue")
        );
        assert_eq!(a.numeric_columns, names(&["total_revenue"]));
        assert_eq!(score_tables(&g, &p, &a, DEFAULT_TOLERANCE).score, 1.0);
    }
}
