//! Why a component could not be built.

use crate::stores::SinkError;

/// Why a component could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The health endpoint could not start.
    #[error(transparent)]
    Health(#[from] crate::telemetry::health::HealthError),
    /// The alert engine could not start.
    #[error(transparent)]
    Alerts(#[from] crate::alerts::delivery::AlertError),
    /// Telemetry export could not start.
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    /// The evaluation-event exporter could not start.
    #[error(transparent)]
    EvaluationEvents(#[from] crate::telemetry::evaluations::EvaluationExportError),
    /// The sink could not be opened.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The source could not be created (e.g. invalid librdkafka properties).
    #[error(transparent)]
    Source(#[from] crate::sources::SourceError),
    /// Rule profiles could not be loaded.
    #[error("cannot load rule profiles")]
    Rules(#[source] crate::stef::profile::RulesError),
    /// `[stef] model` names a file that is not a usable correctness model.
    #[error(transparent)]
    VerdictModel(#[from] crate::score::config::ModelLoadError),
    /// Gold metrics could not be set up.
    #[error(transparent)]
    Gold(#[from] crate::score::gold::GoldSetupError),
    /// An LLM judge could not be set up (bad URL, missing API key, broken prompt template).
    #[error("cannot set up the LLM judge of [{section}]")]
    Judge {
        /// The config section (`judge` or `gold.judge`).
        section: &'static str,
        /// Why.
        #[source]
        source: crate::llm::LlmSetupError,
    },
    /// LLM-judged gold metrics are named but no LLM judge is configured.
    #[error(
        "gold.metrics names LLM-judged metrics (flex, rose, hybrid_ex), but no LLM judge is \
         configured: set [judge] kind = \"llm\" or add [gold.judge] with kind = \"llm\""
    )]
    NoGoldJudge,
    /// The scorer has an LLM-judged second pass, but `[judge]` is not an LLM judge, whose keys
    /// hold the pass's limits and budget.
    #[error(
        "the scorer has an LLM-judged second pass, but judge.kind is \"deterministic\": its \
         limits and [judge.budget] are keys of judge.kind = \"llm\""
    )]
    NoSecondPassSettings,
}
