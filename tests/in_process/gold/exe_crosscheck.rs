//! esm_plus.md §6 "EXE cross-checks": on seeded fixture data, execution accuracy (Spider
//! test-suite convention) disagrees with ESM's false positives, agrees with ESM+ on the rules
//! that are sound, and shows the classic EXE false positive (#10) that ESM+ rejects.

use sqlgrade::exec::Executor;
use sqlgrade::metrics::esm::ir::PlusSchema;
use sqlgrade::metrics::esm::plus::{EsmPlusOptions, esm_plus};
use sqlgrade::metrics::esm::{SchemaCatalog, SpiderEvalOptions, SpiderSchema, esm};
use sqlgrade::metrics::ex::{ExConvention, results_match};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};

const DDL: &str = "
CREATE TABLE owners (owner_id INTEGER PRIMARY KEY, first_name TEXT, state TEXT);
CREATE TABLE breeds (breed_code TEXT PRIMARY KEY, breed_name TEXT);
CREATE TABLE dogs (
  dog_id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES owners(owner_id),
  breed_code TEXT REFERENCES breeds(breed_code), name TEXT NOT NULL UNIQUE, nickname TEXT,
  age INTEGER, weight REAL NOT NULL);
INSERT INTO owners VALUES (1, 'Ann', 'VA'), (2, 'Bob', 'NY'), (3, 'Cid', 'VA');
INSERT INTO breeds VALUES ('BUL', 'Bulldog'), ('HUS', 'Husky'), ('POO', 'Poodle');
INSERT INTO dogs VALUES
  (1, 1, 'BUL', 'Rex', 'R', 3, 20.0),
  (2, 1, 'HUS', 'Max', 'R', 5, 30.0),
  (3, 2, NULL, 'Bella', NULL, 150, 25.0),
  (4, 2, 'POO', 'Ann', 'B', 1, 35.0);";

#[test]
fn exe_cross_checks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("dogs")).unwrap();
    let path = dir.path().join("dogs/dogs.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(DDL)
        .unwrap();
    let mut cat = SchemaCatalog::new();
    sqlgrade::score::sqlite::schema::introspect_sqlite_dir(&mut cat, dir.path()).unwrap();
    let db = cat.get("dogs").unwrap();
    let (plus, spider) = (PlusSchema::new(db), SpiderSchema::new(db));
    let exec = SqliteExecutor::new(dir.path(), ExecLimits::default());
    let g1 = "SELECT T1.dog_id, T2.breed_name FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_code";
    // (#, gold, pred, EXE, ESM with checks on, ESM+)
    let cases = [
        (
            1,
            g1,
            "SELECT T1.dog_id, T2.breed_name FROM dogs AS T1 JOIN breeds AS T2 ON T1.breed_code = T2.breed_name",
            false,
            true,
            false,
        ),
        (
            3,
            "SELECT DISTINCT nickname FROM dogs",
            "SELECT nickname FROM dogs",
            false,
            true,
            false,
        ),
        (
            6,
            "SELECT name FROM dogs ORDER BY age DESC LIMIT 1",
            "SELECT name FROM dogs ORDER BY age DESC LIMIT 3",
            false,
            true,
            false,
        ),
        (
            14,
            "SELECT name FROM dogs WHERE age >= 100",
            "SELECT name FROM dogs WHERE age >= 200",
            false,
            false,
            false,
        ),
        (
            18,
            "SELECT T1.owner_id FROM owners AS T1 JOIN dogs AS T2 ON T1.first_name = T2.name",
            "SELECT T2.owner_id FROM owners AS T1 JOIN dogs AS T2 ON T1.first_name = T2.name",
            false,
            true,
            false,
        ),
        (
            7,
            "SELECT count(*) FROM dogs",
            "SELECT count(dog_id) FROM dogs",
            true,
            false,
            true,
        ),
        (
            9,
            "SELECT max(weight) FROM dogs",
            "SELECT weight FROM dogs ORDER BY weight DESC LIMIT 1",
            true,
            false,
            true,
        ),
        (
            15,
            "SELECT count(*) FROM dogs",
            "SELECT count(*) FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id",
            true,
            false,
            true,
        ),
        (
            27,
            "SELECT owner_id FROM owners EXCEPT SELECT owner_id FROM dogs",
            "SELECT owner_id FROM owners WHERE owner_id NOT IN (SELECT owner_id FROM dogs)",
            true,
            false,
            true,
        ),
        (
            10,
            "SELECT name FROM dogs WHERE weight = (SELECT max(weight) FROM dogs)",
            "SELECT name FROM dogs ORDER BY weight DESC LIMIT 1",
            true,
            false,
            false,
        ),
    ];
    let checks_on = SpiderEvalOptions {
        disable_value: false,
        disable_distinct: false,
    };
    for (n, g, p, want_ex, want_esm, want_plus) in cases {
        let gr = exec.execute("dogs", g).unwrap();
        let pr = exec.execute("dogs", p).unwrap();
        assert_eq!(
            results_match(&gr, &pr, ExConvention::SpiderTestSuite, g),
            want_ex,
            "#{n} EXE"
        );
        assert_eq!(
            esm(&spider, g, p, checks_on).unwrap().verdict,
            want_esm,
            "#{n} ESM"
        );
        assert_eq!(
            esm_plus(&plus, g, p, EsmPlusOptions::default())
                .unwrap()
                .verdict,
            want_plus,
            "#{n} ESM+"
        );
    }
}
