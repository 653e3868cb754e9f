//! STEF end to end from SQL text (sqlspec extraction → question spec → alignment →
//! normalization rules → deterministic judge → row) on the paper's Listings 2–6 and on
//! non-scorable input.

use sqlgrade::event::Event;
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::judge::{Judge, JudgeRequest};
use sqlgrade::stef::profile::RuleProfile;
use sqlgrade::stef::{
    self, EnrichmentStatus, FilterStatus, NormalizationRule, StefOutcome, Verdict,
};

const LISTING_2: &str = "SELECT Year, Country, SUM(Spend) AS TotalSpend FROM spend_table \
     WHERE Country ILIKE '%China%' GROUP BY Year, Country";
const LISTING_3: &str = "SELECT Country, SUM(Spend) AS TotalSpend FROM spend_table \
     WHERE Country ILIKE '%China%' GROUP BY Country";
const LISTING_4: &str = "SELECT Year, Country, SUM(Spend) AS TotalSpend FROM spend_table \
     WHERE Country ILIKE '%China%' GROUP BY Year, Country ORDER BY SUM(Spend) DESC";
const LISTING_5: &str = "SELECT Year, Country, SUM(Spend) AS TotalSpend FROM spend_table \
     WHERE Country ILIKE '%China%' GROUP BY Year, Country ORDER BY SUM(Spend) DESC LIMIT 20000";
const LISTING_6: &str = "SELECT Year, Country, SUM(Spend) AS TotalSpend\n\
     FROM spend_table\n\
     WHERE Country ILIKE '%China%' -- Required filter: correctly applied\n\
     GROUP BY Year, Country -- Rule 1 and Rule 2\n\
     ORDER BY SUM(Spend) DESC -- Rule 3\n\
     LIMIT 20000 -- Rule 4";

fn event(question: &str, enriched: Option<&str>, sql: &str) -> Event {
    Event::from_value(serde_json::json!({
        "event_id": "paper",
        "app_id": "example-app",
        "question": question,
        "enriched_question": enriched,
        "sql": sql,
        "dialect": "snowflake",
    }))
    .unwrap()
}

fn score(ev: &Event, profile: &RuleProfile) -> StefOutcome {
    let prepared = stef::prepare(ev, profile).unwrap();
    let assessment = DeterministicJudge.assess_prepared(&prepared);
    stef::finish(&prepared, assessment, profile)
}

fn fired(out: &StefOutcome) -> Vec<NormalizationRule> {
    out.alignment.rules_fired.clone()
}

#[test]
fn listing_2_to_5_each_rule_fires_without_penalty() {
    let p = RuleProfile::default();
    let q = "Total spend in China per year";
    let out = score(&event(q, None, LISTING_2), &p);
    assert!(fired(&out).contains(&NormalizationRule::RequiredGroupBy));
    let out3 = score(&event("Total spend in China", None, LISTING_3), &p);
    assert!(fired(&out3).contains(&NormalizationRule::BenignGroupBy));
    let out4 = score(&event(q, None, LISTING_4), &p);
    assert!(fired(&out4).contains(&NormalizationRule::DefaultOrderBy));
    let out5 = score(&event(q, None, LISTING_5), &p);
    assert!(fired(&out5).contains(&NormalizationRule::SafetyLimit));
    for o in [&out, &out3, &out4, &out5] {
        assert_eq!(o.filter_status, FilterStatus::FullyApplied);
        assert_eq!(
            o.assessment.verdict,
            Verdict::Correct,
            "{}",
            o.assessment.rationale
        );
        assert_eq!(o.score.phi, 80.0);
    }
}

#[test]
fn listing_6_scores_the_deterministic_maximum_for_its_questions() {
    let p = RuleProfile::default();
    for (q, e) in [
        ("Total spend in China per year", None),
        ("Total spend in China by year", None),
        ("What was the total spend in China for each year?", None),
        (
            "Total spend in China per year",
            Some("Sum of Spend for Country = China, grouped by Year"),
        ),
    ] {
        let out = score(&event(q, e, LISTING_6), &p);
        assert_eq!(
            fired(&out),
            vec![
                NormalizationRule::RequiredGroupBy,
                NormalizationRule::BenignGroupBy,
                NormalizationRule::DefaultOrderBy,
                NormalizationRule::SafetyLimit,
            ],
            "{q}"
        );
        assert_eq!(out.filter_status, FilterStatus::FullyApplied, "{q}");
        assert_eq!(
            out.assessment.verdict,
            Verdict::Correct,
            "{q}: {}",
            out.assessment.rationale
        );
        assert_eq!(out.score.phi, 80.0, "{q}");
        if e.is_some() {
            assert_eq!(out.assessment.enrichment.status, EnrichmentStatus::Faithful);
        }
    }
}

#[test]
fn listing_6_with_the_example_app_profile() {
    // Listing 1's profile maps spend → TotalSpendUSD; the agent's SQL uses the mapped column and
    // adds the app's benign soft-delete guard and the tenant filter the access layer injects.
    let profile = sqlgrade::score::profiles::load_profile(
        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules/example-app.toml"),
    )
    .unwrap();
    let sql = "SELECT Year, Country, SUM(TotalSpendUSD) AS TotalSpend FROM spend_table \
               WHERE Country ILIKE '%China%' AND is_deleted = 0 AND tenant_id = 'acme' \
               GROUP BY Year, Country ORDER BY SUM(TotalSpendUSD) DESC LIMIT 20000";
    let out = score(&event("Total spend in China per year", None, sql), &profile);
    assert_eq!(out.filter_status, FilterStatus::FullyAppliedWithExtras);
    assert!(
        out.alignment.extras.iter().all(|e| e.benign),
        "{:?}",
        out.alignment.extras
    );
    assert_eq!(out.alignment.ignored.len(), 1);
    assert_eq!((out.score.base, out.score.leniency), (10, 1));
    assert_eq!(out.score.phi, 80.0);
}

#[test]
fn what_the_rules_do_not_excuse_is_penalized() {
    let p = RuleProfile::default();
    // Missing the required filter: not applied → incorrect.
    let out = score(
        &event(
            "Total spend in China per year",
            None,
            "SELECT Year, SUM(Spend) FROM spend_table GROUP BY Year",
        ),
        &p,
    );
    assert_eq!(out.filter_status, FilterStatus::NotApplied);
    assert_eq!(out.assessment.verdict, Verdict::Incorrect);
    // A small LIMIT nobody asked for: flagged.
    let out = score(
        &event(
            "Total spend in China per year",
            None,
            "SELECT Year, SUM(Spend) FROM spend_table WHERE Country = 'China' GROUP BY Year LIMIT 3",
        ),
        &p,
    );
    assert_eq!(out.alignment.suspicious_limit, Some(3));
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // Wrong aggregate.
    let out = score(
        &event(
            "Average spend in China per year",
            None,
            "SELECT Year, SUM(Spend) FROM spend_table WHERE Country = 'China' GROUP BY Year",
        ),
        &p,
    );
    assert!(!out.alignment.aggregations_match);
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // Grouping the question did not ask for.
    let out = score(
        &event(
            "Total spend in China",
            None,
            "SELECT Region, SUM(Spend) FROM spend_table WHERE Country = 'China' GROUP BY Region",
        ),
        &p,
    );
    assert!(
        out.alignment
            .rules_fired
            .contains(&NormalizationRule::RequiredGroupBy)
    );
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "rule 1 exempts the mixed SELECT"
    );
    let out = score(
        &event(
            "Total spend in China",
            None,
            "SELECT SUM(Spend) FROM spend_table WHERE Country = 'China' GROUP BY Region",
        ),
        &p,
    );
    assert_eq!(out.alignment.unexplained_group_by, vec!["region"]);
    assert_eq!(out.assessment.verdict, Verdict::LikelyCorrect);
}

#[tokio::test]
async fn non_scorable_sql_becomes_a_zero_row_never_a_crash() {
    let p = RuleProfile::default();
    for (sql, status) in [
        ("", "parse_error"),
        ("   ", "parse_error"),
        ("SELEC name FRM heroes", "parse_error"),
        ("DROP TABLE heroes", "not_a_query"),
        ("INSERT INTO t VALUES (1)", "not_a_query"),
        ("SELECT 1; SELECT 2", "multiple_statements"),
    ] {
        let ev = event("How many heroes?", None, sql);
        let err = stef::prepare(&ev, &p).unwrap_err();
        let row = stef::non_scorable_row(&ev, "2026-01-01T00:00:00Z", &err, &p);
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["status"], status, "{sql:?}");
        assert_eq!(json["value"], 0.0);
        assert_eq!(json["quality_tier"], "poor");
        assert!(!json["details"]["error"].as_str().unwrap().is_empty());
    }
    // The async Judge interface gives the same assessment as the synchronous helper.
    let ev = event("Total spend in China per year", None, LISTING_6);
    let prepared = stef::prepare(&ev, &p).unwrap();
    let via_trait = DeterministicJudge
        .assess(JudgeRequest {
            event: &ev,
            prepared: &prepared,
            profile: &p,
        })
        .await
        .unwrap();
    assert_eq!(via_trait, DeterministicJudge.assess_prepared(&prepared));
    assert_eq!(DeterministicJudge.kind(), "deterministic");
}
