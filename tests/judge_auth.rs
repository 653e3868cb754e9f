//! The API key is read from the variable `api_key_env` names, sent as a bearer token, and never
//! shown. (Its own test binary: it sets an environment variable, which must not race with other
//! threads reading the environment.)

mod support;

use sqlgrade::config::LlmJudgeConfig;
use sqlgrade::judge::Judge;
use sqlgrade::llm::{LlmClient, LlmJudge};
use std::sync::Arc;
use support::openai_mock::{MockServer, Scripted};

#[tokio::test(flavor = "current_thread")]
async fn api_key_is_sent_and_never_shown() {
    let secret = "sk-test-0123456789abcdef";
    // SAFETY: this binary has exactly one test and sets the variable before any other thread
    // (server, client) exists.
    unsafe { std::env::set_var("SQLGRADE_TEST_JUDGE_KEY", secret) };

    let server = MockServer::start().await;
    server.push([Scripted::json(&support::stef_reply("correct", 0.9))]);
    let client = LlmClient::new(&LlmJudgeConfig {
        api_key_env: "SQLGRADE_TEST_JUDGE_KEY".into(),
        ..support::config(&server.base_url())
    })
    .unwrap();
    assert!(!format!("{client:?}").contains(secret));
    let judge = LlmJudge::new(Arc::new(client));

    let event = support::benchmark_events("bird", "SuperSQL").remove(0);
    let profile = support::profile();
    let prepared = support::prepare(&event, &profile);
    let a = judge
        .assess(sqlgrade::judge::JudgeRequest {
            event: &event,
            prepared: &prepared,
            profile: &profile,
        })
        .await
        .unwrap();
    let r = &server.requests()[0];
    assert_eq!(
        r.authorization.as_deref(),
        Some(&*format!("Bearer {secret}"))
    );
    assert!(!r.body().to_string().contains(secret));
    assert!(!serde_json::to_string(&a).unwrap().contains(secret));
    assert!(!format!("{a:?}{judge:?}").contains(secret));
}
