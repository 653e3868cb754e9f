//! Layered configuration: built-in defaults, then an optional TOML file, then the environment
//! (`SQLGRADE__SECTION__KEY`, separator `__`), loaded through the `config` crate.
//!
//! This module assembles the sections; each is declared once, typed, next to the component
//! that uses it (Vector's way): `[source]` in `sources::config`, `[sink]` in `stores::config`,
//! `[clickhouse]` in `stores::clickhouse::config`,
//! `[judge]` in `llm::config`, `[rules]`/`[stef]`/`[gold]` in `score::config`, `[pipeline]`
//! in `pipeline::config`, `[server]` in `review_page::config`, `[alerts]` in `alerts::config`,
//! `[telemetry]` in `telemetry::config`. Components take their section directly; there is no
//! second "settings" struct per component. The sections are re-exported here.
//!
//! Every key has a default, so `sqlgrade run` works without a file. [`Config::validate`] checks the
//! cross-field rules that serde cannot express, and [`Config::to_redacted_toml`] renders the
//! effective configuration for `check-config` with every secret replaced by [`REDACTED`].
//! Secrets are held in [`Secret`], whose `Debug` never shows the value, so they cannot leak
//! through logging.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::alerts::config::{self as alerts, AlertsConfig, SeriesLabel};
use crate::llm::config::gold_judge::GoldJudge;
pub use crate::llm::config::{
    DurableCacheMode, JudgeBudgetConfig, JudgeConfig, LlmJudgeConfig, MIN_JUDGE_MAX_TOKENS,
    ResponseModeSetting, SystemPromptSetting,
};
pub use crate::pipeline::config::PipelineConfig;
pub use crate::review_page::config::ServerSettings;
pub use crate::score::config::{GoldConfig, RulesConfig, StefConfig};
pub use crate::settings::{REDACTED, Secret, is_secret_key, redact_url};
use crate::settings::{redact, take_section};
pub use crate::sources::config::{
    FileSourceConfig, KafkaSourceConfig, OtlpConfig, SourceConfig, SourceFormat, SourceKind,
};
pub use crate::stores::clickhouse::config::{ClickHouseConfig, ClusterConfig, ClusterWrite};
pub use crate::stores::config::{JsonlSinkConfig, SinkConfig, SinkKind};
pub use crate::telemetry::config::TelemetryConfig;

/// Environment variable prefix (`SQLGRADE__JUDGE__BASE_URL` → `judge.base_url`).
pub const ENV_PREFIX: &str = "SQLGRADE";

/// Separator between prefix, section and key in environment variable names.
pub const ENV_SEPARATOR: &str = "__";

/// Default maximum SQL size scored, in bytes (larger SQL gets status `sql_too_large`).
pub const DEFAULT_MAX_SQL_BYTES: usize = crate::sqlspec::DEFAULT_MAX_SQL_BYTES;

/// Why configuration could not be loaded or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or a value has the wrong type / an unknown key.
    #[error("cannot load configuration")]
    Load(#[source] config::ConfigError),
    /// The configuration parsed but breaks one or more rules.
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
    /// The effective configuration could not be rendered.
    #[error("cannot render configuration")]
    Render(#[source] toml::ser::Error),
}

/// The JSON Schema of `sqlgrade.toml` (draft 2020-12), generated from [`Config`]'s types and
/// their doc comments: what `check-config --schema` prints for editors and what the
/// configuration reference (`docs/reference/configuration.md`) is generated from.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Config>();
    let mut schema = schema.to_value();
    default_kinds_optional(&mut schema);
    schema
}

/// A kinded section's `kind` may be left out for its default kind (`[source]` without `kind`
/// reads a file): that kind's branch does not require it. And a key that neither the shared
/// keys nor the chosen kind's take is flagged (`unevaluatedProperties`: the reader refuses a
/// key of no kind and warns about another kind's).
fn default_kinds_optional(schema: &mut serde_json::Value) {
    if let Some(defs) = schema
        .get_mut("$defs")
        .and_then(serde_json::Value::as_object_mut)
    {
        for def in defs.values_mut() {
            if def.get("oneOf").is_some()
                && def.get("properties").is_some()
                && let Some(def) = def.as_object_mut()
            {
                def.insert("unevaluatedProperties".into(), false.into());
            }
        }
    }
    let kinds: Vec<(String, String)> = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(_, section)| {
            let def = section.get("$ref")?.as_str()?.strip_prefix("#/$defs/")?;
            let kind = section.get("default")?.get("kind")?.as_str()?;
            Some((def.to_string(), kind.to_string()))
        })
        .collect();
    for (def, kind) in kinds {
        let Some(branches) = schema
            .pointer_mut(&format!("/$defs/{def}/oneOf"))
            .and_then(serde_json::Value::as_array_mut)
        else {
            continue;
        };
        for branch in branches {
            let is_default = branch
                .pointer("/properties/kind/const")
                .and_then(serde_json::Value::as_str)
                == Some(kind.as_str());
            if is_default
                && let Some(required) = branch
                    .get_mut("required")
                    .and_then(serde_json::Value::as_array_mut)
            {
                required.retain(|r| r != "kind");
            }
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where events come from.
    pub source: SourceConfig,
    /// Where rows and dead letters go.
    pub sink: SinkConfig,
    /// The ClickHouse server: the sink's when its kind is ClickHouse, the judge cache's and
    /// alert records' when asked for.
    pub clickhouse: ClickHouseConfig,
    /// Who supplies the STEF question understanding and verdict.
    pub judge: JudgeConfig,
    /// Per-app rule profiles.
    pub rules: RulesConfig,
    /// The line-rate STEF score: schema catalogues for its checks.
    pub stef: StefConfig,
    /// Gold-metric databases.
    pub gold: GoldConfig,
    /// Topology knobs.
    pub pipeline: PipelineConfig,
    /// Health endpoint (`/healthz`, `/readyz`).
    pub server: ServerSettings,
    /// Score-drop alerting (`[alerts]`).
    pub alerts: AlertsConfig,
    /// OpenTelemetry metrics export (`[telemetry]`).
    pub telemetry: TelemetryConfig,
}

impl Config {
    /// Defaults, then `file` (if given), then the process environment; validated.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_env(file, None)
    }

    /// Like [`Config::load`], but with an explicit environment map instead of the process
    /// environment when `env` is `Some` (for tests).
    pub fn load_with_env(
        file: Option<&Path>,
        env: Option<HashMap<String, String>>,
    ) -> Result<Config, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = file {
            builder = builder.add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        builder = builder.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator(ENV_SEPARATOR)
                .separator(ENV_SEPARATOR)
                .source(env),
        );
        let mut config =
            Config::read(builder.build().map_err(ConfigError::Load)?).map_err(ConfigError::Load)?;
        config.adopt_older_keys()?;
        config.validate()?;
        for advice in config.advice() {
            tracing::warn!("{advice}");
        }
        Ok(config)
    }

    /// The loaded layers read: the sections whose `kind` chooses their keys first, straight
    /// from the tree (so a message names the key in full and where its value came from:
    /// `settings::take_section`), then the rest through serde.
    fn read(loaded: config::Config) -> Result<Config, config::ConfigError> {
        let mut tree = config::Source::collect(&loaded)?;
        let source = take_section::<SourceConfig>(&mut tree)?;
        let sink = take_section::<SinkConfig>(&mut tree)?;
        let judge = take_section::<JudgeConfig>(&mut tree)?;
        let gold_judge = take_section::<GoldJudge>(&mut tree)?;
        let rest = config::Value::new(None, config::ValueKind::Table(tree));
        let mut config: Config = rest.try_deserialize()?;
        config.source = source.unwrap_or_default();
        config.sink = sink.unwrap_or_default();
        config.judge = judge.unwrap_or_default();
        config.gold.judge = gold_judge.map(|GoldJudge(judge)| judge);
        Ok(config)
    }

    /// Settings that are valid but work against each other (each a sentence naming the keys),
    /// logged as warnings when the config is loaded.
    pub fn advice(&self) -> Vec<String> {
        let mut advice = Vec::new();
        if let Some(kafka) = self.source.kafka()
            && kafka.max_in_flight.get() < self.sink.batch_rows
        {
            advice.push(format!(
                "source.max_in_flight ({}) is below sink.batch_rows ({}): the consumer stops \
                 before a batch can fill, so every batch waits for sink.flush_interval_ms; \
                 raise source.max_in_flight above sink.batch_rows",
                kafka.max_in_flight, self.sink.batch_rows
            ));
        }
        advice
    }

    /// The store `[sink]` names (on the `[clickhouse]` server when its kind is ClickHouse).
    pub fn store(&self) -> crate::stores::Store {
        crate::stores::Store::new(&self.sink, &self.clickhouse)
    }

    /// Move the `[clickhouse]` keys an older config wrote under `[sink]` (`sink.url`, …) to
    /// `[clickhouse]`, with a warning naming them; a key set in both places to different values
    /// is a problem.
    pub fn adopt_older_keys(&mut self) -> Result<(), ConfigError> {
        let keys = std::mem::take(&mut self.sink.clickhouse_keys);
        let (moved, problems) = self.clickhouse.adopt_sink_keys(keys);
        if !moved.is_empty() {
            tracing::warn!(
                keys = %moved.join(", "),
                "these [sink] keys now belong in [clickhouse]; read from [sink] this time"
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Check the rules serde cannot express; lists every problem at once. Each section checks
    /// itself (`problems()` next to its declaration); what stays here are the rules that span
    /// sections (a judge cache kept on the `[clickhouse]` server, a work topic that needs the Kafka
    /// source, the gold metrics' judge).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = self.source.problems();
        problems.extend(self.sink.problems());
        problems.extend(self.clickhouse.problems());
        if !self.sink.clickhouse_keys.is_empty() {
            problems.push(
                "[sink] still holds [clickhouse] keys (Config::adopt_older_keys was not called)"
                    .to_string(),
            );
        }
        problems.extend(self.stef.problems());
        problems.extend(self.pipeline.problems());
        problems.extend(self.gold.problems());
        problems.extend(self.alerts.problems());
        problems.extend(self.gold_judge_problems());
        problems.extend(self.judge.problems());
        problems.extend(self.telemetry.problems());
        problems.extend(self.server.problems());
        let llm = self.judge.llm();
        problems.extend(llm.and_then(|llm| self.durable_cache_server_problem("judge", llm)));
        if llm.is_some_and(|llm| llm.budget.work_topic.is_some()) && self.source.kafka().is_none() {
            problems.push(
                "judge.budget.work_topic needs source.kind = \"kafka\" (other sources use an \
                 in-process queue)"
                    .to_string(),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// The LLM judge settings the LLM-judged gold metrics use: `[gold.judge]` when given, else
    /// `[judge]` when it is an LLM judge; `None` when neither is.
    pub fn gold_judge(&self) -> Option<&LlmJudgeConfig> {
        self.gold.judge.as_ref().or(self.judge.llm())
    }

    /// A judge section's (`judge`, `gold.judge`) ClickHouse verdict cache without a ClickHouse
    /// server to keep it on.
    fn durable_cache_server_problem(
        &self,
        section: &str,
        judge: &LlmJudgeConfig,
    ) -> Option<String> {
        (judge.durable_cache == DurableCacheMode::Clickhouse && !self.clickhouse.has_url()).then(
            || {
                format!(
                    "{section}.durable_cache = \"clickhouse\" needs clickhouse.url (the \
                     ClickHouse server holding judge_cache)"
                )
            },
        )
    }

    /// Problems with the LLM-judged gold metrics' settings.
    fn gold_judge_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let gold = &self.gold;
        // In the order the config lists them.
        let judged: Vec<&str> = gold
            .metrics
            .iter()
            .filter(|m| m.kind() == crate::evaluation::MetricKind::JudgedGold)
            .map(|m| m.as_str())
            .collect();
        if let Some(judge) = &gold.judge {
            problems.extend(judge.problems("gold.judge"));
            problems.extend(self.durable_cache_server_problem("gold.judge", judge));
        } else if !judged.is_empty() && self.judge.llm().is_none() {
            problems.push(format!(
                "gold.metrics includes {} (LLM-judged), but judge.kind is \"deterministic\": set \
                 [judge] kind = \"llm\", or give these metrics their own [gold.judge] section \
                 with kind = \"llm\"",
                judged.join(", ")
            ));
        }
        problems
    }

    /// The effective configuration as TOML, with every secret replaced by [`REDACTED`]:
    /// `password`, `api_key`, secret-looking `kafka_properties`, and passwords inside URLs.
    pub fn to_redacted_toml(&self) -> Result<String, ConfigError> {
        let mut value = toml::Value::try_from(self).map_err(ConfigError::Render)?;
        redact(&mut value);
        toml::to_string_pretty(&value).map_err(ConfigError::Render)
    }
}

#[cfg(test)]
mod tests;
