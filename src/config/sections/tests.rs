//! The loader's tests: the shipped configs, layering of file and environment, the kinded
//! sections' keys and messages, the cross-section rules, redaction and the round trip.

use super::*;

/// A config file holding `text`, in a folder removed when the first value is dropped.
fn config_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A Kafka source whose properties hold a SASL password (`kpw`) and a shown protocol.
fn kafka_with_a_password() -> KafkaSourceConfig {
    let mut kafka = KafkaSourceConfig::default();
    kafka
        .kafka_properties
        .insert("sasl.password".into(), "kpw".into());
    kafka
        .kafka_properties
        .insert("security.protocol".into(), "SASL_SSL".into());
    kafka
}

fn env(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn the_shipped_production_config_loads_and_lets_batches_fill() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/config/production.toml");
    let c = Config::load_with_env(Some(&path), env(&[])).expect("production.toml loads");
    assert!(c.advice().is_empty(), "{:?}", c.advice());
    let kafka = c.source.kafka().expect("a Kafka source");
    assert!(kafka.max_in_flight.get() > c.sink.batch_rows);
    assert_eq!(c.sink.kind, SinkKind::Clickhouse);
    // Its batching is the built-in default's: a config that leaves it out behaves the same.
    let defaults = SinkConfig::of_kind(SinkKind::Clickhouse);
    assert_eq!(
        (
            c.sink.batch_rows,
            c.sink.batch_bytes,
            c.sink.flush_interval_ms
        ),
        (
            defaults.batch_rows,
            defaults.batch_bytes,
            defaults.flush_interval_ms
        )
    );
}

#[test]
fn a_consumer_that_stops_before_a_batch_fills_is_advised_against() {
    let mut c = Config::default();
    assert!(c.advice().is_empty());
    c.source.kind = SourceKind::Kafka(KafkaSourceConfig {
        brokers: Some("localhost:9092".into()),
        max_in_flight: std::num::NonZeroUsize::new(500).unwrap(),
        ..KafkaSourceConfig::default()
    });
    c.sink.batch_rows = 1000;
    let advice = c.advice();
    assert_eq!(advice.len(), 1);
    assert!(
        advice[0].contains("source.max_in_flight (500)"),
        "{advice:?}"
    );
    c.sink.batch_rows = 500;
    assert!(c.advice().is_empty());
}

#[test]
fn each_section_checks_itself_and_validate_adds_the_cross_section_rules() {
    let mut c = Config::default();
    c.pipeline.max_sql_bytes = 0;
    c.stef.probe_workers = 0;
    c.source.kind = SourceKind::Kafka(KafkaSourceConfig::default());
    c.gold.hybrid_cutoff = 2.0;
    let mut llm = LlmJudgeConfig {
        max_concurrency: 0,
        api_key_env: String::new(),
        ..LlmJudgeConfig::default()
    };
    c.judge = JudgeConfig::from(llm.clone());
    assert_eq!(
        c.pipeline.problems(),
        ["pipeline.max_sql_bytes must be at least 1"]
    );
    assert_eq!(c.stef.problems(), ["stef.probe_workers must be at least 1"]);
    assert!(c.source.problems()[0].contains("source.brokers is required"));
    assert!(c.gold.problems()[0].contains("gold.hybrid_cutoff"));
    assert_eq!(
        c.judge.problems(),
        ["judge.max_concurrency must be at least 1"]
    );
    // A rule that spans sections is `validate`'s alone.
    llm.budget.work_topic = Some("work".into());
    c.judge = JudgeConfig::from(llm);
    c.source.kind = SourceKind::default();
    assert!(c.source.problems().is_empty());
    let Err(ConfigError::Invalid(problems)) = c.validate() else {
        panic!("invalid");
    };
    for expected in [
        "pipeline.max_sql_bytes",
        "stef.probe_workers",
        "gold.hybrid_cutoff",
        "judge.max_concurrency",
        "judge.budget.work_topic needs source.kind",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{expected} in {problems:?}"
        );
    }
}

#[test]
fn defaults_need_no_file() {
    let c = Config::load_with_env(None, env(&[])).unwrap();
    assert_eq!(c.source.kind, SourceKind::file("examples/events.jsonl"));
    assert_eq!(c.sink.kind, SinkKind::jsonl("sqlgrade-out"));
    assert_eq!(c.sink.dir(), Some(std::path::Path::new("sqlgrade-out")));
    assert_eq!(c.judge, JudgeConfig::Deterministic);
    assert!(c.pipeline.workers.get() >= 1);
}

#[test]
fn file_then_env_override() {
    let (_dir, path) = config_file(
        r#"
        [source]
        kind = "kafka"
        brokers = "k1:9092"
        topics = ["agents"]
        [source.kafka_properties]
        "security.protocol" = "SSL"
        [sink]
        kind = "clickhouse"
        url = "http://ch:8123"
        password = "hunter2"
        [judge]
        max_requests_per_second = 2.5
        "#,
    );
    let c = Config::load_with_env(
        Some(&path),
        env(&[
            ("SQLGRADE__JUDGE__KIND", "llm"),
            ("SQLGRADE__JUDGE__BASE_URL", "http://llm:8000/v1"),
            ("SQLGRADE__JUDGE__MAX_CONCURRENCY", "16"),
            ("SQLGRADE__JUDGE__BUDGET__UNIFORM_RATE", "0.25"),
            ("SQLGRADE__SOURCE__TOPICS", "a, b"),
            ("SQLGRADE__PIPELINE__WORKERS", "7"),
            ("SQLGRADE__SOURCE__FOLLOW", "true"),
            ("SQLGRADE__SOURCE__GROUP_ID", "007"),
            ("SQLGRADE__SOURCE__KAFKA_PROPERTIES__SASL_PASSWORD", "pw"),
            ("OTHER", "ignored"),
        ]),
    )
    .unwrap();
    let kafka = c.source.kafka().expect("a Kafka source");
    assert_eq!(kafka.topics, vec!["a", "b"]);
    assert_eq!(kafka.group_id, "007");
    // `follow` is a file source's key: with kind = "kafka" it is dropped (with a warning).
    assert!(c.source.file().is_none());
    // The judge's kind from the environment, its keys from both, text read as numbers.
    let judge = c.judge.llm().expect("an LLM judge");
    assert_eq!(judge.base_url, "http://llm:8000/v1");
    assert_eq!(judge.max_requests_per_second, 2.5);
    assert_eq!(judge.max_concurrency, 16);
    assert_eq!(judge.budget.uniform_rate, 0.25);
    assert_eq!(c.pipeline.workers.get(), 7);
    // An older config's [sink] url and password, moved to [clickhouse].
    assert_eq!(c.clickhouse.url.as_deref(), Some("http://ch:8123"));
    assert!(c.sink.clickhouse_keys.is_empty());
    assert_eq!(
        c.clickhouse.password.as_ref().map(Secret::expose),
        Some("hunter2")
    );
    assert_eq!(
        kafka
            .kafka_properties
            .get("security.protocol")
            .map(String::as_str),
        Some("SSL")
    );
    assert_eq!(
        kafka
            .kafka_properties
            .get("sasl.password")
            .map(String::as_str),
        Some("pw")
    );
}

#[test]
fn unknown_keys_and_bad_kinds_are_rejected() {
    // The loader's own error is kept as the source, not flattened into the message.
    let chain = |e: ConfigError| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        text
    };
    let err = chain(
        Config::load_with_env(None, env(&[("SQLGRADE__SINK__KIND", "parquet")])).unwrap_err(),
    );
    assert!(
        err.starts_with("cannot load configuration: ") && err.contains("parquet"),
        "{err}"
    );
    let err =
        chain(Config::load_with_env(None, env(&[("SQLGRADE__JUDGE__MODLE", "x")])).unwrap_err());
    assert!(err.contains("modle"), "{err}");
}

#[test]
fn a_kinded_sections_messages_name_the_key_in_full_and_its_origin() {
    let (_dir, path) = config_file("[source]\nkind = \"kafka\"\nbrokers = \"k\"\ntopics = \"t\"\n");
    let message =
        |file: Option<&Path>, pairs: &[(&str, &str)]| match Config::load_with_env(file, env(pairs))
        {
            Err(ConfigError::Load(e)) => e.to_string(),
            other => panic!("{other:?}"),
        };
    // A value of the chosen kind's, of the shared keys', and of a leftover kind's keys.
    for (key, var) in [
        ("source.max_in_flight", "SQLGRADE__SOURCE__MAX_IN_FLIGHT"),
        (
            "source.otlp.max_body_bytes",
            "SQLGRADE__SOURCE__OTLP__MAX_BODY_BYTES",
        ),
        ("source.follow", "SQLGRADE__SOURCE__FOLLOW"),
        ("sink.batch_rows", "SQLGRADE__SINK__BATCH_ROWS"),
        (
            "judge.budget.max_wait_ms",
            "SQLGRADE__JUDGE__BUDGET__MAX_WAIT_MS",
        ),
    ] {
        let text = message(Some(&path), &[(var, "lots")]);
        assert!(
            text.ends_with(&format!("for key `{key}` in the environment")),
            "{text}"
        );
    }
    std::fs::write(&path, "[sink]\nbatch_rows = \"x\"\n").unwrap();
    let text = message(Some(&path), &[]);
    assert!(text.contains("for key `sink.batch_rows` in "), "{text}");
    assert_eq!(
        message(None, &[("SQLGRADE__SOURCE__NOPE", "1")]),
        "unknown field `nope`, expected one of `kind`, `path`, `follow`, `brokers`, `topics`, \
         `group_id`, `group_instance_id`, `dead_letter_topic`, `kafka_properties`, \
         `max_in_flight`, `commit_interval_ms`, `poison`, `format`, `otlp`, `otlp_mapping` for \
         key `source`"
    );
    assert_eq!(
        message(None, &[("SQLGRADE__SINK__KIND", "parquet")]),
        "unknown variant `parquet`, expected one of `jsonl`, `clickhouse`, `stdout` for key \
         `sink.kind`"
    );
    // A leftover of another kind is dropped; the config loads.
    let c = Config::load_with_env(
        None,
        env(&[
            ("SQLGRADE__SINK__DIR", "out"),
            ("SQLGRADE__SINK__KIND", "stdout"),
            ("SQLGRADE__GOLD__JUDGE__KIND", "llm"),
            ("SQLGRADE__GOLD__JUDGE__MAX_TOKENS", "99"),
        ]),
    )
    .unwrap();
    assert_eq!(c.sink.kind, SinkKind::Stdout);
    assert_eq!(c.gold.judge.map(|j| j.max_tokens), Some(99));
}

#[test]
fn validation_lists_all_problems() {
    let err = Config::load_with_env(
        None,
        env(&[
            ("SQLGRADE__SOURCE__KIND", "kafka"),
            ("SQLGRADE__PIPELINE__MAX_SQL_BYTES", "0"),
        ]),
    )
    .unwrap_err();
    match err {
        ConfigError::Invalid(p) => {
            assert!(p.iter().any(|m| m.contains("source.brokers")), "{p:?}");
            assert!(p.iter().any(|m| m.contains("source.topics")), "{p:?}");
            assert!(
                p.iter().any(|m| m.contains("pipeline.max_sql_bytes")),
                "{p:?}"
            );
        }
        other => panic!("unexpected {other}"),
    }
    // A count that cannot be 0 (workers, max_in_flight) is refused as it is read, naming the
    // key and where it came from.
    let zero =
        Config::load_with_env(None, env(&[("SQLGRADE__PIPELINE__WORKERS", "0")])).unwrap_err();
    let text = sqlgrade_core::errors::error_chain(&zero);
    assert!(
        text.contains("pipeline.workers") && text.contains("nonzero"),
        "{text}"
    );
}

/// `[judge]` and `[gold.judge]` are checked by one set of rules
/// (`JudgeConfig::problems`), each problem named under its own section; the client refuses
/// the same settings.
#[test]
fn both_judge_sections_get_the_same_rules() {
    let broken = LlmJudgeConfig {
        model: " ".into(),
        max_concurrency: 0,
        max_requests_per_second: f64::NAN,
        api_key_env: String::new(),
        ..LlmJudgeConfig::default()
    };
    let mut c = Config {
        judge: JudgeConfig::from(broken.clone()),
        ..Config::default()
    };
    c.gold.judge = Some(broken.clone());
    let ConfigError::Invalid(p) = c.validate().unwrap_err() else {
        panic!("invalid")
    };
    for section in ["judge", "gold.judge"] {
        for key in ["model", "max_concurrency", "max_requests_per_second"] {
            let key = format!("{section}.{key} ");
            assert!(p.iter().any(|m| m.starts_with(&key)), "{key}: {p:?}");
        }
    }
    let client = crate::llm::LlmClient::new(&broken)
        .err()
        .unwrap()
        .to_string();
    assert!(client.contains("judge.model must not be empty"), "{client}");
    // 0 requests per second is no limit, for both.
    let c = Config {
        judge: JudgeConfig::from(LlmJudgeConfig {
            max_requests_per_second: 0.0,
            api_key_env: String::new(),
            ..LlmJudgeConfig::default()
        }),
        ..Config::default()
    };
    assert!(c.validate().is_ok(), "{:?}", c.validate());
}

#[test]
fn older_sink_keys_conflicting_with_clickhouse_are_refused() {
    let (_dir, path) = config_file(
        "[sink]\nkind = \"clickhouse\"\nurl = \"http://a:8123\"\n[clickhouse]\nurl = \"http://b:8123\"\n",
    );
    let error = Config::load_with_env(Some(&path), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("sink.url") && error.contains("clickhouse.url"),
        "{error}"
    );
    // A config read without `load` must not drop them silently either.
    let mut c = Config::default();
    c.sink.clickhouse_keys.url = Some("http://a:8123".into());
    assert!(c.validate().is_err());
    c.adopt_older_keys().unwrap();
    c.validate().unwrap();
    assert_eq!(c.clickhouse.url.as_deref(), Some("http://a:8123"));
}

#[test]
fn redaction_hides_every_secret() {
    let mut c = Config::default();
    c.clickhouse.password = Some(Secret::new("hunter2"));
    c.clickhouse.url = Some("http://admin:s3cr3t@ch:8123/".into());
    c.judge = JudgeConfig::from(LlmJudgeConfig {
        api_key: Some(Secret::new("sk-live-abc")),
        ..LlmJudgeConfig::default()
    });
    let kafka = kafka_with_a_password();
    c.source.kind = SourceKind::Kafka(kafka);
    let text = c.to_redacted_toml().unwrap();
    for secret in ["hunter2", "s3cr3t", "sk-live-abc", "kpw"] {
        assert!(!text.contains(secret), "{secret} leaked:\n{text}");
    }
    assert!(text.contains("SASL_SSL"));
    assert!(
        text.contains("OPENAI_API_KEY"),
        "api_key_env is not a secret"
    );
    assert!(text.contains("http://<redacted>@ch:8123/"));
    assert!(!format!("{c:?}").contains("hunter2"));
    // The rendering is itself a loadable config (round trip).
    let back: Config = toml::from_str(&text).unwrap();
    assert_eq!(back.pipeline, c.pipeline);
}

#[test]
fn judged_gold_metrics_need_an_llm_judge() {
    let metrics = ("SQLGRADE__GOLD__METRICS", "ex,rose,hybrid_ex");
    let load = |extra: &[(&str, &str)]| {
        let mut pairs = vec![metrics];
        pairs.extend_from_slice(extra);
        Config::load_with_env(None, env(&pairs))
    };
    let err = load(&[]).unwrap_err().to_string();
    assert!(
        err.contains("gold.metrics includes rose, hybrid_ex"),
        "{err}"
    );
    let c = load(&[("SQLGRADE__JUDGE__KIND", "llm")]).unwrap();
    assert_eq!(c.gold_judge(), c.judge.llm());
    assert!(c.gold_judge().is_some());
    let c = load(&[
        ("SQLGRADE__GOLD__JUDGE__KIND", "llm"),
        ("SQLGRADE__GOLD__JUDGE__MODEL", "gpt-4o"),
    ])
    .unwrap();
    assert_eq!(c.gold_judge().map(|j| j.model.as_str()), Some("gpt-4o"));
    assert_eq!(c.judge, JudgeConfig::Deterministic);
    // Refused while reading (the section is an LLM judge's by its type); the reason is
    // the load error's source.
    let err = load(&[("SQLGRADE__GOLD__JUDGE__MODEL", "gpt-4o")]).unwrap_err();
    let err = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(err.contains("gold.judge.kind must be \"llm\""), "{err}");
    let err = load(&[
        ("SQLGRADE__JUDGE__KIND", "llm"),
        ("SQLGRADE__GOLD__HYBRID_CUTOFF", "1.5"),
        ("SQLGRADE__GOLD__HYBRID_TOLERANCE", "-1"),
    ])
    .unwrap_err()
    .to_string();
    assert!(err.contains("gold.hybrid_cutoff") && err.contains("gold.hybrid_tolerance"));
    let err =
        Config::load_with_env(None, env(&[("SQLGRADE__GOLD__METRICS", "ex,bleu")])).unwrap_err();
    let err = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        err.contains("\"bleu\"") && err.contains("hybrid_ex"),
        "{err}"
    );
}

#[test]
fn gold_judge_section_renders_redacted_and_round_trips() {
    let mut c = Config::default();
    c.gold.metrics.push(crate::evaluation::Metric::Flex);
    c.gold.flex_render = crate::metrics::flex::RenderPreset::RepoV1;
    c.gold.judge = Some(LlmJudgeConfig {
        api_key: Some(Secret::new("sk-gold")),
        ..LlmJudgeConfig::default()
    });
    c.validate().unwrap();
    let text = c.to_redacted_toml().unwrap();
    assert!(!text.contains("sk-gold"), "{text}");
    assert!(text.contains("[gold.judge]") && text.contains("flex_render = \"repo_v1\""));
    let back: Config = toml::from_str(&text).unwrap();
    assert_eq!(back.gold.flex_render, c.gold.flex_render);
    assert_eq!(
        back.gold.judge,
        c.gold.judge.map(|j| LlmJudgeConfig {
            api_key: Some(Secret::new(REDACTED)),
            ..j
        })
    );
}

#[test]
fn secrets_are_not_in_debug_output() {
    let clickhouse = ClickHouseConfig {
        url: Some("https://alice:hunter2@ch.example:8443".into()),
        password: Some(Secret::new("s3cret")),
        ..ClickHouseConfig::default()
    };
    let shown = format!("{clickhouse:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("hunter2"),
        "{shown}"
    );
    assert!(shown.contains("ch.example:8443"));
    // The same keys in an older config's [sink], before Config::load moves them.
    let sink = SinkConfig {
        clickhouse_keys: crate::stores::config::ClickHouseKeys {
            url: clickhouse.url.clone(),
            password: clickhouse.password.clone(),
            ..Default::default()
        },
        ..SinkConfig::default()
    };
    let shown = format!("{sink:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("hunter2"),
        "{shown}"
    );
    let kafka = kafka_with_a_password();
    let source = SourceConfig {
        kind: SourceKind::Kafka(kafka),
        ..SourceConfig::default()
    };
    let shown = format!("{source:?}");
    assert!(
        !shown.contains("kpw") && shown.contains("SASL_SSL"),
        "{shown}"
    );
}

#[test]
fn url_redaction_leaves_plain_urls_alone() {
    assert_eq!(redact_url("http://ch:8123"), "http://ch:8123");
    assert_eq!(redact_url("not a url"), "not a url");
}
