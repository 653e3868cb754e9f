//! Unit tests of the parent module.

use super::*;

#[test]
fn format_rejections_are_recognised() {
    assert!(mentions_response_format(
        r#"{"error":{"message":"Invalid parameter: 'response_format' of type 'json_schema' is not supported"}}"#
    ));
    assert!(!mentions_response_format(
        r#"{"error":{"message":"maximum context length exceeded"}}"#
    ));
    // llama-cpp-python answers json_schema with a 500 and this text.
    assert!(mentions_response_format(
        "Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema']"
    ));
}

#[test]
fn token_field_rejections_are_recognised() {
    assert!(rejects_token_field(
        r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."}}"#
    ));
    assert!(!rejects_token_field(
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (max_tokens: 2048)."}}"#
    ));
    assert!(!rejects_token_field(
        r#"{"error":{"message":"scripted 500"}}"#
    ));
}

#[test]
fn backoff_grows_and_is_capped() {
    let client = LlmClient::new(&LlmJudgeConfig {
        api_key_env: String::new(),
        backoff_initial_ms: 100,
        backoff_max_ms: 1000,
        retry_after_max_ms: 5000,
        ..LlmJudgeConfig::default()
    })
    .unwrap();
    for retry in 1..=8 {
        let d = client.backoff(retry, None).as_millis() as u64;
        let exp = (100u64 << (retry - 1)).min(1000);
        assert!(d >= exp / 2 && d <= exp, "retry {retry}: {d} ms");
    }
    assert_eq!(
        client.backoff(1, Some(Duration::from_secs(2))),
        Duration::from_secs(2)
    );
    assert_eq!(
        client.backoff(1, Some(Duration::from_secs(60))),
        Duration::from_secs(5)
    );
}

#[test]
fn missing_api_key_is_a_setup_error() {
    let err = LlmClient::new(&LlmJudgeConfig {
        api_key_env: "SQLGRADE_TEST_SURELY_UNSET_KEY".into(),
        ..LlmJudgeConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("SQLGRADE_TEST_SURELY_UNSET_KEY"));
    assert!(matches!(
        LlmClient::new(&LlmJudgeConfig {
            api_key_env: String::new(),
            max_concurrency: 0,
            ..LlmJudgeConfig::default()
        }),
        Err(LlmSetupError::Config(_))
    ));
}

#[test]
fn gave_up_counts_attempts() {
    let e = gave_up(
        JudgeError::Http {
            status: 503,
            body: "busy".into(),
        },
        4,
    );
    assert_eq!(
        e.to_string(),
        "judge HTTP 503: busy (gave up after 4 attempts)"
    );
}
