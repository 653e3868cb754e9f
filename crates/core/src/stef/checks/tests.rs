//! Unit tests of the checks (helpers of every part, and each check firing and staying silent).

use super::evidence::*;
use super::*;

#[test]
fn definitions_are_read_into_values_and_columns() {
    assert_eq!(
        quoted_equalities("T1.element = 'cl' and bond_type = ' = '"),
        vec![
            DefinedValue {
                column: "T1.element",
                value: "cl"
            },
            DefinedValue {
                column: "bond_type",
                value: " = "
            }
        ]
    );
    assert_eq!(
        defined_columns("first_name, last_name", None),
        vec!["first_name", "last_name"]
    );
    assert_eq!(
        defined_columns("superhero_name", None),
        vec!["superhero_name"]
    );
    assert!(defined_columns("the name of the hero", None).is_empty());
    assert!(defined_columns("label = '+'", None).is_empty());
    assert!(
        defined_columns("weight", None).is_empty(),
        "a plain word may be prose"
    );
    assert_eq!(unquoted("a = 'x/y' / \"b\""), "a =  / ");
}

#[test]
fn words_are_matched_whole() {
    assert!(contains_word(
        "select superhero_name from t",
        "superhero_name"
    ));
    assert!(!contains_word(
        "select full_superhero_name from t",
        "superhero_name"
    ));
    assert!(!contains_word("", "x"));
}

/// The codes `run` finds for a question, enriched question and SQLite query (no catalogue;
/// references collected when the daemon collects them without one: a division, a quoted
/// definition).
fn codes_for(question: &str, enriched: Option<&str>, sql: &str) -> Vec<FindingCode> {
    let mut options = crate::sqlspec::ExtractOptions::for_dialect(Some("sqlite"));
    options.collect_references =
        sql.contains('/') || enriched.is_some_and(|e| e.contains(['\'', '"']));
    let spec = crate::sqlspec::extract_with(sql, &options).expect("test SQL parses");
    let question_spec = QuestionSpec::default();
    let profile = RuleProfile::default();
    run(&CheckInput {
        texts: &QuestionTexts::new(question, enriched),
        sql,
        spec: &spec,
        question_spec: &question_spec,
        dialect: Some("sqlite"),
        schema: None,
        profile: &profile,
    })
    .into_iter()
    .map(|f| f.code)
    .collect()
}

#[test]
fn the_kind_of_answer_asked_for_against_the_kind_the_sql_gives() {
    let fires = |code: FindingCode, q: &str, e: Option<&str>, sql: &str| {
        codes_for(q, e, sql).contains(&code)
    };
    use FindingCode::{AggregateForList, LimitOverAggregate, OrderByNotCount};
    // A list asked for, a count given; a count asked for, a number given.
    let which = "Which non-carcinogenic molecules consisted more than 5 atoms?";
    assert!(fires(
        AggregateForList,
        which,
        None,
        "SELECT COUNT(molecule_id) FROM atom GROUP BY molecule_id HAVING COUNT(atom_id) > 5"
    ));
    assert!(!fires(
        AggregateForList,
        which,
        None,
        "SELECT molecule_id FROM atom GROUP BY molecule_id HAVING COUNT(atom_id) > 5"
    ));
    assert!(!fires(
        AggregateForList,
        "Which county has the highest number of schools?",
        None,
        "SELECT MAX(n) FROM t"
    ));
    // The least numerous answered by the attribute's own order.
    let least = "Which element is the least numerous in non-carcinogenic molecules?";
    assert!(fires(
        OrderByNotCount,
        least,
        None,
        "SELECT element FROM atom ORDER BY element ASC LIMIT 1"
    ));
    assert!(!fires(
        OrderByNotCount,
        least,
        None,
        "SELECT element FROM atom GROUP BY element ORDER BY COUNT(element) LIMIT 1"
    ));
    assert!(fires(
        OrderByNotCount,
        "Which element?",
        Some("Which element? least numerous refers to MIN(COUNT(element))"),
        "SELECT element FROM atom ORDER BY element LIMIT 1"
    ));
    // A ranking over one aggregated row.
    assert!(fires(
        LimitOverAggregate,
        "What is the most common bond type?",
        None,
        "SELECT COUNT(bond_type) FROM bond ORDER BY bond_type DESC LIMIT 1"
    ));
    assert!(!fires(
        LimitOverAggregate,
        "What is the most common bond type?",
        None,
        "SELECT bond_type, COUNT(*) FROM bond GROUP BY bond_type ORDER BY 2 DESC LIMIT 1"
    ));
}

#[test]
fn a_defined_one_letter_value_is_not_found_in_the_sqls_other_words() {
    // "carbon refers to element = 'c'": `select` has a c, the SQL compares with 'si'.
    let q = "Identify by their ID the molecules in which there is carbon.";
    let e = format!("{q} carbon refers to element = 'c';");
    let codes = codes_for(
        q,
        Some(&e),
        "SELECT DISTINCT molecule_id FROM atom WHERE element = 'si'",
    );
    assert!(
        codes.contains(&FindingCode::EvidenceValueMismatch),
        "{codes:?}"
    );
    let codes = codes_for(
        q,
        Some(&e),
        "SELECT DISTINCT molecule_id FROM atom WHERE element = 'c'",
    );
    assert!(
        !codes.contains(&FindingCode::EvidenceValueMismatch),
        "{codes:?}"
    );
}

#[test]
fn literals_must_come_from_the_question_or_its_enrichment() {
    let fires = |q: &str, e: Option<&str>, sql: &str| {
        codes_for(q, e, sql).contains(&FindingCode::LiteralNotInQuestion)
    };
    // BIRD 223 (SuperSQL): the id misspelt; 1468: the name misspelt.
    let q = "What are the atom IDs of the bond TR000_2_5?";
    let e = format!("{q} TR000_2_5 is the bond id");
    assert!(fires(
        q,
        Some(&e),
        "SELECT atom_id FROM connected WHERE bond_id = 'TR_000_2_5'"
    ));
    assert!(!fires(
        q,
        Some(&e),
        "SELECT atom_id FROM connected WHERE bond_id = 'TR000_2_5'"
    ));
    let q = "Where is the hometown of Garrett Gerke?";
    assert!(fires(
        q,
        None,
        "SELECT city FROM member WHERE first_name = 'Garrett' AND last_name = 'Girke'"
    ));
    assert!(!fires(
        q,
        None,
        "SELECT city FROM member WHERE first_name = 'Garrett' AND last_name = 'Gerke'"
    ));
    // A value only the enrichment names; other case; IN lists and LIKE patterns piece by piece.
    let q = "List the heroes with blue eyes.";
    let e = format!("{q} blue eyes refers to colour.colour = 'Blue'");
    assert!(!fires(
        q,
        Some(&e),
        "SELECT name FROM hero WHERE colour = 'BLUE'"
    ));
    assert!(!fires(
        q,
        Some(&e),
        "SELECT name FROM hero WHERE colour IN ('Blue')"
    ));
    assert!(fires(
        q,
        Some(&e),
        "SELECT name FROM hero WHERE colour IN ('Blue', 'Green')"
    ));
    assert!(!fires(
        q,
        Some(&e),
        "SELECT name FROM hero WHERE colour LIKE '%blu%'"
    ));
    // Spacing, plural and stem variants (Spider 1007, BIRD 1323).
    assert!(!fires(
        "Which students live in North Carolina?",
        None,
        "SELECT name FROM students WHERE state = 'NorthCarolina'"
    ));
    assert!(!fires(
        "Which events were not fundraisers?",
        None,
        "SELECT name FROM event WHERE type != 'Fundraising'"
    ));
    // Left alone: numbers and dates, codes under three characters, flag values, non-filters.
    let q = "Who received funds on 9/9/2019 with a medium t-shirt in HD?";
    for sql in [
        "SELECT name FROM income WHERE date_received = '2019-09-09'",
        "SELECT name FROM member WHERE size = 'M'",
        "SELECT name FROM channel WHERE hd = 'yes'",
        "SELECT CASE WHEN size = 'Large' THEN 'x' END FROM member",
    ] {
        assert!(!fires(q, None, sql), "{sql}");
    }
}

#[test]
fn compared_numbers_must_be_stated() {
    let fires = |q: &str, e: Option<&str>, sql: &str| {
        codes_for(q, e, sql).contains(&FindingCode::NumberNotInQuestion)
    };
    // BIRD 729 (CHESS-GPT-4o-mini): an invented threshold under an average.
    let q = "What is the average height of the superheroes from Marvel Comics?";
    let e = format!(
        "{q} superheroes from Marvel Comics refers to publisher_name = 'Marvel Comics'; \
         average height of the superheroes refers to AVG(height_cm)"
    );
    let gold = "SELECT AVG(T1.height_cm) FROM superhero AS T1 INNER JOIN publisher AS T2 \
                ON T1.publisher_id = T2.id WHERE T2.publisher_name = 'Marvel Comics'";
    assert!(!fires(q, Some(&e), gold));
    assert!(fires(q, Some(&e), &format!("{gold} AND T1.height_cm > 0")));
    // Digits, thousands separators, money, number words, once/single, percentages as
    // fractions, decades, and an ordering's integer neighbour ("at least 3" is `> 2`).
    for (q, sql) in [
        (
            "Which student was able to generate income more than $40?",
            "SELECT m FROM income WHERE amount > 40",
        ),
        (
            "Cities with over 1,000 people?",
            "SELECT c FROM city WHERE population > 1000",
        ),
        (
            "Countries that speak at least 3 languages.",
            "SELECT c FROM cl GROUP BY c HAVING COUNT(*) > 2",
        ),
        (
            "Templates used in more than a single document?",
            "SELECT t FROM d GROUP BY t HAVING count(*) > 1",
        ),
        (
            "Visitors who came more than once.",
            "SELECT v FROM visit GROUP BY v HAVING count(*) > 1",
        ),
        (
            "Players with two or more goals.",
            "SELECT p FROM g GROUP BY p HAVING count(*) >= 2",
        ),
        (
            "Schools with an eligible rate above 80%?",
            "SELECT s FROM frpm WHERE rate > 0.8",
        ),
        (
            "Films of the 1990s.",
            "SELECT f FROM film WHERE year >= 1990 AND year < 2000",
        ),
        // Equality with 0 or 1 is a flag test.
        (
            "Which members are active?",
            "SELECT m FROM member WHERE is_active = 1",
        ),
    ] {
        assert!(!fires(q, None, sql), "{q} / {sql}");
    }
    // An id taken from nowhere.
    assert!(fires(
        "Which superheroes have blue eyes?",
        None,
        "SELECT superhero_name FROM superhero WHERE eye_colour_id = 7"
    ));
}

#[test]
fn requested_rounding_needs_a_rounding_function() {
    // BIRD 226: "… as a percentage with five decimal places".
    let q = "What is the percentage of double bonds in the molecule TR008? Please provide your answer as a percentage with five decimal places.";
    let fires = |sql: &str| codes_for(q, None, sql).contains(&FindingCode::RoundingMissing);
    assert!(fires(
        "SELECT CAST(SUM(CASE WHEN bond_type = '=' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(bond_id) FROM bond WHERE molecule_id = 'TR008'"
    ));
    assert!(!fires(
        "SELECT ROUND(CAST(SUM(CASE WHEN bond_type = '=' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(bond_id), 5) FROM bond WHERE molecule_id = 'TR008'"
    ));
    assert!(!fires(
        "SELECT printf('%.5f', 100.0 * SUM(bond_type = '=') / COUNT(*)) FROM bond"
    ));
    assert!(
        !codes_for(
            "What is the percentage of double bonds?",
            None,
            "SELECT 100.0 * SUM(bond_type = '=') / COUNT(*) FROM bond"
        )
        .contains(&FindingCode::RoundingMissing),
        "no precision asked for"
    );
}

#[test]
fn a_formulas_operands_are_compared_with_the_sqls_division() {
    let fires = |e: &str, sql: &str| {
        codes_for(
            "What is the percentage of carbon in double-bond molecules?",
            Some(e),
            sql,
        )
        .contains(&FindingCode::FormulaOperandMismatch)
    };
    let evidence =
        "carbon refers to element = 'c'; percentage = DIVIDE(SUM(element = 'c'), COUNT(atom_id))";
    // The formula followed: silent, whatever the aliases and the scaling.
    assert!(!fires(
        evidence,
        "SELECT CAST(SUM(CASE WHEN T1.element = 'c' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(T1.atom_id) FROM atom AS T1"
    ));
    // Another denominator: bonds counted where atoms are defined.
    assert!(fires(
        evidence,
        "SELECT CAST(SUM(CASE WHEN atom.element = 'c' THEN 1 ELSE 0 END) AS REAL) / COUNT(bond.bond_id) FROM atom JOIN bond ON atom.molecule_id = bond.molecule_id"
    ));
    // A summed condition the numerator leaves out.
    let two = "percentage = DIVIDE(SUM(label = '+' and element = 'h'), COUNT(molecule_id)) * 100.0";
    assert!(fires(
        two,
        "SELECT CAST(SUM(CASE WHEN molecule.label = '+' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(molecule.molecule_id) FROM atom JOIN molecule ON atom.molecule_id = molecule.molecule_id WHERE atom.element = 'h'"
    ));
    assert!(!fires(
        two,
        "SELECT CAST(SUM(CASE WHEN molecule.label = '+' AND atom.element = 'h' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(molecule.molecule_id) FROM atom JOIN molecule ON atom.molecule_id = molecule.molecule_id"
    ));
    // Prose in the formula names no column; a COUNT(x where …) numerator is not a summed
    // condition.
    assert!(!fires(
        "percentage = DIVIDE(COUNT(male clients), COUNT(clients))",
        "SELECT CAST(SUM(IIF(gender = 'M', 1, 0)) AS REAL) * 100 / COUNT(gender) FROM client"
    ));
    assert!(!fires(
        "percentage = Divide(Count(UserId where Age BETWEEN 13 AND 18), Count(UserId))",
        "SELECT CAST(SUM(CASE WHEN age BETWEEN 13 AND 18 THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(userid) FROM users"
    ));
    // Counting any column of one entity counts the same rows; a conditional count's condition
    // may be the SQL's WHERE; a filter the formula writes after WHERE may be too.
    let sql = "SELECT CAST(SUM(CASE WHEN T1.colour = 'Blue' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(T1.id) FROM superhero AS T1 WHERE T1.gender = 'Female'";
    for e in [
        "percentage = DIVIDE(SUM(colour = 'Blue'), COUNT(superhero_name))",
        "percentage = DIVIDE(SUM(colour = 'Blue'), COUNT(gender = 'Female'))",
        "percentage = DIVIDE(SUM(colour = 'Blue' WHERE gender = 'Female'), COUNT(id))",
    ] {
        assert!(!fires(e, sql), "{e}");
    }
    assert_eq!(
        divide_operands("x = DIVIDE(SUM(a = 'p,q'), COUNT(b)) * 100"),
        Some(("SUM(a = 'p,q')", " COUNT(b)"))
    );
    assert_eq!(
        divide_operands("DIVIDE(SUM(a); COUNT(b))"),
        Some(("SUM(a)", " COUNT(b)"))
    );
    assert_eq!(divide_operands("DIVIDE(SUM(a)"), None);
}

#[test]
fn formulas_are_recognised_as_on_the_uppercase_unquoted_copy() {
    // What `states_formula` stands for: the uppercase text searched for the calls, the text
    // without its quoted strings for a slash.
    let copied = |t: &str| {
        if !t.contains(['(', '/']) {
            return false;
        }
        let u = t.to_ascii_uppercase();
        u.contains("DIVIDE(") || u.contains("SUBTRACT(") || unquoted_chars(t).any(|c| c == '/')
    };
    let mut texts = crate::shared_data::texts(
        &["bird/dev.jsonl", "spider/dev.jsonl"],
        &["evidence", "question", "gold_sql"],
    );
    texts.extend(
        [
            "x = DIVIDE(a, b)",
            "x = divide (a, b)",
            "x = Subtract(a, b)",
            "'a/b'",
            "\"a/b\" / 2",
            "'it''s' / 2",
            "'unterminated / here",
            "é/ü",
            "'é/' ü",
            "subtract(",
            "SUBTRACT",
            "(/)",
            "",
        ]
        .map(str::to_string),
    );
    let formulas = crate::shared_data::agree_on(&texts, states_formula, copied);
    assert!(formulas > 100, "only {formulas} texts state a formula");
}

#[test]
fn unquoted_runs_are_the_unquoted_characters() {
    // `unquoted` copies runs between the quotes; the reference keeps character by character
    // what lies outside them. Every shared-data text, and random texts heavy in both quotes.
    let mut texts = crate::shared_data::texts(
        &["bird/dev.jsonl", "spider/dev.jsonl"],
        &["evidence", "question", "gold_sql"],
    );
    texts.extend(crate::shared_data::random_texts(
        b"'\"a/ ()",
        20_000,
        14,
        0x2545_f491_4f6c_dd1d,
    ));
    texts.extend(["'é/' ü", "\"ü'\" é", "'", "\"", ""].map(str::to_string));
    let mut shortened = 0;
    for text in &texts {
        let expected: String = unquoted_chars(text).collect();
        assert_eq!(unquoted(text), expected, "{text:?}");
        shortened += usize::from(expected.len() < text.len());
    }
    assert!(shortened > 1_000, "only {shortened} texts have quotes");
}

#[test]
fn distinct_asks_are_found_as_by_substring_search() {
    // `asks_distinct` finds which of its words occur in one pass over their first letters; the
    // reference searches for each word. Every lowercased shared-data text, and random texts made
    // of the words' pieces.
    let reference = |lower: &str| {
        ["distinct", "different", "unique"].iter().any(|w| {
            lower.contains(w)
                && contains_word(lower, w)
                && ![" id", " identifier", " from", " than"]
                    .iter()
                    .any(|after| contains_word(lower, &format!("{w}{after}")))
        })
    };
    let mut texts: Vec<String> = crate::shared_data::texts(
        &["bird/dev.jsonl", "spider/dev.jsonl"],
        &["evidence", "question", "gold_sql"],
    )
    .iter()
    .map(|t| t.to_lowercase())
    .collect();
    for seed in [1u64, 2, 3] {
        texts.extend(
            crate::shared_data::random_texts(b"xywzv. ", 5_000, 12, seed)
                .iter()
                .map(|t| {
                    t.replace('x', "distinct")
                        .replace('y', "unique")
                        .replace('w', "different")
                        .replace('z', " id")
                        .replace('v', " from")
                }),
        );
    }
    let asks = crate::shared_data::agree_on(&texts, asks_distinct, reference);
    assert!(asks > 100, "only {asks} texts ask for distinct values");
}

/// `contains_without_spaces` is the spaceless copies' `contains`: every question and evidence
/// of the shared data against the gold SQL's quoted literals and pieces of the texts
/// themselves, edge cases, and random texts over a small alphabet with spaces.
#[test]
fn spaceless_containment_is_as_on_the_spaceless_copies() {
    let copied = |text: &str, piece: &str| {
        text.split(' ')
            .collect::<String>()
            .contains(&piece.split(' ').collect::<String>())
    };
    let texts = crate::shared_data::texts(
        &["bird/dev.jsonl", "spider/dev.jsonl"],
        &["question", "evidence"],
    );
    let sqls = crate::shared_data::texts(&["bird/dev.jsonl", "spider/dev.jsonl"], &["gold_sql"]);
    let literals: Vec<String> = sqls
        .iter()
        .flat_map(|sql| sql.split('\'').skip(1).step_by(2).map(str::to_lowercase))
        .collect();
    let (mut checked, mut found) = (0, 0);
    for (i, text) in texts.iter().enumerate() {
        let text = text.to_lowercase();
        let own: Vec<String> = text
            .split(' ')
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| w.join(""))
            .collect();
        for piece in literals.iter().skip(i % 50).step_by(50).chain(&own) {
            let expected = copied(&text, piece);
            assert_eq!(
                contains_without_spaces(&text, piece),
                expected,
                "{piece:?} in {text:?}"
            );
            checked += 1;
            found += usize::from(expected);
        }
    }
    for (text, piece) in [
        ("north carolina", "northcarolina"),
        ("northcarolina", "north carolina"),
        ("a b", " "),
        ("", ""),
        ("", "a"),
        ("ab", "abc"),
        ("aab", "ab"),
        ("é t é", "été"),
    ] {
        assert_eq!(
            contains_without_spaces(text, piece),
            copied(text, piece),
            "{piece:?} in {text:?}"
        );
    }
    let random = crate::shared_data::random_texts(b"ab  c", 4_000, 12, 0x1234_5678);
    for pair in random.chunks(2) {
        if let [text, piece] = pair {
            let expected = copied(text, piece);
            assert_eq!(
                contains_without_spaces(text, piece),
                expected,
                "{piece:?} in {text:?}"
            );
            found += usize::from(expected);
            checked += 1;
        }
    }
    assert!(
        checked > 10_000 && found > 1_000,
        "{checked} checked, {found} found"
    );
}
