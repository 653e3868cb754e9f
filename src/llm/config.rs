//! `[judge]` (and `[gold.judge]`): who supplies verdicts — the deterministic judge or an
//! OpenAI-compatible endpoint — with the client's limits, caching and the second pass's budget.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::settings::{ReadSection, Secret, SectionError, WrittenSection, read_all_parts};

/// The smallest `judge.max_tokens` accepted: below it no reply schema fits (tests of the cut-off
/// path use the smallest value).
pub const MIN_JUDGE_MAX_TOKENS: u32 = 8;

/// `[judge] response_mode`: how structured output is requested.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ResponseModeSetting {
    /// Start with `json_schema`, step down on rejection, remember per endpoint.
    #[default]
    Auto,
    /// Always `response_format: {type: json_schema}`.
    JsonSchema,
    /// Always `response_format: {type: json_object, schema}`.
    JsonObject,
    /// No `response_format`: the JSON object is taken from the text.
    PlainText,
}

/// `[judge] system_prompt`: where the prompt's instructions go.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SystemPromptSetting {
    /// A `system` message, then the `user` message with the data.
    #[default]
    System,
    /// One `user` message: the instructions, a blank line, the data. For models and chat
    /// templates without a system role (Gemma on llama-cpp-python's `--chat_format gemma`, which
    /// drops system messages).
    InUser,
}

/// Where the LLM judge keeps verdicts beyond its in-memory cache (`judge.durable_cache`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DurableCacheMode {
    /// ClickHouse `judge_cache` when the sink is ClickHouse (the server is already there and
    /// migrated); none otherwise.
    #[default]
    Auto,
    /// ClickHouse `judge_cache` on the `[clickhouse]` server, whatever the sink kind.
    Clickhouse,
    /// No durable cache: the in-memory cache, then the LLM.
    Off,
}

/// `[judge] kind = "llm"` (and `[gold.judge]`): an OpenAI-compatible endpoint, the client's
/// limits and caches, and the second pass's budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LlmJudgeConfig {
    /// Base URL of the OpenAI-compatible endpoint (`…/v1`).
    pub base_url: String,
    /// Model name sent to the endpoint.
    pub model: String,
    /// Name of the environment variable that holds the API key (the key itself is never in the
    /// file).
    pub api_key_env: String,
    /// An API key given inline (secret; prefer `api_key_env`).
    pub api_key: Option<Secret>,
    /// Per-process request rate limit (global quota divided by replicas); 0 = no limit.
    pub max_requests_per_second: f64,
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Per-request timeout.
    pub timeout_ms: u64,
    /// Retries on 429/5xx/timeouts before falling back to the deterministic judge.
    pub max_retries: u32,
    /// Longest time one call may take, its retries and their backoff included: each attempt
    /// gets `timeout_ms` or what is left of this, whichever is less, and no retry starts
    /// without time left. 0 = twice `timeout_ms` (so a timed-out call is re-sent at most once
    /// at its full timeout, not `max_retries` times while a slow server still generates every
    /// abandoned request).
    pub max_call_ms: u64,
    /// Entries in the in-memory verdict cache, at most.
    pub cache_capacity: u64,
    /// Bytes of replies in the in-memory verdict cache, at most (each entry weighs its reply's
    /// size, and at least `cache_bytes / cache_capacity`, so both bounds hold).
    pub cache_bytes: u64,
    /// Time to live of an in-memory verdict-cache entry, in seconds.
    pub cache_ttl_secs: u64,
    /// Estimated prompt tokens per minute (prompt length / 4); 0 disables the limit.
    pub max_tokens_per_minute: u32,
    /// Requests the limiter lets go at once after a quiet spell; 0 = 1 (`llm::limits::Pacing`
    /// says how the rate is paced and what a one-second window can hold).
    pub rate_burst: u32,
    /// Directory of prompt templates overriding the built-in `prompts/` (none: built-in).
    pub prompts_dir: Option<PathBuf>,
    /// Durable verdict cache after the in-memory one (`auto` | `clickhouse` | `off`).
    pub durable_cache: DurableCacheMode,
    /// Longest wait for one durable-cache lookup; a slower answer counts as a miss.
    pub durable_cache_timeout_ms: u64,
    /// Durable-cache entries written per INSERT at most (verdicts are queued and written in
    /// the background).
    pub durable_cache_write_batch: usize,
    /// After a failed durable-cache lookup or insert: how long lookups are skipped (immediate
    /// misses) and a failed batch waits before it is retried.
    pub durable_cache_retry_ms: u64,
    /// Durable-cache entries waiting to be written at most; beyond it new entries are dropped
    /// and counted (a lost cache write only costs a future LLM call).
    pub durable_cache_max_queued: usize,
    /// First backoff delay before a retry, doubling per retry with jitter. Not a configuration
    /// key (fixed in production; tests shorten it).
    #[serde(skip)]
    pub backoff_initial_ms: u64,
    /// Largest backoff delay. Not a configuration key.
    #[serde(skip)]
    pub backoff_max_ms: u64,
    /// Largest `Retry-After` honoured (longer hints are clamped). Not a configuration key.
    #[serde(skip)]
    pub retry_after_max_ms: u64,
    /// Completion tokens one call may produce, at most: sent as `max_tokens`, or as
    /// `max_completion_tokens` to a server that rejects `max_tokens` (OpenAI's reasoning models).
    /// A reply cut off at the cap (`finish_reason = "length"`) gets one repair turn, then is a
    /// `judge_error` saying so. The default leaves every reply schema room (a STEF judgment
    /// takes ~300) and bounds a model that rambles or reasons at length.
    pub max_tokens: u32,
    /// How structured output is asked for: `auto` starts with `json_schema` and steps down
    /// (`json_object` with the schema, then plain text) when the endpoint rejects it; a named
    /// mode is used as it is, and a rejection of it is an error.
    pub response_mode: ResponseModeSetting,
    /// Where the instructions go: a `system` message (default) or the start of the `user`
    /// message (`in_user`, for chat templates without a system role).
    pub system_prompt: SystemPromptSetting,
    /// Which events the LLM judge sees and what it may spend (`[judge.budget]`).
    pub budget: JudgeBudgetConfig,
}

/// `[judge.budget]`: the second, LLM-judged pass. Every event gets its line-rate STEF row from
/// the deterministic path; the LLM judge sees the uniform slice plus, within the quota
/// (`judge.max_requests_per_second`, `judge.max_tokens_per_minute`) and the daily caps here,
/// the priority slices. The budget is per process: with R replicas give each `1/R` of the quota
/// and of the daily caps (the uniform slice needs no division: each replica applies the same
/// rate to its own share of the traffic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeBudgetConfig {
    /// Share of events in the uniform slice, in [0, 1] (decided by a hash of `event_id` and
    /// `salt`, the same on every replica and redelivery). The calibrated estimates rest on it.
    pub uniform_rate: f64,
    /// Salt of the uniform hash.
    pub salt: String,
    /// Priority slice: the line-rate verdict is not `correct`.
    pub priority_not_correct: bool,
    /// Priority slice: the line-rate confidence tier is `low`.
    pub priority_low_confidence: bool,
    /// Priority slice: the line-rate quality tier is `poor`.
    pub priority_poor_tier: bool,
    /// Priority slice: the first this-many events of a new (app, agent, agent_version, model);
    /// 0 = off.
    pub priority_new_series: u64,
    /// Priority slice: events of a series an alert currently fires on (needs `[alerts]`).
    pub priority_alerting: bool,
    /// Priority work is offered to the judge stage at most this many times
    /// `judge.max_requests_per_second` (per process, one second of burst); beyond it, selected
    /// priority events are shed at once (`priority_over_rate`) instead of queued — or produced to
    /// the work topic — only to be shed later. The uniform slice is never limited here. 0 = no
    /// limit.
    pub priority_offer_factor: f64,
    /// Judgments sent to the LLM per UTC day; 0 = no cap.
    pub max_requests_per_day: u64,
    /// Prompt plus completion tokens per UTC day; 0 = no cap.
    pub max_tokens_per_day: u64,
    /// Cost per UTC day (at the prices below); 0 = no cap.
    pub max_cost_per_day: f64,
    /// Price per 1,000 prompt tokens.
    pub price_input_per_1k: f64,
    /// Price per 1,000 completion tokens.
    pub price_output_per_1k: f64,
    /// Work waiting for the judge, at most (in-process queue); beyond it the least important is
    /// shed.
    pub queue_capacity: std::num::NonZeroUsize,
    /// Work older than this is shed (`stale`) instead of judged late.
    pub max_wait_ms: u64,
    /// At shutdown, how long the judge stage may still work through its queue; what is left is
    /// counted (`shutdown`) and reported (with Kafka it stays in the work topic). Capped at a
    /// third of `pipeline.shutdown_timeout_ms`, so the whole shutdown fits in that limit.
    pub drain_grace_ms: u64,
    /// Kafka source: the judge-work topic selected events are produced to and the judge stage
    /// consumes (group `<source.group_id>-judge`), so judging survives crashes and spreads over
    /// replicas. Unset: an in-process queue.
    pub work_topic: Option<String>,
}

impl Default for JudgeBudgetConfig {
    fn default() -> Self {
        JudgeBudgetConfig {
            uniform_rate: 0.05,
            salt: String::new(),
            priority_not_correct: true,
            priority_low_confidence: true,
            priority_poor_tier: true,
            priority_new_series: 20,
            priority_alerting: true,
            priority_offer_factor: 2.0,
            max_requests_per_day: 0,
            max_tokens_per_day: 0,
            max_cost_per_day: 0.0,
            price_input_per_1k: 0.0,
            price_output_per_1k: 0.0,
            queue_capacity: std::num::NonZeroUsize::new(10_000)
                .unwrap_or(std::num::NonZeroUsize::MIN),
            max_wait_ms: 600_000,
            drain_grace_ms: 8_000,
            work_topic: None,
        }
    }
}

impl JudgeBudgetConfig {
    /// Problems with the section (`prefix` names it in messages).
    pub fn problems(&self, prefix: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if !(self.uniform_rate.is_finite() && (0.0..=1.0).contains(&self.uniform_rate)) {
            problems.push(format!(
                "{prefix}.uniform_rate must be between 0 and 1, not {}",
                self.uniform_rate
            ));
        }
        for (key, value) in [
            ("priority_offer_factor", self.priority_offer_factor),
            ("max_cost_per_day", self.max_cost_per_day),
            ("price_input_per_1k", self.price_input_per_1k),
            ("price_output_per_1k", self.price_output_per_1k),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                problems.push(format!("{prefix}.{key} must be a number ≥ 0, not {value}"));
            }
        }
        if self.max_cost_per_day > 0.0
            && self.price_input_per_1k == 0.0
            && self.price_output_per_1k == 0.0
        {
            problems.push(format!(
                "{prefix}.max_cost_per_day needs prices ({prefix}.price_input_per_1k, \
                 price_output_per_1k): without them every call costs 0"
            ));
        }
        if self.max_wait_ms == 0 {
            problems.push(format!("{prefix}.max_wait_ms must be at least 1"));
        }
        if self
            .work_topic
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            problems.push(format!("{prefix}.work_topic must not be empty when set"));
        }
        problems
    }
}

impl LlmJudgeConfig {
    /// The per-request timeout.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms)
    }

    /// The longest time one call may take, retries included (`max_call_ms`, 0 = twice the
    /// per-request timeout).
    pub fn max_call(&self) -> std::time::Duration {
        std::time::Duration::from_millis(if self.max_call_ms == 0 {
            self.timeout_ms.saturating_mul(2)
        } else {
            self.max_call_ms
        })
    }
}

impl Default for LlmJudgeConfig {
    fn default() -> Self {
        LlmJudgeConfig {
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: "OPENAI_API_KEY".into(),
            api_key: None,
            max_requests_per_second: 5.0,
            max_concurrency: 8,
            timeout_ms: 30_000,
            max_retries: 3,
            max_call_ms: 0,
            cache_capacity: 100_000,
            cache_bytes: 32 * 1024 * 1024,
            cache_ttl_secs: 24 * 3600,
            max_tokens_per_minute: 0,
            rate_burst: 0,
            prompts_dir: None,
            durable_cache: DurableCacheMode::Auto,
            durable_cache_timeout_ms: 1_000,
            durable_cache_write_batch: 500,
            durable_cache_retry_ms: 5_000,
            durable_cache_max_queued: 10_000,
            backoff_initial_ms: 250,
            backoff_max_ms: 10_000,
            retry_after_max_ms: 60_000,
            max_tokens: 2_048,
            response_mode: ResponseModeSetting::Auto,
            system_prompt: SystemPromptSetting::System,
            budget: JudgeBudgetConfig::default(),
        }
    }
}

impl LlmJudgeConfig {
    /// Problems with an LLM judge section (`judge` or `gold.judge`), each naming its key: the
    /// one set of rules for an endpoint the daemon will call (the config check lists them all;
    /// the client refuses the first). The second pass's budget is checked by
    /// [`JudgeConfig::problems`] (`[gold.judge]` has none that counts). Rules that span sections
    /// (a ClickHouse durable cache needs `clickhouse.url`) are `Config::validate`'s.
    pub fn problems(&self, section: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.base_url.trim().is_empty() {
            problems.push(format!("{section}.base_url must not be empty"));
        }
        if self.model.trim().is_empty() {
            problems.push(format!("{section}.model must not be empty"));
        }
        if !(self.max_requests_per_second.is_finite() && self.max_requests_per_second >= 0.0) {
            problems.push(format!(
                "{section}.max_requests_per_second must be a finite number ≥ 0 (0 = no limit)"
            ));
        }
        if self.max_concurrency == 0 {
            problems.push(format!("{section}.max_concurrency must be at least 1"));
        }
        if self.timeout_ms == 0 {
            problems.push(format!("{section}.timeout_ms must be at least 1"));
        }
        if self.max_tokens < MIN_JUDGE_MAX_TOKENS {
            problems.push(format!(
                "{section}.max_tokens must be at least {MIN_JUDGE_MAX_TOKENS} (no reply schema fits in fewer)"
            ));
        }
        problems.extend(durable_cache_problems(section, self));
        problems
    }
}

/// `[judge]`: who supplies the STEF verdicts beyond the line-rate row — nobody else (the
/// deterministic judge, no keys of its own) or an LLM endpoint with its settings.
///
/// In the file the section is flat (`kind = "llm"` beside `base_url = "…"`); it is read by
/// [`WrittenSection`]. With `kind = "deterministic"`, keys of the LLM kind are a leftover (a
/// file written for an LLM judge, the kind switched from the environment): dropped with a
/// warning naming them. A key of no kind, or a value of the wrong type, is refused whatever the
/// kind.
#[derive(Debug, Clone, PartialEq, Default, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum JudgeConfig {
    /// The built-in deterministic judge (no network, no second pass).
    #[default]
    Deterministic,
    /// An OpenAI-compatible chat-completions endpoint, which also judges the second pass.
    Llm(Box<LlmJudgeConfig>),
}

impl From<LlmJudgeConfig> for JudgeConfig {
    fn from(llm: LlmJudgeConfig) -> Self {
        JudgeConfig::Llm(Box::new(llm))
    }
}

impl JudgeConfig {
    /// The LLM judge's settings, when the judge is one.
    pub fn llm(&self) -> Option<&LlmJudgeConfig> {
        match self {
            JudgeConfig::Llm(llm) => Some(llm),
            JudgeConfig::Deterministic => None,
        }
    }

    /// The LLM judge's settings to change, when the judge is one.
    pub fn llm_mut(&mut self) -> Option<&mut LlmJudgeConfig> {
        match self {
            JudgeConfig::Llm(llm) => Some(llm),
            JudgeConfig::Deterministic => None,
        }
    }

    /// What is wrong with `[judge]` alone: an LLM judge's endpoint, limits and caches, and its
    /// second pass's budget (`[judge.budget]`); the deterministic judge has no keys to be wrong.
    pub fn problems(&self) -> Vec<String> {
        match self {
            JudgeConfig::Deterministic => Vec::new(),
            JudgeConfig::Llm(llm) => {
                let mut problems = llm.problems("judge");
                problems.extend(llm.budget.problems("judge.budget"));
                problems
            }
        }
    }
}

crate::kinded_settings!(JudgeConfig {
    Deterministic = "deterministic",
    Llm(Box<LlmJudgeConfig>) = "llm",
});

impl ReadSection for JudgeConfig {
    const SECTION: &'static str = "judge";

    /// The kind's keys.
    fn read_parts(written: &mut WrittenSection) -> Result<Self, SectionError> {
        written.kind()
    }

    /// A message names the section (`[judge]: …`).
    fn in_messages(error: SectionError) -> SectionError {
        error.in_section(Self::SECTION)
    }
}

impl<'de> Deserialize<'de> for JudgeConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JudgeConfig::deserialize_section(deserializer)
    }
}

/// `[gold.judge]`: an LLM judge's settings, the same keys as `[judge]` with `kind = "llm"`
/// required (the section exists to name the endpoint of `flex`, `rose` and `hybrid_ex`).
pub mod gold_judge {
    use super::{
        Deserialize, JudgeConfig, LlmJudgeConfig, ReadSection, SectionError, Serialize,
        WrittenSection, read_all_parts,
    };

    /// Reads `[gold.judge]` when present.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<LlmJudgeConfig>, D::Error> {
        let Some(GoldJudge(judge)) = Option::<GoldJudge>::deserialize(deserializer)? else {
            return Ok(None);
        };
        Ok(Some(judge))
    }

    /// `[gold.judge]` when present: an LLM judge.
    pub struct GoldJudge(pub LlmJudgeConfig);

    impl ReadSection for GoldJudge {
        const SECTION: &'static str = "gold.judge";

        /// The LLM kind's keys.
        fn read_parts(written: &mut WrittenSection) -> Result<Self, SectionError> {
            match written.kind()? {
                JudgeConfig::Llm(llm) => Ok(GoldJudge(*llm)),
                JudgeConfig::Deterministic => Err(not_llm()),
            }
        }

        /// A message names the section (`[gold.judge]: …`).
        fn in_messages(error: SectionError) -> SectionError {
            error.in_section(Self::SECTION)
        }

        /// The kind first: a section that is not an LLM judge is refused in its own words,
        /// before its keys are read (so no leftover is warned about).
        fn read_all(written: &mut WrittenSection) -> Result<Self, SectionError> {
            if written
                .chosen_kind::<JudgeConfig>()
                .map_err(Self::in_messages)?
                .name
                != "llm"
            {
                return Err(not_llm());
            }
            read_all_parts(written)
        }
    }

    /// Why `[gold.judge]` with another kind is refused.
    fn not_llm() -> SectionError {
        SectionError::Key {
            message: "gold.judge.kind must be \"llm\" ([gold.judge] is the LLM endpoint of flex, \
                      rose and hybrid_ex)"
                .to_string(),
            key: "gold.judge.kind".to_string(),
        }
    }

    impl<'de> Deserialize<'de> for GoldJudge {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            GoldJudge::deserialize_section(deserializer)
        }
    }

    /// `[gold.judge]` as written back: `kind = "llm"`, then its keys.
    #[derive(Serialize, schemars::JsonSchema)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    enum WrittenGoldJudge<'a> {
        Llm(&'a LlmJudgeConfig),
    }

    /// Writes `[gold.judge]` with its `kind = "llm"`.
    pub fn serialize<S: serde::Serializer>(
        judge: &Option<LlmJudgeConfig>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        judge
            .as_ref()
            .map(WrittenGoldJudge::Llm)
            .serialize(serializer)
    }
}

/// Problems with the durable-cache keys of a judge section (`judge` or `gold.judge`).
pub fn durable_cache_problems(section: &str, judge: &LlmJudgeConfig) -> Vec<String> {
    let mut problems = Vec::new();
    if judge.durable_cache_timeout_ms == 0 {
        problems.push(format!(
            "{section}.durable_cache_timeout_ms must be at least 1"
        ));
    }
    if judge.durable_cache_write_batch == 0 {
        problems.push(format!(
            "{section}.durable_cache_write_batch must be at least 1"
        ));
    }
    if judge.durable_cache_retry_ms == 0 {
        problems.push(format!(
            "{section}.durable_cache_retry_ms must be at least 1"
        ));
    }
    if judge.durable_cache_max_queued < judge.durable_cache_write_batch {
        problems.push(format!(
            "{section}.durable_cache_max_queued ({}) must be at least \
             {section}.durable_cache_write_batch ({})",
            judge.durable_cache_max_queued, judge.durable_cache_write_batch
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[judge]` alone, as a file would hold it.
    #[derive(Debug, Deserialize, Serialize)]
    struct File {
        #[serde(default)]
        judge: JudgeConfig,
        #[serde(default, with = "gold_judge")]
        gold_judge: Option<LlmJudgeConfig>,
    }

    fn read(text: &str) -> Result<File, String> {
        toml::from_str::<File>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn each_kind_keeps_its_own_keys() {
        assert_eq!(read("").unwrap().judge, JudgeConfig::Deterministic);
        let file = read(
            "[judge]\nkind = \"llm\"\nmodel = \"m\"\nmax_concurrency = 3\n\
             [judge.budget]\nuniform_rate = 0.5\n",
        )
        .unwrap();
        let llm = file.judge.llm().expect("an LLM judge");
        assert_eq!((llm.model.as_str(), llm.max_concurrency), ("m", 3));
        assert_eq!(llm.budget.uniform_rate, 0.5);
        assert_eq!(llm.timeout_ms, LlmJudgeConfig::default().timeout_ms);
        // The LLM kind's keys with the deterministic kind: a leftover, dropped (with a warning).
        let file = read(
            "[judge]\nkind = \"deterministic\"\nmodel = \"m\"\n[judge.budget]\nuniform_rate = 0.5\n",
        )
        .unwrap();
        assert_eq!(file.judge, JudgeConfig::Deterministic);
        assert!(file.judge.problems().is_empty());
    }

    #[test]
    fn a_key_of_no_kind_or_a_bad_value_is_refused_whatever_the_kind() {
        for kind in ["llm", "deterministic"] {
            let error = read(&format!("[judge]\nkind = \"{kind}\"\nmodle = \"m\"\n")).unwrap_err();
            assert!(
                error.contains("[judge]") && error.contains("modle"),
                "{error}"
            );
            let error = read(&format!(
                "[judge]\nkind = \"{kind}\"\ntimeout_ms = \"soon\"\n"
            ))
            .unwrap_err();
            assert!(error.contains("[judge]"), "{error}");
        }
        let error = read("[judge]\nkind = \"oracle\"\n").unwrap_err();
        assert!(error.contains("oracle"), "{error}");
    }

    #[test]
    fn both_kinds_are_written_back_unchanged() {
        for judge in [
            JudgeConfig::Deterministic,
            JudgeConfig::from(LlmJudgeConfig {
                model: "m".into(),
                max_call_ms: 7,
                prompts_dir: Some("prompts".into()),
                ..LlmJudgeConfig::default()
            }),
        ] {
            let file = File {
                judge: judge.clone(),
                gold_judge: judge.llm().cloned(),
            };
            let text = toml::to_string(&file).unwrap();
            assert!(
                text.contains(&format!("kind = \"{}\"", judge.kind_name())),
                "{text}"
            );
            let back = read(&text).unwrap();
            assert_eq!(back.judge, judge, "{text}");
            assert_eq!(back.gold_judge.as_ref(), judge.llm(), "{text}");
        }
    }

    #[test]
    fn the_gold_judge_must_say_it_is_an_llm() {
        let error = read("[gold_judge]\nmodel = \"m\"\n").unwrap_err();
        assert!(error.contains("gold.judge.kind must be \"llm\""), "{error}");
        let file = read("[gold_judge]\nkind = \"llm\"\nmodel = \"m\"\n").unwrap();
        assert_eq!(file.gold_judge.map(|j| j.model), Some("m".to_string()));
        let error = read("[gold_judge]\nkind = \"llm\"\nmodle = \"m\"\n").unwrap_err();
        assert!(
            error.contains("[gold.judge]") && error.contains("modle"),
            "{error}"
        );
    }

    #[test]
    fn the_llm_kind_checks_its_keys_and_budget() {
        let judge = JudgeConfig::from(LlmJudgeConfig {
            model: " ".into(),
            budget: JudgeBudgetConfig {
                uniform_rate: 2.0,
                ..JudgeBudgetConfig::default()
            },
            ..LlmJudgeConfig::default()
        });
        let problems = judge.problems();
        assert!(problems[0].starts_with("judge.model"), "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("judge.budget.uniform_rate")),
            "{problems:?}"
        );
    }
}
