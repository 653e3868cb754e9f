//! The STEF evidence and catalogue checks (`stef::checks`) on real BIRD predictions: each check
//! fires on a prediction that makes its mistake and stays silent on the gold SQL of the same
//! question; catalogue checks stay silent without a catalogue; an error finding makes the
//! deterministic verdict `incorrect`. Then the daemon end to end: `[stef] catalogues`, an app's
//! own catalogue, and catalogues that are missing, malformed, huge or about another database —
//! each a recorded outcome on the row, never a lost event.

use std::collections::HashMap;
use std::path::Path;

use crate::support::cli::sqlgrade;
use serde_json::Value;
use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::event::Event;
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::stef::{
    self, CatalogueSelection, FindingCode, PrepareOptions, Prepared, RuleProfile, Severity, Verdict,
};
use sqlgrade_testkit::data::{data_dir, read_jsonl};

fn bird_catalogue() -> SchemaCatalog {
    let text = std::fs::read_to_string(data_dir().join("bird/tables.json")).unwrap();
    SchemaCatalog::parse_tables_json(&text).unwrap()
}

/// BIRD events of one system's predictions, by question id.
fn bird_events(system: &str) -> HashMap<String, Event> {
    let dir = data_dir().join("bird");
    benchmark_events(
        BackfillFormat::Bird,
        &dir.join("dev.jsonl"),
        &dir.join("predictions").join(format!("{system}.jsonl")),
        None,
    )
    .unwrap()
    .events
    .into_iter()
    .map(|e| (e.event_id.rsplit('-').next().unwrap().to_string(), e))
    .collect()
}

fn prepare(event: &Event, catalogue: Option<&SchemaCatalog>) -> Prepared {
    let schema = catalogue.and_then(|c| c.get(event.db_id.as_deref()?));
    stef::prepare_with(
        event,
        &RuleProfile::default(),
        &PrepareOptions {
            max_sql_bytes: 1 << 20,
            catalogue: schema.map_or(CatalogueSelection::None, CatalogueSelection::Schema),
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", event.sql))
}

fn codes(prepared: &Prepared) -> Vec<FindingCode> {
    prepared.findings.iter().map(|f| f.code).collect()
}

/// The gold SQL of the same question, as an event.
fn gold_of(event: &Event) -> Event {
    let mut gold = event.clone();
    gold.sql = event.gold.as_ref().unwrap().sql.clone().unwrap();
    gold
}

/// `code` fires on the prediction (with the catalogue) and not on the gold SQL; a catalogue code
/// does not fire without the catalogue.
fn fires_on_prediction_not_on_gold(
    system: &str,
    question_id: &str,
    code: FindingCode,
    needs_catalogue: bool,
) {
    let events = bird_events(system);
    let event = &events[question_id];
    let catalogue = bird_catalogue();
    let predicted = prepare(event, Some(&catalogue));
    assert!(
        codes(&predicted).contains(&code),
        "{system} {question_id}: {code:?} should fire on {}; findings {:?}",
        event.sql,
        predicted.findings
    );
    let finding = predicted.findings.iter().find(|f| f.code == code).unwrap();
    assert!(!finding.evidence.is_empty());
    let gold = prepare(&gold_of(event), Some(&catalogue));
    assert!(
        !codes(&gold).contains(&code),
        "{question_id}: {code:?} fired on the gold SQL {}: {:?}",
        gold_of(event).sql,
        gold.findings
    );
    if needs_catalogue {
        assert!(
            !codes(&prepare(event, None)).contains(&code),
            "{code:?} fired without a catalogue"
        );
    }
}

#[test]
fn evidence_checks_fire_on_real_mistakes_and_not_on_gold() {
    // "single type bond refers to bond_type = '-'"; the SQL says bond_type = 'single'.
    fires_on_prediction_not_on_gold("SuperSQL", "209", FindingCode::EvidenceValueMismatch, false);
    // "element = 'i'"; the SQL says 'I'.
    fires_on_prediction_not_on_gold("SuperSQL", "245", FindingCode::LiteralCaseMismatch, false);
    fires_on_prediction_not_on_gold("SuperSQL", "215", FindingCode::DistinctMissing, false);
    fires_on_prediction_not_on_gold("SuperSQL", "255", FindingCode::PercentageNotScaled, false);
    // "name of superheroes refers to superhero_name"; the SQL returns full_name.
    fires_on_prediction_not_on_gold("SuperSQL", "761", FindingCode::EvidenceColumnUnused, false);
    // "TR000_2_5 is the bond id"; the SQL says 'TR_000_2_5'. "Garrett Gerke"; the SQL says 'Girke'.
    fires_on_prediction_not_on_gold("SuperSQL", "223", FindingCode::LiteralNotInQuestion, false);
    fires_on_prediction_not_on_gold("DAIL-SQL", "1468", FindingCode::LiteralNotInQuestion, false);
    // "average height of the superheroes from Marvel Comics"; the SQL adds `height_cm > 0`.
    fires_on_prediction_not_on_gold(
        "CHESS-GPT-4o-mini",
        "729",
        FindingCode::NumberNotInQuestion,
        false,
    );
    // "… as a percentage with five decimal places"; the SQL never rounds.
    fires_on_prediction_not_on_gold("SuperSQL", "226", FindingCode::RoundingMissing, false);
    // COUNT(…) / COUNT(DISTINCT …) in SQLite truncates.
    fires_on_prediction_not_on_gold(
        "CHESS-GPT-4o-mini",
        "1324",
        FindingCode::IntegerDivision,
        false,
    );
}

#[test]
fn catalogue_checks_fire_on_real_mistakes_and_not_on_gold() {
    fires_on_prediction_not_on_gold("SuperSQL", "1338", FindingCode::ColumnNotInTable, true);
    fires_on_prediction_not_on_gold("DAIL-SQL", "231", FindingCode::UnknownTable, true);
    fires_on_prediction_not_on_gold("DAIL-SQL", "335", FindingCode::AmbiguousColumn, true);
    fires_on_prediction_not_on_gold("DAIL-SQL", "1422", FindingCode::UnknownColumn, true);
    fires_on_prediction_not_on_gold("SuperSQL", "1350", FindingCode::JoinOffKeys, true);
    fires_on_prediction_not_on_gold("SuperSQL", "1450", FindingCode::JoinTypeMismatch, true);
    fires_on_prediction_not_on_gold("SuperSQL", "198", FindingCode::CountFanOut, true);
}

/// A BIRD question with hand-written SQL (for the mistakes no shared prediction makes).
fn with_sql(question_id: &str, sql: &str) -> Event {
    let mut event = bird_events("SuperSQL")[question_id].clone();
    event.sql = sql.to_string();
    event
}

#[test]
fn catalogue_checks_on_written_mistakes_against_a_real_schema() {
    let catalogue = bird_catalogue();
    // toxicology (question 195: the most common bond type).
    let cases = [
        (
            "SELECT T9.bond_type FROM bond AS T1 GROUP BY T1.bond_type ORDER BY COUNT(*) DESC LIMIT 1",
            FindingCode::UnknownQualifier,
        ),
        (
            "SELECT bond_type, SUM(bond_type) FROM bond GROUP BY bond_type ORDER BY COUNT(*) DESC LIMIT 1",
            FindingCode::AggregateOverText,
        ),
    ];
    for (sql, code) in cases {
        let prepared = prepare(&with_sql("195", sql), Some(&catalogue));
        assert!(
            codes(&prepared).contains(&code),
            "{sql}: {:?}",
            prepared.findings
        );
    }
    // "full names of superheroes": ids returned although superhero has name columns.
    let ids = with_sql(
        "761",
        "SELECT T1.id FROM superhero AS T1 INNER JOIN colour AS T2 ON T1.eye_colour_id = T2.id WHERE T2.colour = 'Blue' LIMIT 5",
    );
    let prepared = prepare(&ids, Some(&catalogue));
    assert!(
        codes(&prepared).contains(&FindingCode::IdInsteadOfName),
        "{:?}",
        prepared.findings
    );
    assert!(
        !codes(&prepare(&gold_of(&ids), Some(&catalogue))).contains(&FindingCode::IdInsteadOfName)
    );
    // "percentage = DIVIDE(SUM(label = '+' and element = 'cl'), COUNT(molecule_id))": a count
    // is not the defined ratio.
    let undivided = with_sql(
        "317",
        "SELECT COUNT(T2.molecule_id) FROM atom AS T1 INNER JOIN molecule AS T2 ON T1.molecule_id = T2.molecule_id WHERE T2.label = '+' AND T1.element = 'cl'",
    );
    let prepared = prepare(&undivided, Some(&catalogue));
    assert!(
        codes(&prepared).contains(&FindingCode::FormulaShapeMismatch),
        "{:?}",
        prepared.findings
    );
    assert!(
        !codes(&prepare(&gold_of(&undivided), Some(&catalogue)))
            .contains(&FindingCode::FormulaShapeMismatch)
    );
    // A rule profile's mapping names the column the question's term means.
    let mut profile = RuleProfile::default();
    profile
        .column_mappings
        .insert("bond type".into(), "bond_type".into());
    let event = with_sql(
        "195",
        "SELECT bond_id FROM bond GROUP BY bond_id ORDER BY COUNT(*) DESC LIMIT 1",
    );
    let schema = catalogue.get("toxicology").unwrap();
    let options = PrepareOptions {
        max_sql_bytes: 1 << 20,
        catalogue: CatalogueSelection::Schema(schema),
    };
    let prepared = stef::prepare_with(&event, &profile, &options).unwrap();
    assert!(
        codes(&prepared).contains(&FindingCode::QuestionColumnUnused),
        "{:?}",
        prepared.findings
    );
    let prepared = stef::prepare_with(&gold_of(&event), &profile, &options).unwrap();
    assert!(!codes(&prepared).contains(&FindingCode::QuestionColumnUnused));
    // A ranking asked for, an arbitrary row returned.
    let mut ranked = with_sql("195", "SELECT bond_id FROM bond LIMIT 3");
    ranked.question = "Which three bonds have the highest bond ids?".into();
    ranked.enriched_question = None;
    let prepared = prepare(&ranked, Some(&catalogue));
    assert!(
        codes(&prepared).contains(&FindingCode::UnorderedLimit),
        "{:?}",
        prepared.findings
    );
    ranked.sql = "SELECT bond_id FROM bond ORDER BY bond_id DESC LIMIT 3".into();
    assert!(!codes(&prepare(&ranked, Some(&catalogue))).contains(&FindingCode::UnorderedLimit));
    // student_club: event_date is a text column holding ISO dates; budget.amount is a number.
    let event = with_sql(
        "1317",
        "SELECT COUNT(*) FROM budget WHERE amount = 'fifty' AND category = 'Food'",
    );
    let prepared = prepare(&event, Some(&catalogue));
    assert!(
        codes(&prepared).contains(&FindingCode::LiteralTypeMismatch),
        "{:?}",
        prepared.findings
    );
    // Correct SQL on the same schemas is quiet: aliases in ORDER BY, correlated subqueries,
    // CTEs, derived tables, rowid, double-quoted strings.
    for (qid, sql) in [
        (
            "195",
            "WITH c AS (SELECT bond_type, COUNT(bond_id) AS n FROM bond GROUP BY bond_type) SELECT bond_type FROM c ORDER BY n DESC LIMIT 1",
        ),
        (
            "195",
            "SELECT T.bond_type FROM (SELECT bond_type, COUNT(bond_id) AS n FROM bond GROUP BY bond_type) AS T ORDER BY T.n DESC LIMIT 1",
        ),
        (
            "195",
            "SELECT bond_type, COUNT(*) AS n FROM bond WHERE rowid IS NOT NULL AND bond_type != \"x\" GROUP BY bond_type ORDER BY n DESC LIMIT 1",
        ),
        (
            "196",
            "SELECT COUNT(DISTINCT m.molecule_id) FROM molecule m WHERE m.label = '-' AND EXISTS (SELECT 1 FROM atom a WHERE a.molecule_id = m.molecule_id AND a.element = 'cl')",
        ),
    ] {
        let prepared = prepare(&with_sql(qid, sql), Some(&catalogue));
        let loud: Vec<_> = prepared
            .findings
            .iter()
            .filter(|f| f.severity != Severity::Info)
            .collect();
        assert!(loud.is_empty(), "{sql}: {loud:?}");
    }
}

#[test]
fn an_error_finding_makes_the_verdict_incorrect_and_says_why() {
    let events = bird_events("DAIL-SQL");
    let event = &events["1422"];
    let prepared = prepare(event, Some(&bird_catalogue()));
    let (verdict, confidence, rationale) = sqlgrade::judge::deterministic::verdict(&prepared);
    assert_eq!(verdict, Verdict::Incorrect);
    assert!(confidence <= sqlgrade::judge::deterministic::MAX_CONFIDENCE);
    assert!(
        rationale.starts_with("rule 0: unknown_column"),
        "{rationale}"
    );
    // The row's details carry the findings and which database was used.
    let assessment = DeterministicJudge.assess_prepared(&prepared);
    let profile = RuleProfile::default();
    let row = stef::finish(&prepared, assessment, &profile).to_row(event, "", &profile, 0);
    let details = row.details.to_value();
    assert_eq!(details["findings"][0]["code"], "unknown_column");
    assert_eq!(details["findings"][0]["category"], "attribute");
    assert_eq!(details["findings"][0]["severity"], "error");
    assert_eq!(
        details["catalogue"],
        serde_json::json!({"db_id": "student_club", "status": "used"})
    );
}

// ------------------------------------------------------------------ the daemon, end to end

/// Write `text` to `dir/relative`.
fn write(dir: &Path, relative: &str, text: &str) {
    std::fs::write(dir.join(relative), text).unwrap();
}

/// Run `sqlgrade run` over `events` with `config` (the sink and source keys are added).
fn run(dir: &Path, config: &str, events: &[Value]) -> HashMap<String, Value> {
    run_with_summary(dir, config, events).0
}

/// [`run`], also returning the printed summary.
fn run_with_summary(
    dir: &Path,
    config: &str,
    events: &[Value],
) -> (HashMap<String, Value>, String) {
    let input = dir.join("events.jsonl");
    let text: Vec<String> = events.iter().map(Value::to_string).collect();
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let out = dir.join("out");
    let config_path = dir.join("config.toml");
    std::fs::write(
        &config_path,
        format!(
            "[source]\nkind = \"file\"\npath = \"{}\"\n[sink]\nkind = \"jsonl\"\ndir = \"{}\"\n{config}",
            input.display(),
            out.display()
        ),
    )
    .unwrap();
    let output = sqlgrade(dir)
        .args(["run", "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows = read_jsonl(&out.join("evaluations.jsonl"))
        .into_iter()
        .filter(|r| r["metric"] == "stef")
        .map(|r| (r["event_id"].as_str().unwrap().to_string(), r))
        .collect();
    (rows, String::from_utf8_lossy(&output.stdout).into_owned())
}

fn event(id: &str, db_id: Option<&str>, app: &str, sql: &str) -> Value {
    let mut e = serde_json::json!({
        "event_id": id,
        "app_id": app,
        "question": "What is the most common bond type?",
        "sql": sql,
        "dialect": "sqlite",
    });
    if let Some(db) = db_id {
        e["db_id"] = Value::from(db);
    }
    e
}

const HALLUCINATED: &str =
    "SELECT bond_kind FROM bond GROUP BY bond_kind ORDER BY COUNT(*) DESC LIMIT 1";
const FINE: &str =
    "SELECT bond_type FROM bond GROUP BY bond_type ORDER BY COUNT(bond_id) DESC LIMIT 1";

#[test]
fn the_daemon_selects_catalogues_by_db_id_and_records_what_it_could_not_use() {
    let dir = tempfile::tempdir().unwrap();
    let tables = data_dir().join("bird/tables.json");
    // An app's own catalogue in the small TOML form, one database: no db_id needed.
    // Catalogue files live below the rules directory's top level (every top-level file is a
    // profile).
    std::fs::create_dir_all(dir.path().join("rules/catalogues")).unwrap();
    write(
        dir.path(),
        "rules/shop.toml",
        "catalogue = \"catalogues/shop.toml\"\n",
    );
    write(
        dir.path(),
        "rules/catalogues/shop.toml",
        "db_id = \"shop\"\n[[tables]]\nname = \"orders\"\ncolumns = [{ name = \"id\", type = \"integer\" }, { name = \"total\", type = \"real\" }]\n",
    );
    // An app whose catalogue file is malformed, and one whose file is missing.
    write(
        dir.path(),
        "rules/broken.toml",
        "catalogue = \"catalogues/broken.json\"\n",
    );
    write(dir.path(), "rules/catalogues/broken.json", "{ not json");
    write(
        dir.path(),
        "rules/gone.toml",
        "catalogue = \"nowhere.json\"\n",
    );
    // A huge global catalogue (sparse: no disk used) is refused unread; BIRD's is used.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(sqlgrade::score::sqlite::schema::MAX_CATALOGUE_BYTES + 1)
        .unwrap();
    let config = format!(
        "[rules]\ndir = \"{}\"\n[stef]\ncatalogues = [\"{}\", \"{}\"]\n",
        dir.path().join("rules").display(),
        huge.display(),
        tables.display()
    );
    let rows = run(
        dir.path(),
        &config,
        &[
            event("hallucinated", Some("toxicology"), "bird", HALLUCINATED),
            event("fine", Some("toxicology"), "bird", FINE),
            event("unknown-db", Some("no_such_db"), "bird", HALLUCINATED),
            event("no-db", None, "bird", HALLUCINATED),
            event("shop-order", None, "shop", "SELECT SUM(totl) FROM orders"),
            event("broken", Some("toxicology"), "broken", HALLUCINATED),
            event("gone", Some("toxicology"), "gone", HALLUCINATED),
        ],
    );
    assert_eq!(rows.len(), 7, "every event has its row");
    let details = |id: &str| rows[id]["details"].clone();
    let codes = |id: &str| -> Vec<String> {
        details(id)["findings"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .map(|f| f["code"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };

    assert_eq!(details("hallucinated")["catalogue"]["status"], "used");
    assert_eq!(details("hallucinated")["catalogue"]["db_id"], "toxicology");
    assert!(codes("hallucinated").contains(&"unknown_column".to_string()));
    assert_eq!(rows["hallucinated"]["semantic_verdict"], "incorrect");
    assert!(codes("fine").is_empty(), "{:?}", details("fine"));

    for (id, reason) in [
        (
            "unknown-db",
            "database no_such_db is in none of the catalogues",
        ),
        ("no-db", "no db_id"),
        ("broken", "the app's catalogue cannot be read"),
        ("gone", "the app's catalogue cannot be read"),
    ] {
        let catalogue = &details(id)["catalogue"];
        assert_eq!(catalogue["status"], "unavailable", "{id}: {catalogue}");
        assert!(
            catalogue["reason"].as_str().unwrap().contains(reason),
            "{id}: {catalogue}"
        );
        assert!(!codes(id).contains(&"unknown_column".to_string()), "{id}");
    }
    // The huge file's refusal is part of every global lookup that fails.
    assert!(
        details("unknown-db")["catalogue"]["reason"]
            .as_str()
            .unwrap()
            .contains("limit for a catalogue")
    );
    // The app's single-database catalogue serves events without db_id.
    assert_eq!(details("shop-order")["catalogue"]["db_id"], "shop");
    assert!(codes("shop-order").contains(&"unknown_column".to_string()));
}

#[test]
fn a_bird_backfill_uses_the_dataset_schemas_for_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[sink]\nkind = \"jsonl\"\ndir = \"{}\"\n[gold]\nmetrics = [\"ex\"]\n",
            out.display()
        ),
    )
    .unwrap();
    let bird = data_dir().join("bird");
    let output = sqlgrade(dir.path())
        .args([
            "backfill",
            "--format",
            "bird",
            "--config",
            "config.toml",
            "--input",
        ])
        .arg(bird.join("dev.jsonl"))
        .arg("--predictions")
        .arg(bird.join("predictions/DAIL-SQL.jsonl"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<Value> = read_jsonl(&out.join("evaluations.jsonl"))
        .into_iter()
        .filter(|r| r["metric"] == "stef" && r["status"] == "ok")
        .collect();
    assert!(rows.len() > 400);
    assert!(
        rows.iter()
            .all(|r| r["details"]["catalogue"]["status"] == "used"),
        "every scorable BIRD event has its schema"
    );
    let q1422 = rows.iter().find(|r| r["event_id"] == "1422").unwrap();
    assert_eq!(q1422["details"]["findings"][0]["code"], "unknown_column");
}

#[test]
fn probes_ask_the_replica_and_a_timeout_is_a_recorded_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let config = format!(
        "[stef]\ncatalogues = [\"{}\"]\nprobe_databases = \"{}\"\nprobe_timeout_ms = 100\n",
        bird.join("tables.json").display(),
        bird.join("databases").display()
    );
    let bomb = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
                SELECT bond_type FROM bond, n WHERE n.i = 0 LIMIT 1";
    let (rows, summary) = run_with_summary(
        dir.path(),
        &config,
        &[
            // 'I' is not a value of atom.element, 'i' is.
            event(
                "case",
                Some("toxicology"),
                "bird",
                "SELECT COUNT(*) FROM atom WHERE element = 'I'",
            ),
            // Nothing is 'single'.
            event(
                "missing",
                Some("toxicology"),
                "bird",
                "SELECT bond_id FROM bond WHERE bond_type = 'single'",
            ),
            event("fine", Some("toxicology"), "bird", FINE),
            // 'Phillip' is no member id; it is a first name (BIRD question 1414, CHESS).
            event(
                "other-column",
                Some("student_club"),
                "bird",
                "SELECT COUNT(*) FROM member WHERE member_id = 'Phillip'",
            ),
            // A query that never ends: the probe stops at its limit, the row is written.
            event("bomb", Some("toxicology"), "bird", bomb),
            // A database the catalogue has but the probe directory does not: no probes.
            event(
                "no-replica",
                Some("debit_card_specializing"),
                "bird",
                "SELECT COUNT(*) FROM customers WHERE Segment = 'nobody'",
            ),
        ],
    );
    let findings = |id: &str| -> Vec<(String, String, String)> {
        rows[id]["details"]["findings"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .map(|f| {
                        (
                            f["code"].as_str().unwrap().to_string(),
                            f["severity"].as_str().unwrap().to_string(),
                            f["evidence"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let case = findings("case");
    assert!(
        case.iter()
            .any(|(code, severity, evidence)| code == "value_not_in_column"
                && severity == "error"
                && evidence.contains("'i' is")),
        "{case:?}"
    );
    assert_eq!(rows["case"]["semantic_verdict"], "incorrect");
    let missing = findings("missing");
    assert!(
        missing
            .iter()
            .any(|(c, s, _)| c == "value_not_in_column" && s == "warning"),
        "{missing:?}"
    );
    assert!(
        missing.iter().any(|(c, _, _)| c == "empty_result"),
        "{missing:?}"
    );
    assert!(findings("fine").is_empty(), "{:?}", findings("fine"));
    let other = findings("other-column");
    assert!(
        other.iter().any(|(c, s, e)| c == "value_in_other_column"
            && s == "error"
            && e.ends_with("member.first_name holds it")),
        "{other:?}"
    );
    assert!(
        !other.iter().any(|(c, _, _)| c == "value_not_in_column"),
        "{other:?}"
    );
    assert_eq!(rows["other-column"]["semantic_verdict"], "incorrect");
    let bomb = findings("bomb");
    assert!(
        bomb.iter()
            .any(|(c, s, e)| c == "probe_inconclusive" && s == "info" && e.contains("time limit")),
        "{bomb:?}"
    );
    assert!(
        findings("no-replica")
            .iter()
            .all(|(c, _, _)| c != "empty_result" && c != "value_not_in_column"),
        "{:?}",
        findings("no-replica")
    );
    // The probes are counted apart in the summary: at least one timed out.
    let line = summary
        .lines()
        .find(|l| l.starts_with("STEF probes"))
        .unwrap_or_else(|| panic!("no probe line in\n{summary}"));
    assert!(!line.contains("inconclusive 0"), "{line}");
}

/// What the query returned, as evidence (issue: result checks): the event's own `result` (the
/// agent's trace) and, without one, the probe's run of the query with up to 100 rows, read by
/// the same checks through the daemon; findings lower the verdict, the event's result wins over
/// the probe, and a malformed `result` is set aside: the event is scored without it (the probe
/// stands in) and its row says why.
#[test]
fn results_from_the_event_and_from_the_probe_are_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let config = format!(
        "[stef]\ncatalogues = [\"{}\"]\nprobe_databases = \"{}\"\n",
        bird.join("tables.json").display(),
        bird.join("databases").display()
    );
    let with_result = |id: &str, sql: &str, result: Value| {
        let mut e = event(id, Some("toxicology"), "bird", sql);
        e["result"] = result;
        e
    };
    // Every bond type with its count: several rows for "the most common" (a single answer).
    let all_types = "SELECT bond_type, COUNT(*) FROM bond GROUP BY bond_type";
    let (rows, summary) = run_with_summary(
        dir.path(),
        &config,
        &[
            // The agent's run failed: an error, whatever the SQL looks like.
            with_result(
                "failed",
                FINE,
                serde_json::json!({"error": "database is locked"}),
            ),
            // The agent's run returned three rows; the probe (which would agree) is not asked.
            with_result(
                "many",
                all_types,
                serde_json::json!({"row_count": 3, "columns": ["bond_type", "n"],
                    "rows": [["-", 10], ["=", 5], ["#", 1]]}),
            ),
            // No result: the probe runs the query and sees the same three rows.
            event("probed", Some("toxicology"), "bird", all_types),
            // No result: the probe's run is one row of NULL (an average over nothing).
            event(
                "probed-null",
                Some("toxicology"),
                "bird",
                "SELECT AVG(LENGTH(bond_id)) FROM bond WHERE molecule_id = 'TR999'",
            ),
            // The agent's run returned one row: fine.
            with_result(
                "one",
                FINE,
                serde_json::json!({"row_count": 1, "columns": ["bond_type"], "rows": [["-"]]}),
            ),
            // Malformed: scored without it, and the row says why.
            with_result("bad", FINE, serde_json::json!({"rows": "-"})),
            // A fractional duration, as tracers report it, is a duration.
            with_result(
                "fractional",
                FINE,
                serde_json::json!({"row_count": 1, "rows": [["-"]], "elapsed_ms": 6.48}),
            ),
        ],
    );
    let codes = |id: &str| -> Vec<String> {
        rows[id]["details"]["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                format!(
                    "{} {}",
                    f["code"].as_str().unwrap(),
                    f["evidence"].as_str().unwrap()
                )
            })
            .collect()
    };
    let failed = codes("failed");
    assert!(
        failed
            .iter()
            .any(|c| c.starts_with("query_fails the agent's run failed: database is locked")),
        "{failed:?}"
    );
    assert_eq!(rows["failed"]["semantic_verdict"], "incorrect");
    let many = codes("many");
    assert!(
        many.iter().any(|c| c.starts_with("row_count_mismatch")
            && c.contains("the agent's run returned 3 rows")),
        "{many:?}"
    );
    assert!(!many.iter().any(|c| c.contains("probe run")), "{many:?}");
    assert_ne!(rows["many"]["semantic_verdict"], "correct");
    let probed = codes("probed");
    assert!(
        probed
            .iter()
            .any(|c| c.starts_with("row_count_mismatch") && c.contains("the probe run returned")),
        "{probed:?}"
    );
    assert_ne!(rows["probed"]["semantic_verdict"], "correct");
    let null = codes("probed-null");
    assert!(
        null.iter()
            .any(|c| c.starts_with("null_result the probe run returned only NULLs")),
        "{null:?}"
    );
    assert!(codes("one").is_empty(), "{:?}", codes("one"));
    assert_eq!(
        rows["bad"]["details"]["result_ignored"],
        "rows: expected an array, got a string"
    );
    assert_eq!(rows["bad"]["status"], "ok");
    assert!(codes("bad").is_empty(), "{:?}", codes("bad"));
    assert!(
        rows["fractional"]["details"]
            .get("result_ignored")
            .is_none()
    );
    assert!(codes("fractional").is_empty(), "{:?}", codes("fractional"));
    let dead = std::fs::read_to_string(dir.path().join("out/dead_letters.jsonl")).unwrap();
    assert!(dead.trim().is_empty(), "{dead}");
    assert!(
        summary
            .lines()
            .any(|l| l.trim_start().starts_with("result ignored") && l.contains("1 event(s)")),
        "{summary}"
    );
}

/// What a count over a join means, settled by the data: `COUNT(key)` without DISTINCT over a
/// join is asked of the replica — `COUNT(x)` against `COUNT(DISTINCT x)` under the query's own
/// joins and filters. Carbon atoms counted over their connections repeat (an atom has several
/// bonds): the catalogue's suspicion (`info`) becomes a warning, `confirmed_by: probe`, and the
/// verdict drops. Chlorine atoms each have one connection on this data: the suspicion is
/// withdrawn. A molecule counted once per chlorine atom (NL2SQL-Bugs toxicology 288, judged
/// wrong) raises no suspicion without the data — a filter reads the joined table — and is
/// caught with it.
#[test]
fn the_probe_confirms_a_fan_out_or_withdraws_it() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let catalogue = format!(
        "[stef]\ncatalogues = [\"{}\"]\n",
        bird.join("tables.json").display()
    );
    // The probes' time limit well above what they take (a few ms; the default 200 ms could
    // expire on a loaded machine, and an unanswered probe leaves the suspicion as it was).
    let probed = format!(
        "{catalogue}probe_databases = \"{}\"\nprobe_timeout_ms = 10000\n",
        bird.join("databases").display()
    );
    let atoms = |element: &str| {
        format!(
            "SELECT COUNT(atom.atom_id) FROM atom INNER JOIN connected ON connected.atom_id = atom.atom_id WHERE atom.element = '{element}'"
        )
    };
    let molecules = "select count(molecule.molecule_id) from molecule inner join atom on molecule.molecule_id = atom.molecule_id where atom.element = 'cl' and molecule.label = '-'";
    let events = [
        event("repeats", Some("toxicology"), "bird", &atoms("c")),
        event("one-per-key", Some("toxicology"), "bird", &atoms("cl")),
        event("filtered-join", Some("toxicology"), "bird", molecules),
    ];
    let finding = |rows: &HashMap<String, Value>, id: &str| -> Option<Value> {
        rows[id]["details"]["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["code"] == "count_fan_out")
            .cloned()
    };
    for sub in ["catalogue", "probe"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let (rows, _) = run_with_summary(&dir.path().join("catalogue"), &catalogue, &events);
    for id in ["repeats", "one-per-key"] {
        let f = finding(&rows, id).unwrap_or_else(|| panic!("{id}: {:?}", rows[id]["details"]));
        assert_eq!(f["severity"], "info", "{id}: a suspicion without the data");
        assert!(f.get("confirmed_by").is_none(), "{f}");
    }
    assert!(finding(&rows, "filtered-join").is_none());

    let (rows, _) = run_with_summary(&dir.path().join("probe"), &probed, &events);
    for id in ["repeats", "filtered-join"] {
        let confirmed =
            finding(&rows, id).unwrap_or_else(|| panic!("{id}: {:?}", rows[id]["details"]));
        assert_eq!(confirmed["severity"], "warning", "{id}: {confirmed}");
        assert_eq!(confirmed["confirmed_by"], "probe", "{id}: {confirmed}");
        assert!(
            confirmed["evidence"]
                .as_str()
                .unwrap()
                .contains("more than once on the data"),
            "{confirmed}"
        );
        assert_ne!(rows[id]["semantic_verdict"], "correct", "{id}");
    }
    assert!(
        finding(&rows, "one-per-key").is_none(),
        "{:?}",
        rows["one-per-key"]["details"]
    );
}

/// Why a query returns nothing, asked of the data: each condition of an empty query's WHERE is
/// asked alone of its table. A condition no row satisfies (`strftime('%m', …)` of a text id is
/// NULL) is named — `predicate_matches_nothing`, a warning confirmed by the probe — whether the
/// probe ran the query or the event's own `result` was empty; conditions that each match
/// something, empty only together, name none (the run's `empty_result` says it all).
#[test]
fn an_empty_querys_condition_that_matches_nothing_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let config = format!(
        "[stef]\ncatalogues = [\"{}\"]\nprobe_databases = \"{}\"\nprobe_timeout_ms = 10000\n",
        bird.join("tables.json").display(),
        bird.join("databases").display()
    );
    let nothing = "SELECT T1.atom_id FROM atom AS T1 INNER JOIN molecule AS T2 ON T1.molecule_id = T2.molecule_id WHERE T2.label LIKE '+' AND strftime('%m', T2.molecule_id) = '9'";
    let together =
        "SELECT atom_id FROM atom WHERE atom_id LIKE 'TR000%' AND molecule_id LIKE 'TR001%'";
    let mut own_result = event("own-result", Some("toxicology"), "bird", nothing);
    own_result["result"] = serde_json::json!({"columns": ["atom_id"], "rows": []});
    let events = [
        event("probed", Some("toxicology"), "bird", nothing),
        own_result,
        event("together", Some("toxicology"), "bird", together),
    ];
    let (rows, _) = run_with_summary(dir.path(), &config, &events);
    let codes = |id: &str| -> Vec<Value> {
        rows[id]["details"]["findings"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    for id in ["probed", "own-result"] {
        let findings = codes(id);
        let named = findings
            .iter()
            .find(|f| f["code"] == "predicate_matches_nothing")
            .unwrap_or_else(|| panic!("{id}: {findings:?}"));
        assert_eq!(named["severity"], "warning", "{named}");
        assert_eq!(named["confirmed_by"], "probe", "{named}");
        assert_eq!(
            named["evidence"],
            "no row of molecule AS T2 satisfies strftime('%m', T2.molecule_id) = '9' on its own"
        );
        assert!(
            findings.iter().any(|f| f["code"] == "empty_result"),
            "{id}: {findings:?}"
        );
        assert_eq!(
            findings
                .iter()
                .filter(|f| f["code"] == "predicate_matches_nothing")
                .count(),
            1,
            "`label LIKE '+'` matches rows: {findings:?}"
        );
    }
    let findings = codes("together");
    assert!(
        findings.iter().any(|f| f["code"] == "empty_result"),
        "{findings:?}"
    );
    assert!(
        !findings
            .iter()
            .any(|f| f["code"] == "predicate_matches_nothing"),
        "{findings:?}"
    );
}
