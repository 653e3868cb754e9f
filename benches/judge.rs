//! LLM judge throughput against a local OpenAI-compatible server (the scripted test server on
//! 127.0.0.1) that answers every request after a fixed 200 ms.
//!
//! - `llm_judge/sustained_rate_limited`: 500 distinct events per iteration through one judge
//!   limited to 100 requests/s with 32 requests in flight (the latency bound would be
//!   32 / 0.2 s = 160/s, so the rate limit is the bound). Target: ≥ 90% of the limit.
//!   Besides criterion's batch figure (which includes filling and draining the pipe), the bench
//!   prints the steady-state completion rate of the last sample.
//! - `llm_judge/cached_lookup`: `Judge::assess` on events already in the in-memory cache (key
//!   hashing, cache lookup, validation, mapping). Target: ≥ 100,000 per second.
//! - `llm_judge/uncached_call`: `Judge::assess` of a new event against a server that answers at
//!   once, one call at a time: the judge's own work per judgment without the model (cache key,
//!   prompt rendering, request encoding, HTTP, reply parsing and validation, mapping). Measured
//!   as the process's CPU time, which includes the scripted server's own handling of the
//!   request: an upper bound. Target: ≤ 1 ms of CPU per judgment.
//!
//! Run with `cargo bench --bench judge`; numbers are recorded in `benches/README.md`
//! ("## LLM judge").

use sqlgrade_testkit::openai_mock;
mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use openai_mock::{MockServer, Scripted};
use serde_json::json;
use sqlgrade::config::LlmJudgeConfig;
use sqlgrade::event::Event;
use sqlgrade::judge::{Judge, JudgeRequest};
use sqlgrade::llm::LlmJudge;
use sqlgrade::stef::{Prepared, RuleProfile};

const LATENCY: Duration = Duration::from_millis(200);
const RATE_LIMIT: f64 = 100.0;
const CONCURRENCY: usize = 32;
const BATCH: usize = 500;
const WORKERS: usize = 64;

/// Distinct (question, SQL) events from every prediction file, prepared.
fn corpus(profile: &RuleProfile) -> Vec<Arc<(Event, Prepared)>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for event in support::prediction_events() {
        if !seen.insert((event.question.clone(), event.sql.clone())) {
            continue;
        }
        if let Ok(prepared) = sqlgrade::stef::prepare(&event, profile) {
            out.push(Arc::new((event, prepared)));
        }
    }
    out
}

fn reply() -> serde_json::Value {
    json!({
        "question_spec": {
            "outputs": ["name"], "aggregations": [], "filters": [],
            "group_by": [], "explicit_order": false, "top_k": null
        },
        "enrichment": {"status": "faithful", "added": [], "dropped": []},
        "filter_status": "fully_applied",
        "verdict": "correct",
        "confidence": 0.9,
        "rationale": "Benchmark reply."
    })
}

fn config(server: &MockServer) -> LlmJudgeConfig {
    LlmJudgeConfig {
        api_key_env: String::new(),
        base_url: server.base_url(),
        model: "bench-judge".into(),
        max_requests_per_second: RATE_LIMIT,
        max_concurrency: CONCURRENCY,
        timeout_ms: 5_000,
        ..LlmJudgeConfig::default()
    }
}

/// Assess `cases` with `WORKERS` workers; returns completion instants.
async fn run_batch(
    judge: Arc<LlmJudge>,
    profile: Arc<RuleProfile>,
    cases: Vec<Arc<(Event, Prepared)>>,
) -> Vec<Instant> {
    let queue = Arc::new(Mutex::new(cases));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        let (judge, profile, queue) = (judge.clone(), profile.clone(), queue.clone());
        workers.spawn(async move {
            let mut done = Vec::new();
            loop {
                let next = queue.lock().expect("queue").pop();
                let Some(case) = next else { break };
                judge
                    .assess(JudgeRequest {
                        event: &case.0,
                        prepared: &case.1,
                        profile: &profile,
                    })
                    .await
                    .expect("assessment");
                done.push(Instant::now());
            }
            done
        });
    }
    let mut all = Vec::new();
    while let Some(done) = workers.join_next().await {
        all.extend(done.expect("worker"));
    }
    all.sort();
    all
}

/// A prepared event of the corpus.
type Case = Arc<(Event, Prepared)>;

/// A one-worker runtime (the scripted server and the judge share it), the default profile and
/// the prepared corpus.
fn setup() -> (tokio::runtime::Runtime, Arc<RuleProfile>, Vec<Case>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let profile = Arc::new(RuleProfile::default());
    let cases = corpus(&profile);
    (runtime, profile, cases)
}

fn bench_judge(c: &mut Criterion) {
    let (runtime, profile, cases) = setup();
    assert!(
        cases.len() >= BATCH * 2,
        "corpus too small: {}",
        cases.len()
    );
    let server = runtime.block_on(MockServer::start());
    let body = reply();
    server.respond_with(move |_| Scripted::json(&body).after(LATENCY));

    let mut group = c.benchmark_group("llm_judge");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(60));
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut offset = 0usize;
    let mut steady: Vec<f64> = Vec::new();
    group.bench_function("sustained_rate_limited", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Fresh judge (empty cache) and events not seen in the previous batch.
                let judge = Arc::new(LlmJudge::from_config(&config(&server)).expect("judge"));
                let batch: Vec<_> = (0..BATCH)
                    .map(|i| cases[(offset + i) % cases.len()].clone())
                    .collect();
                offset = (offset + BATCH) % cases.len();
                let started = Instant::now();
                let done = runtime.block_on(run_batch(judge, profile.clone(), batch));
                total += started.elapsed();
                if let (Some(first), Some(last)) = (done.first(), done.last()) {
                    let span = last.duration_since(*first).as_secs_f64();
                    if span > 0.0 {
                        steady.push((done.len() - 1) as f64 / span);
                    }
                }
            }
            total
        })
    });
    if let Some(rate) = steady.last() {
        println!(
            "llm_judge/sustained_rate_limited: steady-state {rate:.1} assessments/s = {:.1}% of \
             the {RATE_LIMIT}/s limit (latency {} ms, {CONCURRENCY} in flight)",
            rate / RATE_LIMIT * 100.0,
            LATENCY.as_millis()
        );
    }
    group.finish();

    // Cached lookups: warm one judge with 1,000 events (instant replies), then time hits.
    let fast = MockServer::start();
    let fast = runtime.block_on(fast);
    let body = reply();
    fast.respond_with(move |_| Scripted::json(&body));
    let judge = LlmJudge::from_config(&LlmJudgeConfig {
        max_requests_per_second: 0.0,
        ..config(&fast)
    })
    .expect("judge");
    let warm: Vec<_> = cases.iter().take(1000).cloned().collect();
    runtime.block_on(async {
        for case in &warm {
            judge
                .assess(JudgeRequest {
                    event: &case.0,
                    prepared: &case.1,
                    profile: &profile,
                })
                .await
                .expect("warm-up");
        }
    });
    // Distinct events may still share a cache key (the key is built from the normalized
    // question/SQL, not the raw text), so count the calls the warm-up made.
    let warm_calls = judge.totals().llm_calls;
    let mut group = c.benchmark_group("llm_judge");
    group.throughput(Throughput::Elements(1));
    let (mut cpu, mut lookups) = (Duration::ZERO, 0u64);
    group.bench_function("cached_lookup", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let cpu_started = support::thread_cpu_now();
                let started = Instant::now();
                for i in 0..iters as usize {
                    let case = &warm[i % warm.len()];
                    let a = judge
                        .assess(JudgeRequest {
                            event: &case.0,
                            prepared: &case.1,
                            profile: &profile,
                        })
                        .await
                        .expect("cached");
                    assert!(a.cached);
                }
                let wall = started.elapsed();
                cpu += support::thread_cpu_now().saturating_sub(cpu_started);
                lookups += iters;
                wall
            })
        })
    });
    group.finish();
    if lookups > 0 {
        let per = cpu / u32::try_from(lookups).unwrap_or(u32::MAX);
        println!(
            "llm_judge/cached_lookup: {:.2} µs CPU per lookup = {:.0} lookups/s per core \
             (thread CPU time; wall-clock figures above include time the OS gave to others)",
            per.as_secs_f64() * 1e6,
            1.0 / per.as_secs_f64()
        );
    }
    assert!(
        warm_calls > 0 && warm_calls <= warm.len() as u64,
        "the warm-up reached the LLM ({warm_calls} calls for {} events)",
        warm.len()
    );
    assert_eq!(
        judge.totals().llm_calls,
        warm_calls,
        "every lookup after warm-up was a cache hit"
    );
}

/// The judge's own CPU per uncached judgment (see the module documentation).
fn bench_uncached_call(c: &mut Criterion) {
    let (runtime, profile, cases) = setup();
    let server = runtime.block_on(MockServer::start());
    let body = reply();
    server.respond_with(move |_| Scripted::json(&body));
    let config = LlmJudgeConfig {
        max_requests_per_second: 0.0,
        ..config(&server)
    };
    let mut group = c.benchmark_group("llm_judge");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    let (mut cpu, mut calls, mut offset) = (Duration::ZERO, 0u64, 0usize);
    group.bench_function("uncached_call", |b| {
        b.iter_custom(|iters| {
            // A fresh judge (empty cache), so that every assessment is a call.
            let judge = LlmJudge::from_config(&config).expect("judge");
            runtime.block_on(async {
                let cpu_started = support::process_cpu_now();
                let started = Instant::now();
                for i in 0..iters as usize {
                    let case = &cases[(offset + i) % cases.len()];
                    judge
                        .assess(JudgeRequest {
                            event: &case.0,
                            prepared: &case.1,
                            profile: &profile,
                        })
                        .await
                        .expect("assessment");
                }
                let wall = started.elapsed();
                cpu += support::process_cpu_now().saturating_sub(cpu_started);
                calls += judge.totals().llm_calls;
                offset = (offset + iters as usize) % cases.len();
                wall
            })
        })
    });
    group.finish();
    if calls > 0 {
        let per = cpu / u32::try_from(calls).unwrap_or(u32::MAX);
        println!(
            "llm_judge/uncached_call: {:.1} µs of process CPU per LLM call (judge + scripted \
             server; target ≤ 1 ms for the judge alone)",
            per.as_secs_f64() * 1e6
        );
    }
}

criterion_group!(benches, bench_judge, bench_uncached_call);
criterion_main!(benches);
