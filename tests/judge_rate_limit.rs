//! 1,000 distinct events with `max_requests_per_second = 50`: the scripted server never sees
//! more than 50 requests in any one-second window (server-side arrival times), and every event
//! is assessed. Runs for about 20 s. Its own test binary, so no other test competes with it for
//! the CPU while it measures.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlgrade::config::LlmJudgeConfig;
use sqlgrade::event::Event;
use sqlgrade::judge::{Judge, JudgeRequest};
use sqlgrade::llm::LlmJudge;
use sqlgrade::stef::{Prepared, RuleProfile};
use support::openai_mock::{MockServer, Scripted};
use support::{config, distinct_events, prepare, profile, stef_reply};

struct Case {
    event: Event,
    prepared: Prepared,
    profile: RuleProfile,
}

impl Case {
    fn new(event: Event) -> Case {
        let profile = profile();
        let prepared = prepare(&event, &profile);
        Case {
            event,
            prepared,
            profile,
        }
    }

    async fn assess(
        &self,
        judge: &LlmJudge,
    ) -> Result<sqlgrade::judge::JudgeAssessment, sqlgrade::judge::JudgeError> {
        judge
            .assess(JudgeRequest {
                event: &self.event,
                prepared: &self.prepared,
                profile: &self.profile,
            })
            .await
    }
}

fn judge(cfg: LlmJudgeConfig) -> LlmJudge {
    LlmJudge::from_config(&cfg).unwrap()
}

// Two runtime threads, as the daemon has on a two-core machine. (On one thread, a debug build's
// prompt rendering and reply parsing delay sends after their permits by up to ~40 ms: two more
// requests in the server's busiest second than the limiter let go.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_distinct_events_respect_fifty_requests_per_second() {
    let server = MockServer::start().await;
    server.respond_with(|_| Scripted::json(&stef_reply("correct", 0.9)));
    let judge = Arc::new(judge(LlmJudgeConfig {
        max_requests_per_second: 50.0,
        max_concurrency: 32,
        ..config(&server.base_url())
    }));
    let mut cases: Vec<Case> = distinct_events(1000).into_iter().map(Case::new).collect();
    // One request first, so connection set-up is not part of the measured burst.
    cases.pop().unwrap().assess(&judge).await.unwrap();
    // 64 scorer workers pull events from a shared queue, as the pipeline's scorer pool does.
    let queue = Arc::new(Mutex::new(cases));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (judge, queue) = (judge.clone(), queue.clone());
        workers.spawn(async move {
            let mut assessed = 0;
            loop {
                let next = queue.lock().unwrap().pop();
                let Some(case) = next else { break };
                case.assess(&judge).await.unwrap();
                assessed += 1;
            }
            assessed
        });
    }
    let mut assessed = 0;
    while let Some(result) = workers.join_next().await {
        assessed += result.unwrap();
    }
    assert_eq!(assessed + 1, 1000);
    assert_eq!(server.request_count(), 1000);
    let t = judge.totals();
    assert_eq!((t.llm_calls, t.retries, t.failures), (1000, 0, 0));
    let busiest = server.max_in_window(Duration::from_secs(1));
    eprintln!("busiest one-second window: {busiest} requests");
    assert!(busiest <= 50, "{busiest} requests in one second");
    // And the limit is used (the limiter paces at 95.5 % of it), not undershot by much.
    assert!(
        busiest >= 45,
        "only {busiest} requests in the busiest second"
    );
}
