//! Durable judge cache on ClickHouse (`judge_cache`): lookup latency and write throughput of
//! `ClickHouseJudgeCache`, the path every in-memory miss of the LLM judge takes.
//!
//!   cargo bench --bench judge_cache -- [--entries N] [--lookups L] [--concurrency C]
//!
//! Starts its own ClickHouse (Debian 18.16, as the integration tests do; `scripts/services.sh
//! install` first), migrates, fills `judge_cache` with N entries (default 200,000) shaped like
//! real STEF cache entries (~1.3 KB of JSON each), then measures:
//!
//! 1. sequential lookups that hit and that miss (p50 / p99 / mean, L each, default 500);
//! 2. lookups from C concurrent tasks (default 8): lookups per second;
//! 3. `put` (queue) cost per entry and the background writer's insert rate (10,000 entries,
//!    then `flush`).
//!
//! Results are recorded in benches/README.md ("## durable judge cache").

use sqlgrade_testkit::servers as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlgrade::config::ClickHouseConfig;
use sqlgrade::llm::{DurableCache, DurableEntry};
use sqlgrade::stores::clickhouse::judge_cache::JudgeCacheStore;
use sqlgrade::stores::clickhouse::judge_cache::{
    ClickHouseJudgeCache, ClickHouseJudgeCacheOptions,
};
use sqlgrade::stores::clickhouse::migrate::migrate;

struct Args {
    entries: usize,
    lookups: usize,
    concurrency: usize,
}

fn args() -> Args {
    let mut a = Args {
        entries: 200_000,
        lookups: 500,
        concurrency: 8,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).and_then(|v| v.parse::<usize>().ok());
        match (argv[i].as_str(), value) {
            ("--entries", Some(v)) => a.entries = v,
            ("--lookups", Some(v)) => a.lookups = v.max(1),
            ("--concurrency", Some(v)) => a.concurrency = v.max(1),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

/// The key of entry `i` (cache keys are SHA-256 hex: 64 characters).
fn key(i: usize) -> String {
    format!("{:064x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// An entry shaped like a real STEF cache entry.
fn entry(i: usize) -> DurableEntry {
    let reply = serde_json::json!({
        "question_spec": {
            "outputs": ["superhero_name", "full_name"],
            "aggregations": [{"func": "count", "column": "id", "distinct": false}],
            "filters": [{"lhs": "full_name", "op": "like", "value": format!("Charles{i}%")},
                        {"lhs": "publisher_name", "op": "eq", "value": "Marvel Comics"}],
            "group_by": ["publisher_name"],
            "explicit_order": false,
            "top_k": null
        },
        "enrichment": {"status": "faithful", "added": [], "dropped": []},
        "filter_status": "fully_applied",
        "verdict": "likely_correct",
        "confidence": 0.83,
        "rationale": "The query filters on the full name prefix and the publisher as the question asks; grouping by publisher is benign under the app's rules, and the projection covers both requested columns."
    });
    DurableEntry {
        key: key(i),
        prompt: "stef".into(),
        prompt_version: "stef-3f9a1c2b7d".into(),
        model: "gpt-4o-mini".into(),
        reply: reply.to_string(),
        prompt_tokens: 1843,
        completion_tokens: 212,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<24} p50 {:>8.2?}  p99 {:>8.2?}  mean {:>8.2?}  ({} lookups)",
        percentile(&samples, 50.0),
        percentile(&samples, 99.0),
        mean,
        samples.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench binaries without `--bench`; correctness is
        // covered by tests/judge_cache_clickhouse.rs.
        println!("judge_cache: skipped outside `cargo bench`");
        return;
    }
    let args = args();
    let dir = tempfile::tempdir().unwrap();
    let ch = match support::ClickHouse::start_in(dir.path()) {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("judge_cache: ClickHouse unavailable ({e}); nothing measured");
            return;
        }
    };
    let settings = ClickHouseConfig {
        url: Some(ch.url()),
        database: "sqlgrade".into(),
        ..ClickHouseConfig::default()
    };
    migrate(&settings, None).await.unwrap();

    // Fill.
    let store = JudgeCacheStore::new(&settings);
    let t = Instant::now();
    let mut i = 0;
    while i < args.entries {
        let end = (i + 5_000).min(args.entries);
        let encoded: Vec<(String, String)> = (i..end)
            .map(|n| (key(n), serde_json::to_string(&entry(n)).unwrap()))
            .collect();
        let rows: Vec<(&str, &str)> = encoded
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        store.put_many(&rows).await.unwrap();
        i = end;
    }
    let value_bytes = serde_json::to_string(&entry(0)).unwrap().len();
    println!(
        "filled {} entries (~{value_bytes} B each) in {:.1?}; active parts: {}",
        args.entries,
        t.elapsed(),
        ch.query(
            "SELECT count() FROM system.parts WHERE database = 'sqlgrade' AND table = 'judge_cache' AND active"
        )
        .trim()
    );

    let cache = Arc::new(ClickHouseJudgeCache::new(
        &settings,
        ClickHouseJudgeCacheOptions::default(),
    ));
    // Warm-up (connection pool, ClickHouse caches).
    for n in 0..20 {
        let _ = cache.get(&key(n)).await;
    }

    // 1. Sequential hits and misses.
    let stride = (args.entries / args.lookups).max(1);
    let mut hits = Vec::with_capacity(args.lookups);
    for n in 0..args.lookups {
        let k = key((n * stride + 7) % args.entries.max(1));
        let t = Instant::now();
        let found = cache.get(&k).await.unwrap();
        hits.push(t.elapsed());
        assert!(found.is_some_and(|e| e.key == k), "entry {k} not found");
    }
    let mut misses = Vec::with_capacity(args.lookups);
    for n in 0..args.lookups {
        let k = key(args.entries + 1 + n);
        let t = Instant::now();
        assert!(cache.get(&k).await.unwrap().is_none());
        misses.push(t.elapsed());
    }
    report("lookup hit", hits);
    report("lookup miss", misses);

    // 2. Concurrent lookups.
    let per_task = args.lookups;
    let t = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|w| {
            let cache = Arc::clone(&cache);
            let entries = args.entries.max(1);
            tokio::spawn(async move {
                for n in 0..per_task {
                    let k = key((w * 7919 + n * 104_729) % entries);
                    assert!(cache.get(&k).await.unwrap().is_some());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let total = args.concurrency * per_task;
    println!(
        "{:<24} {:.0} lookups/s ({total} lookups from {} tasks in {:.2?})",
        "concurrent lookups",
        total as f64 / t.elapsed().as_secs_f64(),
        args.concurrency,
        t.elapsed()
    );

    // 3. Writes: queue cost and background insert rate.
    let writes = 10_000;
    let fresh: Vec<DurableEntry> = (0..writes)
        .map(|n| entry(args.entries + 10_000_000 + n))
        .collect();
    let t = Instant::now();
    for e in &fresh {
        cache.put(e).await.unwrap();
    }
    let queued = t.elapsed();
    cache.flush().await.unwrap();
    let flushed = t.elapsed();
    let stats = cache.stats();
    assert_eq!(stats.written, writes as u64, "{stats:?}");
    assert_eq!(stats.dropped, 0, "{stats:?}");
    println!(
        "{:<24} {:.1?} per put (queued), {writes} written in {flushed:.2?} = {:.0} entries/s",
        "writes",
        queued / writes as u32,
        writes as f64 / flushed.as_secs_f64()
    );
    println!("cache stats: {stats:?}");
}
