//! End-to-end STEF unit tests on hand-built SQL specs (the paper's Listings 2–6, every filter
//! status, Rapp rules, the deterministic judge, rows). They live beside the judges because
//! they drive STEF through the deterministic judge (STEF itself never imports a judge).

use crate::event::Event;
use crate::judge::deterministic::{DeterministicJudge, MAX_CONFIDENCE};
use crate::sqlspec::{AggFunc, FilterOp, SpecError, SqlSpec};
use crate::sqlspec::{Aggregation, Clause, Filter, FilterValue, OrderItem, Projection, SortDir};
use crate::stef::*;

fn col(name: &str) -> Projection {
    Projection {
        expr: name.into(),
        alias: None,
        aggregate: None,
        columns: vec![name.into()],
    }
}

fn agg(func: AggFunc, column: Option<&str>) -> Aggregation {
    Aggregation {
        func,
        column: column.map(str::to_string),
        distinct: false,
        arg: column.unwrap_or("*").to_string(),
    }
}

fn agg_proj(a: Aggregation, alias: Option<&str>) -> Projection {
    Projection {
        expr: format!("{}({})", align::agg_name(&a.func), a.arg),
        alias: alias.map(str::to_string),
        columns: a.column.iter().cloned().collect(),
        aggregate: Some(a),
    }
}

fn filter(lhs: &str, op: FilterOp, rhs: FilterValue) -> Filter {
    Filter {
        lhs: lhs.into(),
        op,
        rhs,
        clause: Clause::Where,
        in_disjunction: false,
        depth: 0,
    }
}

fn text(v: &str) -> FilterValue {
    FilterValue::Text(v.into())
}

fn num(v: &str) -> FilterValue {
    FilterValue::Number(v.into())
}

fn event(question: &str, enriched: Option<&str>) -> Event {
    let mut v = serde_json::json!({"event_id": "e1", "question": question, "sql": "SELECT 1", "app_id": "sales"});
    if let Some(e) = enriched {
        v["enriched_question"] = e.into();
    }
    Event::from_value(v).unwrap()
}

/// SELECT Year, Country, SUM(Spend) AS TotalSpend FROM spend_table WHERE Country ILIKE '%China%'
/// [GROUP BY …] [ORDER BY …] [LIMIT …] — the paper's running example.
fn spend_spec(group_by: &[&str], order: bool, limit: Option<u64>) -> SqlSpec {
    let sum = agg(AggFunc::Sum, Some("spend"));
    SqlSpec {
        dialect: "generic".into(),
        projections: vec![
            col("year"),
            col("country"),
            agg_proj(sum.clone(), Some("totalspend")),
        ],
        aggregations: vec![sum.clone()],
        filters: vec![filter("country", FilterOp::Contains, text("china"))],
        group_by: group_by.iter().map(|g| g.to_string()).collect(),
        order_by: if order {
            vec![OrderItem {
                expr: "sum(spend)".into(),
                dir: SortDir::Desc,
                aggregate: Some(sum),
            }]
        } else {
            vec![]
        },
        limit,
        tables: vec!["spend_table".into()],
        ..SqlSpec::default()
    }
}

fn run(ev: &Event, spec: SqlSpec, profile: &RuleProfile) -> StefOutcome {
    let prepared = prepare_with_spec(ev, profile, spec);
    let assessment = DeterministicJudge.assess_prepared(&prepared);
    finish(&prepared, assessment, profile)
}

const CHINA: &str = "Total spend in China per year";

#[test]
fn listing_2_required_group_by() {
    let out = run(
        &event(CHINA, None),
        spend_spec(&["year", "country"], false, None),
        &RuleProfile::default(),
    );
    assert!(
        out.alignment
            .rules_fired
            .contains(&NormalizationRule::RequiredGroupBy)
    );
    assert!(out.alignment.grouping_match, "{:?}", out.alignment);
    assert_eq!(out.filter_status, FilterStatus::FullyApplied);
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "{}",
        out.assessment.rationale
    );
    assert_eq!(out.score.phi, 80.0);
}

#[test]
fn listing_3_benign_group_by() {
    // SELECT Country, SUM(Spend) … WHERE Country ILIKE '%China%' GROUP BY Country.
    let mut spec = spend_spec(&["country"], false, None);
    spec.projections.remove(0);
    let out = run(
        &event("Total spend in China", None),
        spec,
        &RuleProfile::default(),
    );
    assert!(
        out.alignment
            .rules_fired
            .contains(&NormalizationRule::BenignGroupBy)
    );
    assert!(out.alignment.grouping_match);
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "{}",
        out.assessment.rationale
    );
    // Rule 2 alone (no mixed SELECT): a benign GROUP BY on the constrained column still passes.
    let mut spec = spend_spec(&["country"], false, None);
    spec.projections = vec![agg_proj(agg(AggFunc::Sum, Some("spend")), None)];
    let out = run(
        &event("Total spend in China", None),
        spec,
        &RuleProfile::default(),
    );
    assert_eq!(
        out.alignment.rules_fired,
        vec![NormalizationRule::BenignGroupBy]
    );
    assert!(out.alignment.grouping_match);
}

#[test]
fn listing_4_default_order_by() {
    let out = run(
        &event(CHINA, None),
        spend_spec(&["year", "country"], true, None),
        &RuleProfile::default(),
    );
    assert!(
        out.alignment
            .rules_fired
            .contains(&NormalizationRule::DefaultOrderBy)
    );
    assert!(!out.alignment.unexplained_order);
    assert_eq!(out.assessment.verdict, Verdict::Correct);
    // ASC on an aggregate is not a sensible default: flagged.
    let mut spec = spend_spec(&["year", "country"], true, None);
    spec.order_by[0].dir = SortDir::Asc;
    let out = run(&event(CHINA, None), spec, &RuleProfile::default());
    assert!(
        !out.alignment
            .rules_fired
            .contains(&NormalizationRule::DefaultOrderBy)
    );
    assert!(out.alignment.unexplained_order);
    assert_eq!(out.assessment.verdict, Verdict::LikelyCorrect);
    // An explicit ordering request means rule 3 does not apply (and nothing is unexplained).
    let out = run(
        &event("Total spend in China per year, sorted by spend", None),
        spend_spec(&["year", "country"], true, None),
        &RuleProfile::default(),
    );
    assert!(
        !out.alignment
            .rules_fired
            .contains(&NormalizationRule::DefaultOrderBy)
    );
    assert!(!out.alignment.unexplained_order);
}

#[test]
fn listing_5_safety_limit() {
    let out = run(
        &event(CHINA, None),
        spend_spec(&["year", "country"], true, Some(20000)),
        &RuleProfile::default(),
    );
    assert!(
        out.alignment
            .rules_fired
            .contains(&NormalizationRule::SafetyLimit)
    );
    assert_eq!(out.alignment.suspicious_limit, None);
    // Below λ_min without a top-k request: flagged for the verdict.
    let out = run(
        &event(CHINA, None),
        spend_spec(&["year", "country"], true, Some(10)),
        &RuleProfile::default(),
    );
    assert_eq!(out.alignment.suspicious_limit, Some(10));
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // λ_min is per app.
    let profile = RuleProfile {
        limit_min: 10,
        ..RuleProfile::default()
    };
    let out = run(
        &event(CHINA, None),
        spend_spec(&["year", "country"], true, Some(10)),
        &profile,
    );
    assert!(
        out.alignment
            .rules_fired
            .contains(&NormalizationRule::SafetyLimit)
    );
    // With a top-k request the LIMIT is the request, not a safety limit.
    let out = run(
        &event("Top 5 years by total spend in China", None),
        spend_spec(&["year", "country"], true, Some(5)),
        &RuleProfile::default(),
    );
    assert!(
        !out.alignment
            .rules_fired
            .contains(&NormalizationRule::SafetyLimit)
    );
    assert_eq!(out.alignment.top_k_mismatch, None);
}

#[test]
fn listing_6_all_rules_fire_and_nothing_is_penalized() {
    for question in [
        CHINA,
        "Total spend in China by year",
        "What is the total spend in China for each year?",
    ] {
        let out = run(
            &event(question, None),
            spend_spec(&["year", "country"], true, Some(20000)),
            &RuleProfile::default(),
        );
        assert_eq!(
            out.alignment.rules_fired,
            vec![
                NormalizationRule::RequiredGroupBy,
                NormalizationRule::BenignGroupBy,
                NormalizationRule::DefaultOrderBy,
                NormalizationRule::SafetyLimit
            ],
            "{question}"
        );
        assert_eq!(out.filter_status, FilterStatus::FullyApplied, "{question}");
        assert!(
            out.alignment.grouping_match && out.alignment.aggregations_match,
            "{question}: {:?}",
            out.alignment
        );
        assert_eq!(
            out.assessment.verdict,
            Verdict::Correct,
            "{question}: {}",
            out.assessment.rationale
        );
        assert_eq!(out.assessment.confidence, MAX_CONFIDENCE);
        // The deterministic maximum: B = 10, Γ = 0.8.
        assert_eq!(out.score.phi, 80.0, "{question}");
        assert_eq!(out.score.quality_tier, QualityTier::Good);
    }
}

#[test]
fn filter_statuses() {
    let profile = RuleProfile::default();
    let base = |filters: Vec<Filter>| SqlSpec {
        projections: vec![agg_proj(agg(AggFunc::Count, None), None)],
        aggregations: vec![agg(AggFunc::Count, None)],
        filters,
        ..SqlSpec::default()
    };
    let q = "How many heroes from Marvel Comics were born in 1990?";
    // fully_applied
    let out = run(
        &event(q, None),
        base(vec![
            filter("publisher_name", FilterOp::Eq, text("marvel comics")),
            filter("year(birth_date)", FilterOp::Eq, num("1990")),
        ]),
        &profile,
    );
    assert_eq!(
        out.filter_status,
        FilterStatus::FullyApplied,
        "{:?}",
        out.alignment
    );
    assert_eq!(out.score.sigma_filters, 5);
    // fully_applied_with_extras: both required filters and one extra.
    let with_extra = |extra: Filter| {
        run(
            &event(q, None),
            base(vec![
                filter("publisher_name", FilterOp::Eq, text("marvel comics")),
                filter("year(birth_date)", FilterOp::Eq, num("1990")),
                extra,
            ]),
            &profile,
        )
    };
    let out = with_extra(filter("height_cm", FilterOp::IsNotNull, FilterValue::Null));
    assert_eq!(out.filter_status, FilterStatus::FullyAppliedWithExtras);
    assert_eq!(out.alignment.extras[0].filter, "height_cm is_not_null");
    assert!(!out.alignment.extras[0].benign);
    assert_eq!((out.score.sigma_filters, out.score.leniency), (4, 0));
    assert_eq!(out.assessment.verdict, Verdict::LikelyCorrect);
    // An extra threshold the question never states is a finding (rule 3): `height_cm > 0`.
    let out = with_extra(filter("height_cm", FilterOp::Gt, num("0")));
    assert_eq!(out.alignment.extras[0].filter, "height_cm > 0");
    assert_eq!(
        out.findings.iter().map(|f| f.code).collect::<Vec<_>>(),
        vec![FindingCode::NumberNotInQuestion]
    );
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // An extra whose value the question never mentions is also a finding (rule 3).
    let out = with_extra(filter("alignment", FilterOp::Eq, text("good")));
    assert_eq!(out.filter_status, FilterStatus::FullyAppliedWithExtras);
    assert_eq!(
        out.findings.iter().map(|f| f.code).collect::<Vec<_>>(),
        vec![FindingCode::LiteralNotInQuestion]
    );
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // partially_applied
    let out = run(
        &event(q, None),
        base(vec![filter(
            "publisher_name",
            FilterOp::Contains,
            text("marvel"),
        )]),
        &profile,
    );
    assert_eq!(out.filter_status, FilterStatus::PartiallyApplied);
    assert_eq!(out.alignment.missing, vec!["? = 1990"]);
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    assert_eq!(out.score.phi, 25.0);
    // not_applied
    let out = run(&event(q, None), base(vec![]), &profile);
    assert_eq!(out.filter_status, FilterStatus::NotApplied);
    assert_eq!(out.assessment.verdict, Verdict::Incorrect);
    assert_eq!(out.score.phi, 0.0);
    // mismatched: right dimension, wrong value.
    let out = run(
        &event(
            "How many heroes have height above 200?",
            Some("height refers to height_cm; height_cm > 200"),
        ),
        base(vec![filter("height_cm", FilterOp::Gt, num("180"))]),
        &profile,
    );
    assert_eq!(out.filter_status, FilterStatus::NotApplied);
    assert_eq!(
        out.alignment.mismatched,
        vec!["height_cm > 200 vs height_cm > 180"]
    );
    assert_eq!(
        out.assessment.rationale,
        "rule 1: no required filter applied (mismatched filters height_cm > 200 vs height_cm > 180)"
    );
    // No filters required and none present.
    let out = run(
        &event("How many heroes are there?", None),
        base(vec![]),
        &profile,
    );
    assert_eq!(out.filter_status, FilterStatus::FullyApplied);
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "{}",
        out.assessment.rationale
    );
}

#[test]
fn having_justifies_grouping() {
    // SELECT full_name … GROUP BY full_name HAVING COUNT(power_id) > 15
    let count = agg(AggFunc::Count, Some("power_id"));
    let spec = SqlSpec {
        projections: vec![col("full_name")],
        aggregations: vec![count],
        filters: vec![Filter {
            clause: Clause::Having,
            ..filter("count(power_id)", FilterOp::Gt, num("15"))
        }],
        group_by: vec!["full_name".into()],
        ..SqlSpec::default()
    };
    let out = run(
        &event(
            "List the full names of the superheroes with over 15 super powers.",
            None,
        ),
        spec.clone(),
        &RuleProfile::default(),
    );
    assert_eq!(
        out.filter_status,
        FilterStatus::FullyApplied,
        "{:?}",
        out.alignment
    );
    assert!(out.alignment.grouping_match, "{:?}", out.alignment);
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "{}",
        out.assessment.rationale
    );
    // Without the HAVING the same grouping is unexplained.
    let mut no_having = spec;
    no_having.filters.clear();
    let out = run(
        &event("List the full names of the superheroes.", None),
        no_having,
        &RuleProfile::default(),
    );
    assert_eq!(out.alignment.unexplained_group_by, vec!["full_name"]);
}

#[test]
fn rapp_benign_ignore_and_mappings() {
    let q = "Total spend in China per year";
    let mut spec = spend_spec(&["year", "country"], false, None);
    spec.filters
        .push(filter("status", FilterOp::Eq, text("active")));
    spec.filters
        .push(filter("tenant_id", FilterOp::Eq, num("42")));
    // Without a profile both are non-benign extras.
    let out = run(&event(q, None), spec.clone(), &RuleProfile::default());
    assert_eq!(out.filter_status, FilterStatus::FullyAppliedWithExtras);
    assert_eq!(out.alignment.extras.len(), 2);
    assert_eq!(out.score.leniency, 0);
    // benign_filters + ignore_filters: δ_lenient restores the full base score.
    let profile = RuleProfile::from_toml_str(
        "benign_filters = [\"Status = 'Active'\"]\nignore_filters = [\"tenant_id\"]",
        "t.toml",
    )
    .unwrap();
    let out = run(&event(q, None), spec.clone(), &profile);
    assert_eq!(out.filter_status, FilterStatus::FullyAppliedWithExtras);
    assert_eq!(
        out.alignment.extras,
        vec![ExtraFilter {
            filter: "status = 'active'".into(),
            benign: true
        }]
    );
    assert_eq!(out.alignment.ignored, vec!["tenant_id = 42"]);
    assert_eq!((out.score.base, out.score.leniency), (10, 1));
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "{}",
        out.assessment.rationale
    );
    assert_eq!(out.score.phi, 80.0);
    // An ignored dimension is removed from the question side too.
    let out = run(
        &event("Total spend in China for tenant_id = 7", None),
        spec.clone(),
        &profile,
    );
    assert!(
        out.alignment
            .ignored
            .iter()
            .any(|i| i.starts_with("tenant_id = 7")),
        "{:?}",
        out.alignment.ignored
    );
    assert!(out.alignment.missing.is_empty());
    // column_mappings: the question's `region` is the SQL's RegionName.
    let mut spec = spend_spec(&["year", "country"], false, None);
    spec.filters = vec![filter("regionname", FilterOp::Eq, text("apac"))];
    let q = "Total spend per year where region = 'EMEA'";
    let out = run(&event(q, None), spec.clone(), &RuleProfile::default());
    assert_eq!(out.filter_status, FilterStatus::NotApplied);
    let mapped =
        RuleProfile::from_toml_str("[column_mappings]\nregion = \"RegionName\"", "m.toml").unwrap();
    let out = run(&event(q, None), spec, &mapped);
    assert_eq!(
        out.alignment.mismatched,
        vec!["regionname = 'emea' vs regionname = 'apac'"]
    );
}

#[test]
fn judge_disagreement_is_recorded_and_code_decides() {
    let ev = event(CHINA, None);
    let profile = RuleProfile::default();
    let prepared = prepare_with_spec(&ev, &profile, spend_spec(&["year", "country"], false, None));
    let mut assessment = DeterministicJudge.assess_prepared(&prepared);
    assessment.filter_status = Some(FilterStatus::PartiallyApplied);
    assessment.confidence = 0.9;
    let out = finish(&prepared, assessment, &profile);
    assert_eq!(out.filter_status, FilterStatus::FullyApplied);
    assert_eq!(
        out.judge_filter_status,
        Some(FilterStatus::PartiallyApplied)
    );
    assert_eq!(out.score.phi, 100.0);
    // A judge question spec different from the deterministic one is re-aligned (values normalized).
    let mut assessment = DeterministicJudge.assess_prepared(&prepared);
    assessment.question_spec.filters = vec![
        QuestionFilter {
            lhs: Some("Country".into()),
            op: FilterOp::Eq,
            value: "  'China' ".into(),
        },
        QuestionFilter {
            lhs: Some("year".into()),
            op: FilterOp::Eq,
            value: "2023".into(),
        },
    ];
    let out = finish(&prepared, assessment, &profile);
    assert_eq!(out.filter_status, FilterStatus::PartiallyApplied);
    assert_eq!(
        out.alignment.matched,
        vec!["Country = 'china' ~ country contains 'china'"]
    );
}

#[test]
fn rows_carry_every_stef_column() {
    let ev = event(
        CHINA,
        Some("Sum of TotalSpendUSD for Country = China, grouped by Year"),
    );
    let profile = RuleProfile::from_toml_str("limit_min = 100", "p.toml").unwrap();
    let out = run(
        &ev,
        spend_spec(&["year", "country"], true, Some(20000)),
        &profile,
    );
    let row = out.to_row(&ev, "2026-01-01T00:00:00Z", &profile, 42);
    assert_eq!(row.metric, crate::evaluation::Metric::Stef);
    assert_eq!(row.value, 80.0);
    assert_eq!(row.verdict, Some(true));
    assert_eq!(row.ts, "2026-01-01T00:00:00Z");
    let json = serde_json::to_value(&row).unwrap();
    assert_eq!(json["quality_tier"], "good");
    assert_eq!(json["filter_status"], "fully_applied");
    assert_eq!(json["semantic_verdict"], "correct");
    assert_eq!(json["confidence_tier"], "moderate");
    assert_eq!(json["enrichment_status"], "faithful");
    assert_eq!(json["judge"], "deterministic");
    assert_eq!(json["rules_version"], profile.version.as_str());
    assert_eq!(
        json["judge_identity"],
        format!(
            "deterministic sqlgrade={} rules={} verdict={}",
            env!("CARGO_PKG_VERSION"),
            profile.version,
            crate::stef::correctness::VerdictModel::shipped().version()
        )
    );
    assert_eq!(json["latency_us"], 42);
    assert_eq!(json["rules_fired"].as_array().unwrap().len(), 4);
    assert_eq!(json["details"]["components"]["sigma_filters"], 5);
    assert_eq!(json["details"]["sql"]["limit"], 20000);
    assert_eq!(json["details"]["question_spec"]["group_by"][0], "year");
    assert!(
        json["details"]["rationale"]
            .as_str()
            .unwrap()
            .starts_with("rule 5")
    );
}

#[test]
fn non_scorable_rows() {
    let ev = event("How many heroes?", Some("How many heroes are there?"));
    let profile = RuleProfile::default();
    for (err, status) in [
        (SpecError::Empty, "parse_error"),
        (
            SpecError::Parse {
                dialect: "generic".into(),
                message: "Expected SELECT".into(),
            },
            "parse_error",
        ),
        (
            SpecError::NotAQuery {
                kind: "DROP".into(),
            },
            "not_a_query",
        ),
        (
            SpecError::MultipleStatements { count: 2 },
            "multiple_statements",
        ),
    ] {
        let row = non_scorable_row(&ev, "2026-01-01T00:00:00Z", &err, &profile);
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["value"], 0.0);
        assert_eq!(json["status"], status);
        assert_eq!(json["quality_tier"], "poor");
        assert_eq!(json["verdict"], false);
        assert_eq!(json["details"]["error"], err.to_string());
        assert_eq!(json["enrichment_status"], "faithful");
    }
}

#[test]
fn deterministic_verdict_rules() {
    let profile = RuleProfile::default();
    let count_spec = |filters: Vec<Filter>, limit: Option<u64>| SqlSpec {
        projections: vec![agg_proj(agg(AggFunc::Count, None), None)],
        aggregations: vec![agg(AggFunc::Count, None)],
        filters,
        limit,
        ..SqlSpec::default()
    };
    let marvel = || filter("publisher_name", FilterOp::Eq, text("marvel comics"));
    // Rule 2: suspicious LIMIT together with a missing filter.
    let out = run(
        &event(
            "How many heroes from Marvel Comics have blue eyes?",
            Some("blue eyes refers to colour = 'Blue'"),
        ),
        count_spec(vec![marvel()], Some(5)),
        &profile,
    );
    assert_eq!(out.filter_status, FilterStatus::PartiallyApplied);
    assert_eq!(
        out.assessment.verdict,
        Verdict::Incorrect,
        "{}",
        out.assessment.rationale
    );
    assert!(out.assessment.rationale.starts_with("rule 2"));
    // Rule 3: aggregation mismatch (asked for an average, SQL counts).
    let out = run(
        &event(
            "What is the average height of heroes from Marvel Comics?",
            None,
        ),
        count_spec(vec![marvel()], None),
        &profile,
    );
    assert_eq!(out.alignment.missing_aggregations, vec!["avg(height)"]);
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // Rule 3: the enrichment dropped a constraint the SQL therefore lacks.
    let out = run(
        &event(
            "How many heroes from Marvel Comics?",
            Some("How many heroes are there?"),
        ),
        count_spec(vec![], None),
        &profile,
    );
    assert_eq!(out.filter_status, FilterStatus::FullyApplied);
    assert_eq!(
        out.assessment.enrichment.status,
        EnrichmentStatus::DropsConstraints
    );
    assert_eq!(out.assessment.verdict, Verdict::PotentiallyIncorrect);
    // Rule 4: nothing checkable.
    let out = run(
        &event("hello there", None),
        count_spec(vec![], None),
        &profile,
    );
    assert_eq!(out.assessment.verdict, Verdict::LikelyCorrect);
    // Rule 5 and the confidence cap.
    let out = run(
        &event("How many heroes from Marvel Comics?", None),
        count_spec(vec![marvel()], None),
        &profile,
    );
    assert_eq!(out.assessment.verdict, Verdict::Correct);
    assert!(out.assessment.confidence < 0.85);
    // Superlatives: ORDER BY … DESC LIMIT 1 answers "highest"; no suspicious LIMIT.
    let spec = SqlSpec {
        projections: vec![col("superhero_name")],
        order_by: vec![OrderItem {
            expr: "height_cm".into(),
            dir: SortDir::Desc,
            aggregate: None,
        }],
        limit: Some(1),
        ..SqlSpec::default()
    };
    let out = run(
        &event("Which superhero has the highest height?", None),
        spec,
        &profile,
    );
    assert_eq!(out.alignment.suspicious_limit, None);
    assert!(out.alignment.aggregations_match);
    assert_eq!(
        out.assessment.verdict,
        Verdict::Correct,
        "{}",
        out.assessment.rationale
    );
}

/// `DeterministicJudge::finish` is `finish_owned` with the judge's copied assessment, on every
/// question, evidence and gold query of the shared data's BIRD and Spider dev sets (with and
/// without the evidence as the enriched question), and the scorer's trait object finds it.
#[test]
fn the_deterministic_finish_is_finish_owned_with_the_copied_assessment() {
    let profile = RuleProfile::default();
    let texts = crate::shared_data::texts(
        &["bird/dev.jsonl", "spider/dev.jsonl"],
        &["question", "gold_sql"],
    );
    let evidence = crate::shared_data::texts(&["bird/dev.jsonl"], &["evidence"]);
    let mut compared = 0;
    for (i, pair) in texts.chunks_exact(2).enumerate() {
        let [question, sql] = pair else { continue };
        for enriched in [None, evidence.get(i)] {
            let line = serde_json::json!({
                "event_id": format!("e{i}"),
                "question": question,
                "enriched_question": enriched,
                "sql": sql,
            });
            let Ok(event) = Event::decode_with_limit(line.to_string().as_bytes(), 1 << 20) else {
                continue;
            };
            let Ok(prepared) = prepare(&event, &profile) else {
                continue;
            };
            let copied = finish_owned(
                prepared.clone(),
                DeterministicJudge.assess_prepared(&prepared),
                &profile,
            );
            assert_eq!(
                DeterministicJudge.finish(prepared, &profile),
                copied,
                "{line}"
            );
            compared += 1;
        }
    }
    assert!(compared > 2_000, "only {compared} events compared");
    let judge: &dyn crate::judge::Judge = &DeterministicJudge;
    assert!(judge.is_deterministic());
}
