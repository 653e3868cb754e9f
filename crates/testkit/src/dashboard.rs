//! The SQL the project ships for reading ClickHouse: every query of the Grafana dashboard, with
//! Grafana's macros and variables replaced by concrete SQL so that a server can run them.

/// Every `rawSql` target, templating query and annotation query of `deploy/grafana/dashboards/sqlgrade.json`, as
/// written (macros included).
pub fn dashboard_queries() -> Vec<String> {
    let path = crate::data::repo_root().join("deploy/grafana/dashboards/sqlgrade.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut queries: Vec<String> = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            queries.push(t["rawSql"].as_str().unwrap().to_string());
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        queries.push(v["query"].as_str().unwrap().to_string());
    }
    for a in dashboard["annotations"]["list"].as_array().unwrap() {
        queries.push(a["target"]["rawSql"].as_str().unwrap().to_string());
    }
    queries
}

/// Whether every `FROM <table>` of a ReplacingMergeTree table is followed by FINAL (rollups are
/// aggregate states and need none).
pub fn reads_deduplicated(q: &str) -> bool {
    let words: Vec<&str> = q.split_whitespace().collect();
    words.windows(3).all(|w| {
        !(w[0].eq_ignore_ascii_case("FROM")
            && ["evaluations", "dead_letters", "alerts", "judge_cache"].contains(&w[1])
            && !w[2].eq_ignore_ascii_case("FINAL"))
    })
}

/// Replace the Grafana macros/variables with concrete SQL.
pub fn grafana_to_sql(q: &str) -> String {
    let mut s = q.to_string();
    for (from, to) in [
        (
            "$__timeFilter(hour)",
            "hour >= toDateTime('2026-01-01 00:00:00') AND hour <= now() + 86400",
        ),
        (
            "$__timeFilter(ts)",
            "ts >= toDateTime('2026-01-01 00:00:00') AND ts <= now() + 86400",
        ),
        (
            "$__timeFilter(time)",
            "time >= toDateTime('2026-01-01 00:00:00') AND time <= now() + 86400",
        ),
        (
            "$__timeFilter(started)",
            "started >= toDateTime('2026-01-01 00:00:00') AND started <= now() + 86400",
        ),
        (
            "$__timeFilter(fired_at)",
            "fired_at >= toDateTime('2026-01-01 00:00:00')",
        ),
        (
            "${app:singlequote}",
            "'bird', 'spider', 'superhero', 'student_club', 'toxicology', 'concert_singer', ''",
        ),
        (
            "${agent:singlequote}",
            "'SuperSQL', 'DAIL-SQL', 'CHESS-GPT-4o-mini', 'DAIL-SQL-GPT-4', 'TA-ACL', ''",
        ),
    ] {
        s = s.replace(from, to);
    }
    assert!(!s.contains('$'), "unreplaced macro in {s}");
    s
}
