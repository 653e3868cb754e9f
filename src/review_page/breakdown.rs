//! The overview's "where it goes wrong": the tables, columns and question types whose events
//! the line-rate verdict flags most in the last [`WINDOW_DAYS`] days (of the data: counted back
//! from its newest hour), ranked by the rise against the days before, each with a sparkline of
//! its daily share flagged, a "new" mark when nothing read it in the days before, and a link to
//! its events in the review queue. The numbers are `stores::breakdown::breakdown`'s — the same
//! as `sqlgrade breakdown --since 7d` prints — over the cells the store hands over; pure.

use serde::Serialize;

use crate::stores::breakdown::{BreakdownData, BreakdownLine, BreakdownQuery, Dimension};
use crate::stores::monitor::HOUR;

use super::monitor::MonitorFilter;

/// Days in the window (and in the window before it).
pub const WINDOW_DAYS: i64 = 7;
/// Elements listed per dimension at most.
pub const ROWS_PER_DIMENSION: usize = 10;
/// Days a sparkline spans (the window and the one before).
const SPARK_DAYS: i64 = 2 * WINDOW_DAYS;
/// A sparkline's size in SVG units.
const SPARK_WIDTH: f64 = 96.0;
const SPARK_HEIGHT: f64 = 18.0;

/// One dimension's ranked elements.
#[derive(Debug, Clone, Serialize)]
pub struct WhereTable {
    /// The dimension's stored name (`table`, `column`, `question_type`).
    pub by: &'static str,
    /// Its heading.
    pub title: &'static str,
    /// The elements, ranked.
    pub rows: Vec<WhereRow>,
}

/// One element as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WhereRow {
    /// The element.
    pub element: String,
    /// Its label.
    pub label: String,
    /// Events reading it in the window.
    pub events: u64,
    /// Flagged.
    pub flagged: u64,
    /// Share flagged, percent, one decimal ("—" when none scored).
    pub share: String,
    /// Its 95 % interval, percent ("" when none).
    pub interval: String,
    /// Flagged in the window before.
    pub flagged_before: u64,
    /// The change in share flagged against the window before, with its interval ("" when
    /// either side has nothing scored).
    pub change: String,
    /// Nothing read it in the window before.
    pub new: bool,
    /// The top findings (`code (events)`).
    pub findings: String,
    /// The sparkline's SVG path (daily share flagged; gaps where a day has nothing scored).
    pub sparkline: String,
    /// The review queue's query string for its events.
    pub queue: String,
}

/// The section's tables under the page's filters.
pub fn where_wrong(data: &BreakdownData, filter: &MonitorFilter) -> Vec<WhereTable> {
    let Some(end) = data.cells.iter().map(|c| c.hour + HOUR).max() else {
        return Vec::new();
    };
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    [
        (Dimension::Table, "Tables"),
        (Dimension::Column, "Columns"),
        (Dimension::QuestionType, "Question types"),
    ]
    .into_iter()
    .map(|(by, title)| {
        let query = BreakdownQuery {
            by,
            app: some(&filter.app),
            agent: some(&filter.agent),
            version: some(&filter.version),
            against_version: None,
            since: Some(end - WINDOW_DAYS * 86_400),
            until: Some(end),
        };
        let rows = crate::stores::breakdown::breakdown(data, &query)
            .into_iter()
            .filter(|l| l.flagged > 0 || l.change.as_ref().is_some_and(|c| c.flagged != 0))
            .take(ROWS_PER_DIMENSION)
            .map(|l| row(data, &query, end, &l, filter))
            .collect();
        WhereTable {
            by: by.as_str(),
            title,
            rows,
        }
    })
    .collect()
}

fn row(
    data: &BreakdownData,
    query: &BreakdownQuery,
    end: i64,
    line: &BreakdownLine,
    filter: &MonitorFilter,
) -> WhereRow {
    let pct = |v: f64| format!("{:.1} %", v * 100.0);
    let mut queue: Vec<(&str, String)> =
        vec![("element", format!("{}:{}", query.by.as_str(), line.element))];
    for (key, value) in [
        ("app", &filter.app),
        ("agent", &filter.agent),
        ("version", &filter.version),
    ] {
        if !value.is_empty() {
            queue.push((key, value.clone()));
        }
    }
    WhereRow {
        element: line.element.clone(),
        label: line.label.clone(),
        events: line.events,
        flagged: line.flagged,
        share: line.share_flagged.map_or_else(|| "—".into(), pct),
        interval: line
            .share_flagged_interval
            .map_or_else(String::new, |(lo, hi)| {
                format!("{:.0}–{:.0} %", lo * 100.0, hi * 100.0)
            }),
        flagged_before: line.previous.as_ref().map_or(0, |p| p.flagged),
        change: line.change.as_ref().map_or_else(String::new, |c| {
            format!(
                "{:+.1} pts [{:+.0}, {:+.0}]",
                c.share_flagged * 100.0,
                c.lower * 100.0,
                c.upper * 100.0
            )
        }),
        new: line.new_this_period,
        findings: line
            .top_findings
            .iter()
            .map(|f| format!("{} ({})", f.code, f.events))
            .collect::<Vec<_>>()
            .join(", "),
        sparkline: sparkline(data, query, end, &line.element),
        queue: serde_urlencoded::to_string(queue).unwrap_or_default(),
    }
}

/// The element's daily share flagged over the last [`SPARK_DAYS`] days, as an SVG path in a
/// [`SPARK_WIDTH`] × [`SPARK_HEIGHT`] box (0 % at the bottom, 100 % at the top).
fn sparkline(data: &BreakdownData, query: &BreakdownQuery, end: i64, element: &str) -> String {
    let start = end - SPARK_DAYS * 86_400;
    let mut days = vec![(0u64, 0u64); SPARK_DAYS as usize];
    for cell in data.cells.iter().filter(|c| {
        c.dimension == query.by.as_str()
            && c.element == element
            && c.hour >= start
            && c.hour < end
            && query.app.as_deref().is_none_or(|a| a == c.app)
            && query.agent.as_deref().is_none_or(|a| a == c.agent)
            && query.version.as_deref().is_none_or(|v| v == c.version)
    }) {
        let day = ((cell.hour - start) / 86_400) as usize;
        if let Some(d) = days.get_mut(day) {
            d.0 += cell.flagged;
            d.1 += cell.scored;
        }
    }
    let step = SPARK_WIDTH / (SPARK_DAYS - 1) as f64;
    let mut path = String::new();
    let mut drawing = false;
    for (i, (flagged, scored)) in days.iter().enumerate() {
        if *scored == 0 {
            drawing = false;
            continue;
        }
        let x = i as f64 * step;
        let y = SPARK_HEIGHT * (1.0 - *flagged as f64 / *scored as f64);
        path.push_str(&format!(
            "{}{x:.1},{y:.1} ",
            if drawing { "L" } else { "M" }
        ));
        drawing = true;
    }
    path.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::breakdown::BreakdownCell;

    fn cell(hour: i64, element: &str, scored: u64, flagged: u64) -> BreakdownCell {
        BreakdownCell {
            hour,
            app: "a".into(),
            agent: "g".into(),
            version: "1".into(),
            dimension: "table".into(),
            element: element.into(),
            events: scored,
            scored,
            flagged,
            p_sum: 0.0,
        }
    }

    #[test]
    fn elements_are_ranked_by_the_rise_with_sparklines_and_queue_links() {
        let day = 86_400;
        let end = 100 * day;
        let data = BreakdownData {
            cells: vec![
                // Before the window: hero fine; in it, hero flagged; power only in it.
                cell(end - 10 * day, "hero", 10, 1),
                cell(end - 2 * day, "hero", 10, 6),
                cell(end - day, "power", 4, 1),
                cell(end - day, "quiet", 4, 0),
            ],
            findings: Vec::new(),
        };
        let tables = where_wrong(&data, &MonitorFilter::default());
        assert_eq!(tables.len(), 3);
        let rows = &tables[0].rows;
        assert_eq!(
            rows.len(),
            2,
            "an element never flagged, before or now, is left out"
        );
        assert_eq!(rows[0].element, "hero");
        assert_eq!((rows[0].flagged, rows[0].flagged_before), (6, 1));
        assert!(
            rows[0].change.starts_with("+50.0 pts"),
            "{}",
            rows[0].change
        );
        assert!(!rows[0].new);
        assert!(rows[1].new, "power: nothing read it before");
        assert_eq!(rows[0].queue, "element=table%3Ahero");
        // Two days drawn for hero, apart: two moves, no line between them.
        assert_eq!(
            rows[0].sparkline.matches('M').count(),
            2,
            "{}",
            rows[0].sparkline
        );
        assert!(tables[1].rows.is_empty() && tables[2].rows.is_empty());
    }
}
