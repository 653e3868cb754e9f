//! Configuration: the sections assembled and loaded ([`sections`]: defaults, then a TOML file,
//! then the environment; the cross-section checks; redaction) — the top of the house, beside
//! the assembly. What every section uses (secrets, redaction, lists from the environment, the
//! kinded reader) is the bottom toolkit, `crate::settings`. Each section is declared once,
//! typed, next to the component that uses it; its JSON Schema and the configuration reference
//! are generated from those types ([`reference`]).

pub mod reference;
pub mod sections;

pub use sections::{
    AlertsConfig, ClickHouseConfig, ClusterConfig, ClusterWrite, Config, ConfigError,
    DEFAULT_MAX_SQL_BYTES, DurableCacheMode, ENV_PREFIX, ENV_SEPARATOR, FileSourceConfig,
    GoldConfig, JsonlSinkConfig, JudgeBudgetConfig, JudgeConfig, KafkaSourceConfig, LlmJudgeConfig,
    MIN_JUDGE_MAX_TOKENS, OtlpConfig, PipelineConfig, REDACTED, ResponseModeSetting, RulesConfig,
    Secret, SeriesLabel, ServerSettings, SinkConfig, SinkKind, SourceConfig, SourceFormat,
    SourceKind, StefConfig, SystemPromptSetting, TelemetryConfig, alerts, is_secret_key,
    json_schema, redact_url,
};
