//! ESM+ acceptance tests: every pair of esm_plus.md §6 (ESM, stage-0 and ESM+ columns), the
//! soundness fixtures, the further checks, and each of the 20 rules in both directions.

use sqlgrade::metrics::esm::ir::PlusSchema;
use sqlgrade::metrics::esm::plus::{EsmPlusOptions, esm_plus};
use sqlgrade::metrics::esm::{SchemaCatalog, SpiderEvalOptions, SpiderSchema, esm};

const DDL: &str = "
CREATE TABLE owners (owner_id INTEGER PRIMARY KEY, first_name TEXT, state TEXT);
CREATE TABLE breeds (breed_code TEXT PRIMARY KEY, breed_name TEXT);
CREATE TABLE dogs (
  dog_id     INTEGER PRIMARY KEY,
  owner_id   INTEGER NOT NULL REFERENCES owners(owner_id),
  breed_code TEXT REFERENCES breeds(breed_code),
  name       TEXT NOT NULL UNIQUE,
  nickname   TEXT,
  age        INTEGER,
  weight     REAL NOT NULL
);";

const J: &str = "SELECT T1.name FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id WHERE T2.state = 'VA'";
const S: &str =
    "SELECT name FROM dogs WHERE owner_id IN (SELECT owner_id FROM owners WHERE state = 'VA')";
const G1: &str = "SELECT T1.dog_id, T2.breed_name FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_code";

struct Fixture {
    plus: PlusSchema,
    spider: SpiderSchema,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("dogs");
    std::fs::create_dir(&db_dir).unwrap();
    let path = db_dir.join("dogs.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(DDL)
        .unwrap();
    let mut cat = SchemaCatalog::new();
    assert_eq!(
        sqlgrade::score::sqlite::schema::introspect_sqlite_dir(&mut cat, dir.path()).unwrap(),
        1
    );
    let db = cat.get("dogs").unwrap();
    Fixture {
        plus: PlusSchema::new(db),
        spider: SpiderSchema::new(db),
        _dir: dir,
    }
}

fn plus(f: &Fixture, g: &str, p: &str, opts: EsmPlusOptions) -> bool {
    let out = esm_plus(&f.plus, g, p, opts).unwrap();
    out.verdict
}

/// (ESM with value+distinct checks on, parsed?) and ESM with the script's defaults.
fn orig(f: &Fixture, g: &str, p: &str) -> (bool, bool, bool) {
    let on = SpiderEvalOptions {
        disable_value: false,
        disable_distinct: false,
    };
    let a = esm(&f.spider, g, p, on).unwrap();
    let d = esm(&f.spider, g, p, SpiderEvalOptions::default()).unwrap();
    (a.verdict, a.pred_parsed, d.verdict)
}

// # | gold | pred | ESM (checks on) | unparseable in ESM | ESM default (†) | st.0 | ESM+
type Row = (u8, &'static str, &'static str, bool, bool, bool, bool, bool);

fn table() -> Vec<Row> {
    vec![
        (
            1,
            G1,
            "SELECT T1.dog_id, T2.breed_name FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_name",
            true,
            false,
            true,
            false,
            false,
        ),
        (
            2,
            G1,
            "SELECT T1.dog_id, T2.breed_name FROM dogs AS T1 JOIN breeds AS T2 ON T2.breed_code = T1.breed_code",
            true,
            false,
            true,
            true,
            true,
        ),
        (
            3,
            "SELECT DISTINCT nickname FROM dogs",
            "SELECT nickname FROM dogs",
            true,
            false,
            true,
            false,
            false,
        ),
        (
            4,
            "SELECT DISTINCT name FROM dogs",
            "SELECT name FROM dogs",
            true,
            false,
            true,
            false,
            true,
        ),
        (
            5,
            "SELECT count(*) FROM dogs",
            "SELECT count(DISTINCT dog_id) FROM dogs",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            6,
            "SELECT name FROM dogs ORDER BY age DESC LIMIT 1",
            "SELECT name FROM dogs ORDER BY age DESC LIMIT 3",
            true,
            false,
            true,
            false,
            false,
        ),
        (
            7,
            "SELECT count(*) FROM dogs",
            "SELECT count(dog_id) FROM dogs",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            8,
            "SELECT count(*) FROM dogs",
            "SELECT count(age) FROM dogs",
            false,
            false,
            false,
            false,
            false,
        ),
        (
            9,
            "SELECT max(weight) FROM dogs",
            "SELECT weight FROM dogs ORDER BY weight DESC LIMIT 1",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            10,
            "SELECT name FROM dogs WHERE weight = (SELECT max(weight) FROM dogs)",
            "SELECT name FROM dogs ORDER BY weight DESC LIMIT 1",
            false,
            false,
            false,
            false,
            false,
        ),
        (
            11,
            "SELECT name FROM dogs WHERE dog_id = (SELECT max(dog_id) FROM dogs)",
            "SELECT name FROM dogs ORDER BY dog_id DESC LIMIT 1",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            12,
            J,
            "SELECT d.name FROM dogs d JOIN owners o ON d.owner_id = o.owner_id WHERE o.state = 'VA'",
            false,
            true,
            false,
            false,
            true,
        ),
        (
            13,
            "SELECT name FROM dogs WHERE breed_code = 'BUL' OR breed_code = 'HUS'",
            "SELECT name FROM dogs WHERE breed_code IN ('BUL', 'HUS')",
            false,
            true,
            false,
            false,
            true,
        ),
        (
            14,
            "SELECT name FROM dogs WHERE age >= 100",
            "SELECT name FROM dogs WHERE age >= 200",
            false,
            false,
            true,
            false,
            false,
        ),
        (
            15,
            "SELECT count(*) FROM dogs",
            "SELECT count(*) FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            16,
            "SELECT count(*) FROM dogs",
            "SELECT count(*) FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_code",
            false,
            false,
            false,
            false,
            false,
        ),
        (17, S, J, false, false, false, false, true),
        (
            18,
            "SELECT T1.owner_id FROM owners AS T1 JOIN dogs AS T2 ON T1.first_name = T2.name",
            "SELECT T2.owner_id FROM owners AS T1 JOIN dogs AS T2 ON T1.first_name = T2.name",
            true,
            false,
            true,
            false,
            false,
        ),
        (
            19,
            "SELECT T1.owner_id, count(*) FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id GROUP BY T1.owner_id",
            "SELECT T2.owner_id, count(*) FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id GROUP BY T2.owner_id",
            true,
            false,
            true,
            false,
            true,
        ),
        // st.0 here is the paper's M4 (scoped aliases): the engine snapshot could not parse it.
        (
            20,
            S,
            "SELECT t.name FROM dogs AS t WHERE t.owner_id IN (SELECT t.owner_id FROM owners AS t WHERE t.state = 'VA')",
            false,
            true,
            false,
            true,
            true,
        ),
        (
            21,
            "SELECT name FROM dogs WHERE age <= 5",
            "SELECT name FROM dogs WHERE NOT age > 5",
            false,
            true,
            false,
            false,
            true,
        ),
        (
            22,
            "SELECT name FROM dogs WHERE age BETWEEN 2 AND 5",
            "SELECT name FROM dogs WHERE age >= 2 AND age <= 5",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            23,
            "SELECT name FROM dogs WHERE age = 5",
            "SELECT name FROM dogs WHERE age = '5'",
            false,
            false,
            true,
            false,
            true,
        ),
        (
            24,
            "SELECT name FROM dogs",
            "SELECT name FROM dogs GROUP BY name",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            25,
            "SELECT name FROM dogs WHERE age > 2 INTERSECT SELECT name FROM dogs WHERE weight < 10",
            "SELECT name FROM dogs WHERE age > 2 AND weight < 10",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            26,
            "SELECT nickname FROM dogs WHERE age > 2 INTERSECT SELECT nickname FROM dogs WHERE weight < 10",
            "SELECT nickname FROM dogs WHERE age > 2 AND weight < 10",
            false,
            false,
            false,
            false,
            false,
        ),
        (
            27,
            "SELECT owner_id FROM owners EXCEPT SELECT owner_id FROM dogs",
            "SELECT owner_id FROM owners WHERE owner_id NOT IN (SELECT owner_id FROM dogs)",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            28,
            "SELECT name FROM dogs",
            "SELECT name FROM dogs WHERE weight IS NOT NULL",
            false,
            true,
            false,
            false,
            true,
        ),
        (
            29,
            "SELECT * FROM breeds",
            "SELECT breed_name, breed_code FROM breeds",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            30,
            "SELECT name FROM dogs",
            "SELECT name FROM dogs UNION SELECT name FROM dogs",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            31,
            "SELECT name FROM dogs WHERE age > 3",
            "SELECT name FROM dogs WHERE name IN (SELECT name FROM dogs WHERE age > 3)",
            false,
            false,
            false,
            false,
            true,
        ),
        (
            32,
            "SELECT T1.first_name FROM owners AS T1 JOIN dogs AS T2 ON T1.owner_id = T2.owner_id",
            "SELECT T1.first_name FROM owners AS T1 LEFT JOIN dogs AS T2 ON T1.owner_id = T2.owner_id",
            false,
            true,
            false,
            false,
            false,
        ),
        (
            33,
            "SELECT name FROM dogs WHERE age = 3 AND weight = 5 OR age = 4",
            "SELECT name FROM dogs WHERE age = 3 AND (weight = 5 OR age = 4)",
            false,
            true,
            false,
            false,
            false,
        ),
        // #34/#35: ESM+ column is the paper's verdict (paper_compat); production [D] differs.
        (
            34,
            "SELECT name FROM dogs ORDER BY age DESC, weight ASC",
            "SELECT name FROM dogs ORDER BY age ASC, weight ASC",
            true,
            false,
            true,
            true,
            true,
        ),
        (
            35,
            "SELECT nickname, age, count(*) FROM dogs GROUP BY nickname, age",
            "SELECT nickname, age, count(*) FROM dogs GROUP BY age, nickname",
            false,
            false,
            false,
            false,
            false,
        ),
        (
            36,
            "SELECT name FROM dogs WHERE age > 3",
            "SELECT name FROM dogs WHERE age > '3'",
            false,
            false,
            true,
            false,
            true,
        ),
    ]
}

#[test]
fn every_section_6_pair_matches_its_verdicts() {
    let f = fixture();
    let paper = EsmPlusOptions {
        paper_compat: true,
        ..EsmPlusOptions::default()
    };
    let stage0 = EsmPlusOptions {
        paper_compat: true,
        ..EsmPlusOptions::fixes_only()
    };
    for (n, g, p, esm_on, unparsed, esm_default, st0, want) in table() {
        let (got_esm, parsed, got_default) = orig(&f, g, p);
        assert_eq!(got_esm, esm_on, "#{n} ESM (checks on)");
        assert_eq!(!parsed, unparsed, "#{n} ESM parse status");
        assert_eq!(got_default, esm_default, "#{n} ESM (defaults)");
        assert_eq!(plus(&f, g, p, stage0), st0, "#{n} stage 0");
        let out = esm_plus(&f.plus, g, p, paper).unwrap();
        assert_eq!(out.verdict, want, "#{n} ESM+ (paper): {out:?}");
    }
}

#[test]
fn production_mode_fixes_order_direction_and_group_by_order() {
    let f = fixture();
    let prod = EsmPlusOptions::default();
    let rows = table();
    let (_, g34, p34, ..) = rows[33];
    let (_, g35, p35, ..) = rows[34];
    assert!(!plus(&f, g34, p34, prod), "#34 [D]: one direction per key");
    assert!(plus(&f, g35, p35, prod), "#35 [D]: GROUP BY as a set");
    // Every other pair has the same verdict in production mode.
    for (n, g, p, .., want) in rows {
        if n != 34 && n != 35 {
            assert_eq!(plus(&f, g, p, prod), want, "#{n} production");
        }
    }
}

#[test]
fn soundness_fixtures() {
    let f = fixture();
    let d = EsmPlusOptions::default();
    let cases = [
        (
            "SELECT nickname FROM dogs WHERE age > 3",
            "SELECT nickname FROM dogs WHERE nickname IN (SELECT nickname FROM dogs WHERE age > 3)",
            false,
        ),
        (
            "SELECT nickname FROM dogs",
            "SELECT nickname FROM dogs UNION SELECT nickname FROM dogs",
            false,
        ),
        (
            "SELECT T1.owner_id FROM owners AS T1 LEFT JOIN dogs AS T2 ON T1.owner_id = T2.owner_id",
            "SELECT T2.owner_id FROM owners AS T1 LEFT JOIN dogs AS T2 ON T1.owner_id = T2.owner_id",
            false,
        ),
        (
            "SELECT count(*) FROM dogs",
            "SELECT count(*) FROM owners AS T2 LEFT JOIN dogs AS T1 ON T1.owner_id = T2.owner_id",
            false,
        ),
        (
            J,
            "SELECT T1.name FROM dogs AS T1 INNER JOIN owners AS T2 ON T1.owner_id = T2.owner_id WHERE T2.state = 'VA'",
            true,
        ),
    ];
    for (g, p, want) in cases {
        assert_eq!(plus(&f, g, p, d), want, "{g} / {p}");
        let esm_verdict = esm(&f.spider, g, p, SpiderEvalOptions::default()).map(|o| o.verdict);
        assert!(!esm_verdict.unwrap_or(false), "ESM says no for {p}");
    }
    let (g, p) = (
        "SELECT min(age) FROM dogs",
        "SELECT age FROM dogs ORDER BY age ASC LIMIT 1",
    );
    assert!(plus(&f, g, p, d), "paper-faithful rule 9");
    let strict = EsmPlusOptions {
        strict_nulls: true,
        ..d
    };
    assert!(!plus(&f, g, p, strict), "strict_nulls: age is nullable");
}

#[test]
fn further_checks() {
    let f = fixture();
    let d = EsmPlusOptions::default();
    let cases = [
        (
            "SELECT name, age FROM dogs",
            "SELECT age, name FROM dogs",
            true,
        ),
        (
            "SELECT T1.name FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id WHERE T2.state = 'VA'",
            "SELECT T1.name FROM owners AS T2 JOIN dogs AS T1 ON T1.owner_id = T2.owner_id WHERE T2.state = 'VA'",
            true,
        ),
        (
            "SELECT name FROM dogs WHERE age NOT IN (2, 3)",
            "SELECT name FROM dogs WHERE age != 2 AND age != 3",
            true,
        ),
        (
            "SELECT owner_id FROM dogs GROUP BY owner_id HAVING count(dog_id) > 2",
            "SELECT owner_id FROM dogs GROUP BY owner_id HAVING count(*) > 2",
            true,
        ),
        (
            "SELECT age FROM dogs WHERE name = 'Rex'",
            "SELECT age FROM dogs WHERE name = 'rex'",
            false,
        ),
        (
            "SELECT name FROM dogs ORDER BY age LIMIT 5",
            "SELECT name FROM dogs ORDER BY age",
            false,
        ),
    ];
    for (g, p, want) in cases {
        assert_eq!(plus(&f, g, p, d), want, "{g} / {p}");
    }
}

// rule | gold | pred that should match | gold | pred that should not match
type RuleCase = (u8, &'static str, &'static str, &'static str, &'static str);

fn rule_cases() -> Vec<RuleCase> {
    vec![
        (
            1,
            "SELECT name FROM dogs WHERE dog_id = (SELECT max(dog_id) FROM dogs)",
            "SELECT name FROM dogs ORDER BY dog_id DESC LIMIT 1",
            "SELECT name FROM dogs WHERE weight = (SELECT max(weight) FROM dogs)",
            "SELECT name FROM dogs ORDER BY weight DESC LIMIT 1",
        ),
        (
            2,
            "SELECT DISTINCT name FROM dogs",
            "SELECT name FROM dogs",
            "SELECT DISTINCT nickname FROM dogs",
            "SELECT nickname FROM dogs",
        ),
        (
            3,
            "SELECT name FROM dogs WHERE age > 2 INTERSECT SELECT name FROM dogs WHERE weight < 10",
            "SELECT name FROM dogs WHERE age > 2 AND weight < 10",
            "SELECT nickname FROM dogs WHERE age > 2 INTERSECT SELECT nickname FROM dogs WHERE weight < 10",
            "SELECT nickname FROM dogs WHERE age > 2 AND weight < 10",
        ),
        (
            4,
            "SELECT name FROM dogs WHERE age < 2 UNION SELECT name FROM dogs WHERE age > 9",
            "SELECT name FROM dogs WHERE age < 2 OR age > 9",
            "SELECT nickname FROM dogs WHERE age < 2 UNION SELECT nickname FROM dogs WHERE age > 9",
            "SELECT nickname FROM dogs WHERE age < 2 OR age > 9",
        ),
        (
            5,
            "SELECT name FROM dogs",
            "SELECT name FROM dogs GROUP BY name",
            "SELECT nickname FROM dogs",
            "SELECT nickname FROM dogs GROUP BY nickname",
        ),
        (
            6,
            "SELECT owner_id FROM owners EXCEPT SELECT owner_id FROM dogs",
            "SELECT owner_id FROM owners WHERE owner_id NOT IN (SELECT owner_id FROM dogs)",
            "SELECT nickname FROM dogs EXCEPT SELECT first_name FROM owners",
            "SELECT nickname FROM dogs WHERE nickname NOT IN (SELECT first_name FROM owners)",
        ),
        (
            7,
            "SELECT count(*) FROM dogs",
            "SELECT count(dog_id) FROM dogs",
            "SELECT count(*) FROM dogs",
            "SELECT count(age) FROM dogs",
        ),
        (
            8,
            "SELECT name FROM dogs",
            "SELECT name FROM dogs WHERE weight IS NOT NULL",
            "SELECT name FROM dogs",
            "SELECT name FROM dogs WHERE age IS NOT NULL",
        ),
        (
            9,
            "SELECT max(weight) FROM dogs",
            "SELECT weight FROM dogs ORDER BY weight DESC LIMIT 1",
            "SELECT max(weight) FROM dogs",
            "SELECT name FROM dogs ORDER BY weight DESC LIMIT 1",
        ),
        (
            10,
            "SELECT * FROM breeds",
            "SELECT breed_code, breed_name FROM breeds",
            "SELECT * FROM breeds",
            "SELECT breed_code FROM breeds",
        ),
        (
            11,
            "SELECT name FROM dogs WHERE age = 5",
            "SELECT name FROM dogs WHERE age = '5'",
            "SELECT name FROM dogs WHERE age = 6",
            "SELECT name FROM dogs WHERE age = '5'",
        ),
        (
            12,
            S,
            J,
            "SELECT name FROM dogs WHERE breed_code IN (SELECT breed_name FROM breeds WHERE breed_name = 'x')",
            "SELECT T1.name FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_name WHERE T2.breed_name = 'x'",
        ),
        (
            13,
            "SELECT count(*) FROM dogs",
            "SELECT count(*) FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id",
            "SELECT count(*) FROM dogs",
            "SELECT count(*) FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_code",
        ),
        (
            14,
            "SELECT d.name FROM dogs AS d",
            "SELECT d.name FROM dogs d",
            "SELECT d.name FROM dogs AS d",
            "SELECT d.nickname FROM dogs d",
        ),
        (
            15,
            "SELECT name FROM dogs WHERE breed_code = 'BUL' OR breed_code = 'HUS'",
            "SELECT name FROM dogs WHERE breed_code IN ('BUL', 'HUS')",
            "SELECT name FROM dogs WHERE breed_code = 'BUL' OR breed_code = 'POO'",
            "SELECT name FROM dogs WHERE breed_code IN ('BUL', 'HUS')",
        ),
        (
            16,
            "SELECT T1.owner_id, T2.state FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id",
            "SELECT T2.owner_id, T2.state FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id",
            "SELECT T1.owner_id FROM owners AS T1 JOIN dogs AS T2 ON T1.first_name = T2.name",
            "SELECT T2.owner_id FROM owners AS T1 JOIN dogs AS T2 ON T1.first_name = T2.name",
        ),
        (
            17,
            "SELECT name FROM dogs WHERE age > 3",
            "SELECT name FROM dogs WHERE name IN (SELECT name FROM dogs WHERE age > 3)",
            "SELECT nickname FROM dogs WHERE age > 3",
            "SELECT nickname FROM dogs WHERE nickname IN (SELECT nickname FROM dogs WHERE age > 3)",
        ),
        (
            18,
            "SELECT name FROM dogs",
            "SELECT name FROM dogs UNION SELECT name FROM dogs",
            "SELECT nickname FROM dogs",
            "SELECT nickname FROM dogs UNION SELECT nickname FROM dogs",
        ),
        (
            19,
            "SELECT name FROM dogs WHERE age BETWEEN 2 AND 5",
            "SELECT name FROM dogs WHERE age >= 2 AND age <= 5",
            "SELECT name FROM dogs WHERE age BETWEEN 2 AND 5",
            "SELECT name FROM dogs WHERE age > 2 AND age < 5",
        ),
        (
            20,
            "SELECT name FROM dogs WHERE NOT age > 5",
            "SELECT name FROM dogs WHERE age <= 5",
            "SELECT name FROM dogs WHERE NOT age > 5",
            "SELECT name FROM dogs WHERE age < 5",
        ),
    ]
}

#[test]
fn each_rule_in_both_directions_and_is_responsible() {
    let f = fixture();
    let d = EsmPlusOptions::default();
    let cases = rule_cases();
    assert_eq!(cases.len(), 20);
    for (rule, g, p_yes, g_no, p_no) in cases {
        let out = esm_plus(&f.plus, g, p_yes, d).unwrap();
        assert!(out.verdict, "rule {rule} should match: {out:?}");
        assert!(
            out.gold_rules.contains(&rule) || out.pred_rules.contains(&rule),
            "rule {rule} should have fired: {out:?}"
        );
        let out = esm_plus(&f.plus, g_no, p_no, d).unwrap();
        assert!(!out.verdict, "rule {rule} should not match: {out:?}");
        let without = esm_plus(&f.plus, g, p_yes, d.without_rule(rule)).unwrap();
        assert!(
            !without.verdict,
            "rule {rule} disabled should not match: {without:?}"
        );
    }
}

#[test]
fn rules_needing_unknown_facts_are_skipped_and_recorded() {
    // concert_singer from tables.json alone: no NOT NULL / UNIQUE facts beyond primary keys.
    let data = sqlgrade_testkit::data::data_dir().join("spider");
    let cat = sqlgrade::score::sqlite::schema::load_tables_json(&data.join("tables.json")).unwrap();
    let schema = PlusSchema::new(cat.get("concert_singer").unwrap());
    let out = esm_plus(
        &schema,
        "SELECT count(*) FROM singer",
        "SELECT count(Name) FROM singer",
        EsmPlusOptions::default(),
    )
    .unwrap();
    assert!(!out.verdict);
    assert!(out.skipped_rules.iter().any(|s| s.rule == 7), "{out:?}");
    // With the SQLite file introspected, the same facts are known (Name is nullable there).
    let mut cat = cat;
    sqlgrade::score::sqlite::schema::introspect_sqlite_dir(&mut cat, &data.join("databases"))
        .unwrap();
    let schema = PlusSchema::new(cat.get("concert_singer").unwrap());
    let out = esm_plus(
        &schema,
        "SELECT count(*) FROM singer",
        "SELECT count(Singer_ID) FROM singer",
        EsmPlusOptions::default(),
    )
    .unwrap();
    assert!(out.verdict, "{out:?}");
    assert!(out.skipped_rules.is_empty());
}

#[test]
fn hostile_or_broken_inputs_are_parse_failures_not_panics() {
    let f = fixture();
    let deep = format!(
        "SELECT name FROM dogs WHERE dog_id IN {}SELECT dog_id FROM dogs{}",
        "(SELECT dog_id FROM dogs WHERE dog_id IN ".repeat(5000),
        ")".repeat(5000)
    );
    let many_quotes = format!(
        "SELECT name FROM dogs WHERE name IN ({})",
        vec!["'x'"; 20000].join(", ")
    );
    let inputs = [
        "",
        "   ",
        "SELECT",
        "SELECT name FROM dogs WHERE name = 'unbalanced",
        "DROP TABLE dogs",
        "SELECT * FROM nowhere",
        "SELECT a FROM dogs; SELECT b FROM dogs",
        "((((((((((",
        "SELECT name FROM dogs WHERE",
        "SELECT count( FROM dogs",
        "SELECT name FROM dogs LIMIT x",
        "SELECT T9.name FROM dogs AS T1",
        deep.as_str(),
        many_quotes.as_str(),
    ];
    let gold = "SELECT name FROM dogs";
    for p in inputs {
        let e = esm(&f.spider, gold, p, SpiderEvalOptions::default()).unwrap();
        let q = esm_plus(&f.plus, gold, p, EsmPlusOptions::default()).unwrap();
        assert!(!q.verdict, "{:.60}", p);
        let _ = e;
        // As gold, the same inputs are reported as errors (or parsed), never a panic.
        let _ = esm(&f.spider, p, gold, SpiderEvalOptions::default());
        let _ = esm_plus(&f.plus, p, gold, EsmPlusOptions::default());
    }
}

/// A left-deep OR chain of 2,000 terms (the issue's; 30,000 pass in release, but the unoptimised test build drops sqlparser's deep tree with larger frames) (the parser's recursion limit does not bound it) is
/// lowered without recursion and compared; an arithmetic chain nested past the lowering's depth
/// bound is refused with a reason — neither overflows the stack (2,000 terms used to abort the
/// process). Runs on a thread with a tokio worker's 2 MiB stack.
#[test]
fn long_or_chains_lower_and_deep_nesting_is_refused_without_overflowing_the_stack() {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let f = fixture();
            let terms: Vec<String> = (0..2_000).map(|i| format!("dog_id = {i}")).collect();
            let gold = format!("SELECT name FROM dogs WHERE {}", terms.join(" OR "));
            let mut reversed = terms.clone();
            reversed.reverse();
            let pred = format!("SELECT name FROM dogs WHERE {}", reversed.join(" OR "));
            let out = esm_plus(&f.plus, &gold, &pred, EsmPlusOptions::default())
                .expect("a long OR chain is lowered");
            assert!(out.verdict, "the same disjuncts in another order");
            let deep = format!(
                "SELECT name FROM dogs WHERE age = {}",
                vec!["1"; 5_000].join(" + ")
            );
            let refused = esm_plus(&f.plus, &deep, &deep, EsmPlusOptions::default());
            let text = match refused {
                Err(e) => e.to_string(),
                Ok(out) => format!("{out:?}"),
            };
            assert!(text.contains("deeper than"), "{text}");
        })
        .unwrap()
        .join()
        .unwrap();
}
