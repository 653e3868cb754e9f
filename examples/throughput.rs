//! Throughput of the whole daemon path on the shared-data corpus.
//!
//! Builds N events from every BIRD and Spider prediction (ids made unique per copy), writes them
//! to a temporary JSONL file, then measures
//! 1. scoring alone on one thread (decode + STEF + deterministic judge + row serialization), and
//! 2. the full pipeline: file source → decode → scorer pool → batcher → JSONL sink (fsync per
//!    batch), with the configured number of workers.
//!
//! `cargo run --release --example throughput -- [EVENTS] [WORKERS]` (defaults: 100000, CPUs).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::config::{PipelineConfig, SinkConfig};
use sqlgrade::event::Event;
use sqlgrade::pipeline::Pipeline;
use sqlgrade::score::Scorer;
use sqlgrade::sources::FileSource;
use sqlgrade::stores::JsonlSink;
use sqlgrade_testkit::data::data_dir;

fn corpus() -> Result<Vec<Event>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for (format, name) in [
        (BackfillFormat::Bird, "bird"),
        (BackfillFormat::Spider, "spider"),
    ] {
        let dir = data_dir().join(name);
        let mut files: Vec<_> = std::fs::read_dir(dir.join("predictions"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for predictions in files {
            let joined = benchmark_events(
                format,
                &dir.join("dev.jsonl"),
                Path::new(&predictions),
                None,
            )?;
            out.extend(joined.events);
        }
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let total: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let workers: std::num::NonZeroUsize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or_else(|| {
            std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN)
        });
    let base = corpus()?;
    if base.is_empty() {
        return Err("empty corpus".into());
    }
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("events.jsonl");
    let mut text = Vec::new();
    let mut payloads = Vec::with_capacity(total);
    for i in 0..total {
        let mut event = base[i % base.len()].clone();
        event.event_id = format!("{}-{}", event.event_id, i / base.len());
        let bytes = serde_json::to_vec(&event)?;
        text.extend_from_slice(&bytes);
        text.push(b'\n');
        payloads.push(bytes);
    }
    std::fs::write(&input, &text)?;
    println!(
        "corpus: {} distinct events, {total} events, {:.1} MB",
        base.len(),
        text.len() as f64 / 1e6
    );

    // 1. Scoring alone, one thread.
    let scorer = Scorer::deterministic();
    let ts = "2026-11-21T10:00:00.000Z";
    let n = total.min(50_000);
    let started = Instant::now();
    let mut rows = 0usize;
    let mut line = Vec::with_capacity(4096);
    for payload in payloads.iter().take(n) {
        let event = Event::decode(payload)?;
        for row in scorer.score_at(&event, ts).await {
            line.clear();
            serde_json::to_writer(&mut line, &row)?;
            rows += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "scoring, 1 thread: {n} events, {rows} rows in {secs:.2} s = {:.0} events/s per core",
        n as f64 / secs
    );

    // 2. Full pipeline.
    let out_dir = dir.path().join("out");
    let options = PipelineConfig {
        workers,
        ..PipelineConfig::default()
    };
    let pipeline = Pipeline::new(
        Box::new(FileSource::new(&input, false, options.max_event_bytes)),
        Box::new(JsonlSink::open(&out_dir).await?),
        Arc::new(Scorer::deterministic()),
        &options,
        &SinkConfig::default(),
    );
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let summary = pipeline.run(rx).await?;
    let secs = summary.elapsed.as_secs_f64();
    println!(
        "pipeline (file → {workers} workers → JSONL): {} events, {} rows in {secs:.2} s = {:.0} events/s",
        summary.events,
        summary.rows,
        summary.events as f64 / secs
    );
    Ok(())
}
