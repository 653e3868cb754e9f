//! Unit tests of the breakdown fold and computation.

use super::*;

/// A line-rate row of version `version` at `ts` reading `tables`, flagged or not, with one
/// finding of `code` naming `named` (a table).
fn row(
    id: &str,
    version: &str,
    ts: &str,
    tables: &[&str],
    correct: bool,
    finding: Option<(&str, &str)>,
) -> StoredRow {
    let findings: Vec<Value> = finding
        .map(|(code, named)| {
            serde_json::json!({"code": code, "severity": "warning", "category": "attribute",
                "evidence": "…", "elements": {"tables": [named]}})
        })
        .into_iter()
        .collect();
    serde_json::from_value(serde_json::json!({
        "event_id": id,
        "ts": ts,
        "app_id": "app",
        "agent_id": "agent",
        "agent_version": version,
        "metric": "stef",
        "value": if correct { 90.0 } else { 20.0 },
        "verdict": correct,
        "status": "ok",
        "p_correct": if correct { 0.9 } else { 0.2 },
        "details": {
            "findings": findings,
            "reads": {"tables": tables, "columns": tables.iter().map(|t| format!("{t}.id")).collect::<Vec<_>>()},
            "question_type": "count:hero",
        },
    }))
    .expect("a stored row")
}

fn query(by: Dimension) -> BreakdownQuery {
    BreakdownQuery {
        by,
        app: None,
        agent: None,
        version: None,
        against_version: None,
        since: None,
        until: None,
    }
}

#[test]
fn elements_are_counted_flagged_and_ranked_by_the_rise_against_a_version() {
    let mut rows = Vec::new();
    for i in 0..10 {
        // 1.0: heroes mostly right; 1.1: heroes mostly flagged, colours as before.
        let ts = "2026-12-01T10:15:00Z";
        rows.push(row(
            &format!("a{i}"),
            "1.0",
            ts,
            &["hero", "colour"],
            i != 0,
            None,
        ));
        let wrong = i < 7;
        rows.push(row(
            &format!("b{i}"),
            "1.1",
            ts,
            &["hero"],
            !wrong,
            wrong.then_some(("id_instead_of_name", "hero")),
        ));
        rows.push(row(&format!("c{i}"), "1.1", ts, &["colour"], i != 0, None));
    }
    let data = breakdown_from_rows(&rows);
    let mut q = query(Dimension::Table);
    q.version = Some("1.1".into());
    q.against_version = Some("1.0".into());
    let lines = breakdown(&data, &q);
    assert_eq!(lines[0].element, "hero", "{lines:#?}");
    let hero = &lines[0];
    assert_eq!((hero.events, hero.scored, hero.flagged), (10, 10, 7));
    assert_eq!(hero.share_flagged, Some(0.7));
    let (lo, hi) = hero.share_flagged_interval.expect("an interval");
    assert!(lo < 0.7 && hi > 0.7 && lo > 0.3, "{lo} {hi}");
    assert!((hero.mean_p_correct.unwrap() - (7.0 * 0.2 + 3.0 * 0.9) / 10.0).abs() < 1e-9);
    assert_eq!(
        hero.top_findings,
        vec![TopFinding {
            code: "id_instead_of_name".into(),
            events: 7
        }]
    );
    let against = hero.against.as_ref().expect("the other version");
    assert_eq!((against.events, against.flagged), (10, 1));
    let d = hero.difference.as_ref().expect("a difference");
    assert_eq!(d.flagged, 6);
    assert!((d.share_flagged - 0.6).abs() < 1e-9);
    assert!(
        d.lower > 0.0 && d.upper < 1.0 && d.lower < 0.6 && d.upper > 0.6,
        "{d:?}"
    );
    // Colour: the same share in both versions; its difference's interval spans 0.
    let colour = lines.iter().find(|l| l.element == "colour").unwrap();
    let d = colour.difference.as_ref().unwrap();
    assert!(d.lower < 0.0 && d.upper > 0.0, "{d:?}");
    // The question type counts every finding of its events.
    let types = breakdown(&data, &query(Dimension::QuestionType));
    assert_eq!(types[0].label, "count · hero");
    assert_eq!(types[0].events, 30);
    assert_eq!(types[0].top_findings[0].events, 7);
    // Columns come from `reads.columns`; a finding naming only a table names no column.
    let columns = breakdown(&data, &query(Dimension::Column));
    assert!(columns.iter().all(|l| l.top_findings.is_empty()));
}

#[test]
fn a_window_is_compared_with_the_one_before_and_new_elements_are_marked() {
    let rows = vec![
        row("a", "1", "2026-12-01T09:10:00Z", &["hero"], true, None),
        row("b", "1", "2026-12-01T10:10:00Z", &["hero"], false, None),
        row("c", "1", "2026-12-01T10:20:00Z", &["power"], false, None),
        // Not scored: an event, never flagged, not in the mean.
        serde_json::from_value(serde_json::json!({
            "event_id": "d", "ts": "2026-12-01T10:30:00Z", "metric": "stef", "value": 0.0,
            "status": "sql_too_large", "details": {"reads": {"tables": ["power"]}}
        }))
        .unwrap(),
    ];
    let data = breakdown_from_rows(&rows);
    let since = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
        .unwrap()
        .timestamp();
    let mut q = query(Dimension::Table);
    q.since = Some(since);
    let lines = breakdown(&data, &q);
    let power = lines.iter().find(|l| l.element == "power").unwrap();
    assert!(power.new_this_period);
    assert_eq!((power.events, power.scored, power.flagged), (2, 1, 1));
    assert_eq!(power.mean_p_correct, Some(0.2));
    let hero = lines.iter().find(|l| l.element == "hero").unwrap();
    assert!(!hero.new_this_period);
    assert_eq!(hero.previous.as_ref().unwrap().flagged, 0);
    assert_eq!(hero.change.as_ref().unwrap().flagged, 1);
    // Cells: one per hour, series, dimension and element.
    assert!(data.cells.iter().all(|c| c.hour % HOUR == 0));
    assert_eq!(
        data.cells
            .iter()
            .filter(|c| c.dimension == "table")
            .map(|c| c.events)
            .sum::<u64>(),
        4
    );
}
