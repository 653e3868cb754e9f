//! The gold audit as one self-contained HTML page (inline CSS, no scripts, no external assets):
//! EX per system plain and corrected, then every item with evidence, strongest first, with its
//! question, gold SQL and the systems' SQL. Every string from the data is escaped.

use std::fmt::Write as _;

use super::{Evidence, GoldAudit, Level, SuspectedItem};
use crate::commands::report::html::escape;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}\
th{background:#f4f4f4}pre{white-space:pre-wrap;margin:0;font-size:12px}\
.strong{color:#b2182b;font-weight:bold}.moderate{color:#d6604d}.weak{color:#777}\
.item{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:12px 0}\
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 10px}";

fn level_class(level: Level) -> &'static str {
    level.as_str()
}

/// Render the audit page.
pub fn render(audit: &GoldAudit) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Gold audit</title><style>{STYLE}</style></head><body>"
    );
    let _ = write!(
        out,
        "<h1>Gold audit</h1><p>{} runs ({}), {} items; <b>{}</b> suspected, {} with weak evidence only.</p>",
        audit.runs.len(),
        escape(&audit.runs.join(", ")),
        audit.items,
        audit.suspected().count(),
        audit
            .items_with_evidence
            .iter()
            .filter(|i| !i.suspected)
            .count()
    );
    out.push_str(
        "<p class=\"note\">Suspicion is not proof: systems can agree on the same wrong answer, and \
         an LLM judge can be wrong about the gold. Each item lists its evidence for a person to \
         check.</p>",
    );
    out.push_str(
        "<h2>EX per system</h2><p>Over scored items (a verdict), with 95% Wilson intervals; \
         corrected = the suspected items left out.</p><table><tr><th>run</th><th>EX plain</th>\
         <th>EX corrected</th><th>not scored</th></tr>",
    );
    for s in &audit.systems {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.run_id),
            escape(&s.plain.display()),
            escape(&s.corrected.display()),
            s.not_scored
        );
    }
    out.push_str("</table><h2>Items with evidence</h2>");
    for item in &audit.items_with_evidence {
        write_item(&mut out, item);
    }
    out.push_str("</body></html>\n");
    out
}

/// One item with evidence: its rank and level, the evidence, its texts and each run's SQL
/// with its EX.
fn write_item(out: &mut String, item: &SuspectedItem) {
    let _ = write!(
        out,
        "<div class=\"item\" id=\"item-{id}\"><h3>#{rank} item {id} <span class=\"{cls}\">{level}</span> (strength {strength:.2})</h3><ul>",
        id = escape(&item.event_id),
        rank = item.rank,
        cls = level_class(item.level),
        level = item.level.as_str(),
        strength = item.strength,
    );
    for e in &item.evidence {
        let _ = write!(out, "<li>{}", escape(&e.describe()));
        if let Evidence::FlexIncorrectGroundTruth {
            explanation: Some(x),
            ..
        } = e
        {
            let _ = write!(out, ": <i>{}</i>", escape(x));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul><table>");
    let text = &item.text;
    for (label, value) in [
        ("database", &text.db_id),
        ("question", &text.question),
        ("evidence", &text.evidence),
    ] {
        if let Some(v) = value {
            let _ = write!(out, "<tr><th>{label}</th><td>{}</td></tr>", escape(v));
        }
    }
    if let Some(gold) = &text.gold_sql {
        let _ = write!(
            out,
            "<tr><th>gold SQL</th><td><pre>{}</pre></td></tr>",
            escape(gold)
        );
    }
    for (run, verdict) in &item.ex {
        let ex = match verdict {
            Some(true) => "EX 1",
            Some(false) => "EX 0",
            None => "not scored",
        };
        let sql = item
            .predictions
            .get(run)
            .map(|s| format!("<pre>{}</pre>", escape(s)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr><th>{} ({ex})</th><td>{sql}</td></tr>",
            escape(run)
        );
    }
    out.push_str("</table></div>");
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde_json::json;

    use super::*;
    use crate::commands::audit::ItemText;
    use crate::stores::StoredRow;

    #[test]
    fn hostile_text_is_shown_as_text() {
        let mut rows: BTreeMap<String, Vec<StoredRow>> = BTreeMap::new();
        for run in ["A<b>", "B"] {
            rows.entry(run.to_string()).or_default().push(
                serde_json::from_value(json!({
                    "event_id": "1", "run_id": run, "metric": "ex", "value": 0.0,
                    "verdict": false, "status": "ok", "details": {"pred_digest": "same"}
                }))
                .unwrap(),
            );
        }
        let texts = HashMap::from([(
            "1".to_string(),
            ItemText {
                question: Some("<script>alert(1)</script>".into()),
                gold_sql: Some("SELECT '<img src=x onerror=alert(1)>'".into()),
                ..ItemText::default()
            },
        )]);
        let predictions = HashMap::from([(
            ("B".to_string(), "1".to_string()),
            "SELECT \"</pre><script>x</script>\"".to_string(),
        )]);
        let audit = GoldAudit::build(&rows, &texts, &predictions);
        let page = render(&audit);
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("A<b>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&lt;/pre&gt;&lt;script&gt;"));
    }
}
