//! Hybrid-EX Stage 2 on every fixture of `shared/specs/badger.md` §7 (X1–X10), with the exact
//! expected scores, paths and row counts.

use sqlgrade_core::exec::{ResultSet, SqlValue};
use sqlgrade_core::metrics::hybrid_ex::{Alignment, DEFAULT_TOLERANCE, ScorePath, score_tables};

fn t(s: &str) -> SqlValue {
    SqlValue::Text(s.into())
}
fn r(f: f64) -> SqlValue {
    SqlValue::Real(f)
}
fn i(v: i64) -> SqlValue {
    SqlValue::Integer(v)
}
fn rs(cols: &[&str], rows: Vec<Vec<SqlValue>>) -> ResultSet {
    ResultSet {
        columns: cols.iter().map(|c| c.to_string()).collect(),
        rows,
    }
}
fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
fn meta(index: &[&str], numeric: &[&str]) -> Alignment {
    Alignment {
        index_columns: strings(index),
        numeric_columns: strings(numeric),
        ..Alignment::default()
    }
}
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

fn x1_tables() -> (ResultSet, ResultSet) {
    (
        rs(
            &["region", "total_revenue"],
            vec![vec![t("East"), r(1234567.89)], vec![t("West"), r(98765.43)]],
        ),
        rs(
            &["region", "revenue"],
            vec![vec![t("West"), r(98765.0)], vec![t("East"), r(1234568.0)]],
        ),
    )
}

#[test]
fn x1_alias_and_rounding() {
    let (g, p) = x1_tables();
    let mut m = meta(&["region"], &["total_revenue"]);
    m.column_rename_dict
        .insert("revenue".into(), "total_revenue".into());
    let s = score_tables(&g, &p, &m, DEFAULT_TOLERANCE);
    assert_eq!(s.score, 1.0);
    assert_eq!(s.path, ScorePath::IndexMatched);
    assert_eq!((s.n_padded, s.n_matched, s.n_unmatched), (0, 2, 0));
}

#[test]
fn x1b_empty_alignment() {
    let (g, p) = x1_tables();
    let s = score_tables(&g, &p, &Alignment::default(), DEFAULT_TOLERANCE);
    assert!(close(s.score, 1.0 / 3.0), "{}", s.score);
    assert_eq!(s.path, ScorePath::IndexUnmatched);
    assert_eq!((s.n_padded, s.n_matched, s.n_unmatched), (2, 2, 0));
}

#[test]
fn x2_tolerance_breach_and_override() {
    let g = rs(
        &["region", "v"],
        vec![vec![t("East"), r(100.0)], vec![t("West"), r(200.0)]],
    );
    let p = rs(
        &["region", "v"],
        vec![vec![t("East"), r(102.5)], vec![t("West"), r(200.0)]],
    );
    let mut m = meta(&["region"], &["v"]);
    assert_eq!(score_tables(&g, &p, &m, DEFAULT_TOLERANCE).score, 0.5);
    m.recommended_tolerance = Some(0.05);
    assert_eq!(score_tables(&g, &p, &m, DEFAULT_TOLERANCE).score, 1.0);
}

#[test]
fn x3_and_x3b_greedy_gold_order_dependence() {
    let p = rs(
        &["segment", "customers"],
        vec![vec![t("Bronze"), i(910)], vec![t("Gold"), i(120)]],
    );
    let m = meta(&[], &["customers"]);
    let g = rs(
        &["segment", "customers"],
        vec![
            vec![t("Gold"), i(120)],
            vec![t("Silver"), i(340)],
            vec![t("Bronze"), i(910)],
        ],
    );
    let s = score_tables(&g, &p, &m, DEFAULT_TOLERANCE);
    assert_eq!(
        (s.score, s.path, s.n_matched, s.n_unmatched),
        (0.5, ScorePath::IndexUnmatched, 2, 1)
    );
    let g = rs(
        &["segment", "customers"],
        vec![
            vec![t("Gold"), i(120)],
            vec![t("Bronze"), i(910)],
            vec![t("Silver"), i(340)],
        ],
    );
    let s = score_tables(&g, &p, &m, DEFAULT_TOLERANCE);
    assert_eq!((s.score, s.n_matched, s.n_unmatched), (1.0, 2, 1));
}

#[test]
fn x4_extra_column_union_reading_trivial_and_mirror() {
    let g = rs(
        &["region", "total_revenue"],
        vec![vec![t("East"), i(10)], vec![t("West"), i(20)]],
    );
    let p = rs(
        &["region", "total_revenue", "order_count"],
        vec![vec![t("East"), i(10), i(3)], vec![t("West"), i(20), i(4)]],
    );
    let m = meta(&["region"], &["total_revenue", "order_count"]);
    let s = score_tables(&g, &p, &m, DEFAULT_TOLERANCE);
    assert_eq!((s.score, s.n_padded), (0.5, 1));
    let mut trivial = m.clone();
    trivial.trivial_columns = strings(&["order_count"]);
    assert_eq!(score_tables(&g, &p, &trivial, DEFAULT_TOLERANCE).score, 1.0);
    let mirror = score_tables(&p, &g, &m, DEFAULT_TOLERANCE);
    assert_eq!((mirror.score, mirror.n_padded), (0.5, 1));
}

#[test]
fn x5_empty_tables() {
    let empty = rs(&["a"], vec![]);
    let one = rs(&["a"], vec![vec![i(1)]]);
    let s = score_tables(&empty, &empty, &Alignment::default(), DEFAULT_TOLERANCE);
    assert_eq!((s.score, s.path), (1.0, ScorePath::Trivial));
    let s = score_tables(&one, &empty, &Alignment::default(), DEFAULT_TOLERANCE);
    assert_eq!((s.score, s.path), (0.0, ScorePath::Trivial));
}

#[test]
fn x6_text_nulls_near_zero() {
    let g = rs(
        &["state", "churn_rate"],
        vec![
            vec![t("  New York "), SqlValue::Null],
            vec![t("Texas"), r(0.12)],
            vec![t("Ohio"), r(0.0)],
        ],
    );
    let p = rs(
        &["state", "churn_rate"],
        vec![
            vec![t("new york"), SqlValue::Null],
            vec![t("TEXAS"), r(0.1201)],
            vec![t("ohio"), r(0.001)],
        ],
    );
    let s = score_tables(&g, &p, &meta(&[], &["churn_rate"]), DEFAULT_TOLERANCE);
    assert!(close(s.score, 2.5 / 3.0), "{}", s.score);
}

#[test]
fn x7_dates() {
    let g = rs(
        &["month", "orders"],
        vec![vec![t("2024-01-31"), i(5)], vec![t("2024-02-29"), i(7)]],
    );
    let p = rs(
        &["month", "orders"],
        vec![
            vec![t("2024-01-31 00:00:00"), i(5)],
            vec![t("2024-02-29 00:00:00"), i(7)],
        ],
    );
    let dated = Alignment {
        date_columns: strings(&["month"]),
        ..Alignment::default()
    };
    assert_eq!(score_tables(&g, &p, &dated, DEFAULT_TOLERANCE).score, 1.0);
    assert_eq!(
        score_tables(&g, &p, &Alignment::default(), DEFAULT_TOLERANCE).score,
        0.5
    );
}

#[test]
fn x8_keys_on_one_side_only() {
    let g = rs(
        &["region", "v"],
        vec![
            vec![t("East"), i(1)],
            vec![t("West"), i(2)],
            vec![t("North"), i(3)],
        ],
    );
    let p = rs(
        &["region", "v"],
        vec![
            vec![t("East"), i(1)],
            vec![t("West"), i(2)],
            vec![t("South"), i(9)],
        ],
    );
    let s = score_tables(&g, &p, &meta(&["region"], &["v"]), DEFAULT_TOLERANCE);
    assert_eq!((s.score, s.n_matched, s.n_unmatched), (0.5, 2, 2));
}

#[test]
fn x9_superset_is_lenient() {
    let g = rs(
        &["k", "v"],
        vec![vec![t("A"), r(0.031)], vec![t("B"), r(0.027)]],
    );
    let p = rs(
        &["k", "v"],
        vec![
            vec![t("A"), r(0.031)],
            vec![t("B"), r(0.027)],
            vec![t("C"), r(0.05)],
            vec![t("D"), r(0.01)],
        ],
    );
    let s = score_tables(&g, &p, &meta(&[], &["v"]), DEFAULT_TOLERANCE);
    assert_eq!((s.score, s.n_unmatched), (1.0, 2));
}

#[test]
fn x10_unit_scale_not_handled() {
    let g = rs(
        &["year", "revenue", "yoy_pct"],
        vec![
            vec![i(2023), i(500), SqlValue::Null],
            vec![i(2024), i(650), r(30.0)],
        ],
    );
    let p = rs(
        &["year", "revenue", "yoy_pct"],
        vec![
            vec![i(2023), i(500), SqlValue::Null],
            vec![i(2024), i(650), r(0.30)],
        ],
    );
    let s = score_tables(
        &g,
        &p,
        &meta(&[], &["revenue", "yoy_pct"]),
        DEFAULT_TOLERANCE,
    );
    assert!(close(s.score, (1.0 + 2.0 / 3.0) / 2.0), "{}", s.score);
}

#[test]
fn duplicate_index_keys_fall_back_to_greedy() {
    let g = rs(&["k", "v"], vec![vec![t("A"), i(1)], vec![t("A"), i(2)]]);
    let p = rs(&["k", "v"], vec![vec![t("A"), i(2)], vec![t("A"), i(1)]]);
    let s = score_tables(&g, &p, &meta(&["k"], &["v"]), DEFAULT_TOLERANCE);
    assert_eq!(
        (s.score, s.path, s.index_fallback),
        (1.0, ScorePath::IndexUnmatched, Some("duplicate_keys"))
    );
}

#[test]
fn oversized_greedy_is_skipped_not_truncated() {
    let rows = |n: i64| (0..n).map(|k| vec![i(k)]).collect::<Vec<_>>();
    let g = rs(&["v"], rows(2001));
    let p = rs(&["v"], rows(2001));
    let s = score_tables(&g, &p, &Alignment::default(), DEFAULT_TOLERANCE);
    assert_eq!(
        (s.score, s.skip_reason, s.n_unmatched),
        (0.0, Some("too_large"), 2001)
    );
    // The index path has no such limit.
    let s = score_tables(&g, &p, &meta(&["v"], &[]), DEFAULT_TOLERANCE);
    assert_eq!(
        (s.score, s.path, s.skip_reason),
        (1.0, ScorePath::IndexMatched, None)
    );
}

#[test]
fn invalid_alignment_fields_are_dropped() {
    let mut a = Alignment {
        column_rename_dict: [("nope".to_string(), "region".to_string())].into(),
        index_columns: strings(&["region"]),
        numeric_columns: strings(&["ghost"]),
        recommended_tolerance: Some(0.9),
        ..Alignment::default()
    };
    let dropped = a.sanitize(&strings(&["region", "v"]), &strings(&["region", "value"]));
    assert_eq!(
        dropped,
        vec![
            "column_rename_dict",
            "numeric_columns",
            "recommended_tolerance"
        ]
    );
    assert!(a.column_rename_dict.is_empty() && a.numeric_columns.is_empty());
    assert_eq!(a.index_columns, strings(&["region"]));
    assert_eq!(a.recommended_tolerance, None);
}
