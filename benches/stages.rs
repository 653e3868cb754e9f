//! The per-event cost of the pipeline's stages that every event crosses on one thread, before
//! and after the scaling issue's change, in one run (criterion, thread CPU time of the calling
//! thread — what a serial stage spends per event, whatever other threads do):
//!
//!   cargo bench --bench stages
//!
//! - `decode`: `Event::decode_with_limit` of one payload — the decode stage's cost per event
//!   before (one task decoded every event); now the scoring tasks decode, in parallel.
//! - `jsonl_rows_serial`: the JSONL sink's row encoding as it was (the writer task serialised
//!   every row of a 1,000-row batch itself).
//! - `jsonl_rows_owned`: the same batch cut in two chunks encoded on rayon's pool
//!   (`encode_json_lines_in_chunks`, what `encode_json_lines_owned` does from 4 cores on): what
//!   is left on the writer's thread per event — the hand-over, the join and the concatenation.
//!   The bytes are the same (a unit test checks it).
//!
//! - `clickhouse_rows_serial`: the ClickHouse sink's `evaluations` body for the same 1,000 rows
//!   — each row's RowBinary record and the LZ4 chunks — on the calling thread, as the writer
//!   task does below 4 cores (and did on every machine before: the `clickhouse` crate's insert
//!   encoded and compressed on the sending task).
//! - `clickhouse_rows_chunked`: the same body cut into slices encoded and compressed on rayon's
//!   pool (`encode_evaluations(.., parallel = true)`, what the sink does from 4 cores on): what
//!   is left on the writer's thread per event — the hand-over and the join. The chunks'
//!   bytes, concatenated, are the serial ones (a unit test checks it).
//!
//! - `rows_freed_here`: freeing the 1,000 stored rows on the writer's thread, as the ClickHouse
//!   sink does below 4 cores (and did everywhere before).
//! - `rows_freed_on_pool`: handing them to rayon's pool to free (`ClickHouseSink::release`, from
//!   4 cores on): what is left on the writer's thread.
//!
//! - `batch_rows_copied`: the batcher adding each event's rows to its batch as it did (each
//!   row, 568 bytes, moved into one growing vector).
//! - `batch_rows_kept`: the same events added as the batcher does now (each event's rows
//!   vector kept as it arrived, in a vector with the previous batch's room; the writer lays
//!   them out flat on its own task).
//!
//! - `read_lines`: the file and stdin sources' line splitting (`LineReader`) of 1,000 payloads
//!   from memory — the part of the source stage that looks at every byte.
//! - `read_lines_buffered`: the same lines read as the sources read them now: after each read,
//!   the lines already complete in the buffer are taken without one (`buffered_line`).
//! - `raw_hand_over_per_message`: 1,000 messages from the source stage to the scorer pool's
//!   runs as they crossed before: one send (a permit) and one receive (the channel's lock) per
//!   message, 64 at a time as a received batch, runs formed for two workers.
//! - `raw_hand_over`: the same with the pipeline's own code (`pipeline::send_messages`: one
//!   reservation per batch; `pipeline::take_run`: one receive per run).
//! - `observe_rows`: the batcher's run statistics (`RunStats::observe_row`: the summary's
//!   counts, Φ histogram and per-agent means) for each row of a 1,000-row batch.
//! - `kafka_offsets`: what the Kafka source and the acknowledgement of a stored batch do per
//!   message with the offset tracker — register 1,000 messages over 6 partitions (as
//!   `KafkaSource::next` does, with each message's token), then acknowledge the batch as the
//!   pipeline does (`sources::ack_all`: one `OffsetTracker::ack_all` per batch; before, one
//!   `ack` per message, each taking the lock, allocating the topic's name for the lookup and
//!   waking waiters).
//! - `kafka_hand_out_formatted`: the rest of what `KafkaSource::next` did per received message
//!   as it was — copy the topic's name and the payload, write the message time as RFC 3339
//!   text, register the offset, write the origin with `format!`, build the token — for 1,000
//!   messages of 500 bytes over 6 partitions, then acknowledge them as one batch.
//! - `kafka_hand_out_per_message`: the same after that change: the time kept as a number (only
//!   an event without `ts` has it written, by its scoring task), the origin written with `itoa`;
//!   still the topic's name copied and the tracker's lock taken for every message.
//! - `kafka_hand_out`: as it is now (`sources::kafka::consumer::kafka_message`, the source's own code):
//!   one shared name per topic, and the messages registered a received batch (up to 64) at a
//!   time under one lock (`OffsetTracker::register_retain`).
//!
//! And what every event reads from every scoring thread at once (criterion's wall time: each of
//! 1, 2, … up to the cores threads reads in a loop, all at the same time; the time is per read
//! of one thread — flat when nothing is shared, rising with the threads when a written cache
//! line is):
//!
//! - `shared_reads/rule_profile/T`: `RulesStore::get` of the event's app;
//! - `shared_reads/catalogue_select/T`: `CatalogueStore::select` of the event's schema, with
//!   both benchmarks' `tables.json` as `[stef] catalogues`.
//!
//! The target: what must stay single costs ≤ 1 µs per event. Results in
//! `benches/README.md` ("Scaling: the serial stages").

mod support;

use std::time::Duration;

use criterion::measurement::Measurement;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sqlgrade::event::Event;
use sqlgrade::sources::file::LineReader;
use sqlgrade::sources::kafka::offsets::OffsetTracker;
use sqlgrade::sources::{AckToken, Acknowledge, Position, SourceMessage, SourceTime};
use sqlgrade::stef::RuleProfile;
use sqlgrade::stores::clickhouse::sink::encode_evaluations;
use sqlgrade::stores::{encode_json_lines, encode_json_lines_in_chunks};
use sqlgrade::telemetry::stats::RunStats;
use support::ThreadCpuTime;

const BATCH: usize = 1_000;

fn bench_cpu(c: &mut Criterion<ThreadCpuTime>) {
    run_group(c, "serial_stages_cpu");
}

fn run_group<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let events = support::prediction_events();
    let payloads: Vec<Vec<u8>> = events
        .iter()
        .map(|e| serde_json::to_vec(e).expect("encode"))
        .collect();
    let profile = RuleProfile::default();
    let ts = "2026-11-21T10:00:00Z";
    let rows: Vec<_> = (0..BATCH)
        .map(|i| support::stef_row(&events[i % events.len()], &profile, ts))
        .collect();

    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(payloads.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| {
            payloads
                .iter()
                .filter(|p| Event::decode_with_limit(p, 1 << 20).is_ok())
                .count()
        })
    });
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("jsonl_rows_serial", |b| {
        b.iter_batched(
            || rows.clone(),
            |rows| {
                let mut out = Vec::new();
                encode_json_lines(&rows, &mut out).expect("encode");
                drop(rows);
                out.len()
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("jsonl_rows_owned", |b| {
        b.iter_batched(
            || rows.clone(),
            |rows| {
                let mut out = Vec::new();
                encode_json_lines_in_chunks(rows, 2, &mut out).expect("encode");
                out.len()
            },
            BatchSize::LargeInput,
        )
    });
    let row_refs: Vec<_> = rows.iter().collect();
    group.bench_function("clickhouse_rows_serial", |b| {
        b.iter(|| {
            let chunks = encode_evaluations(&row_refs, 1_790_000_000, false).expect("encode");
            chunks.len()
        })
    });
    group.bench_function("clickhouse_rows_chunked", |b| {
        b.iter(|| {
            let chunks = encode_evaluations(&row_refs, 1_790_000_000, true).expect("encode");
            chunks.len()
        })
    });
    group.bench_function("rows_freed_here", |b| {
        b.iter_batched(|| rows.clone(), drop, BatchSize::LargeInput)
    });
    group.bench_function("rows_freed_on_pool", |b| {
        b.iter_batched(
            || rows.clone(),
            |rows| {
                rayon::spawn(move || {
                    use rayon::prelude::*;
                    rows.into_par_iter().for_each(drop);
                })
            },
            BatchSize::LargeInput,
        )
    });
    let per_event: Vec<Vec<_>> = rows.iter().map(|row| vec![row.clone()]).collect();
    group.bench_function("batch_rows_copied", |b| {
        b.iter_batched(
            || per_event.clone(),
            |events| {
                let mut batch = Vec::new();
                for rows in events {
                    batch.extend(rows);
                }
                batch
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("batch_rows_kept", |b| {
        b.iter_batched(
            || per_event.clone(),
            |events| {
                let mut batch = Vec::with_capacity(events.len());
                for rows in events {
                    batch.push(rows);
                }
                batch
            },
            BatchSize::LargeInput,
        )
    });
    let mut lines = Vec::new();
    for payload in payloads.iter().cycle().take(BATCH) {
        lines.extend_from_slice(payload);
        lines.push(b'\n');
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    // `read_lines_buffered`: as the file and stdin sources read now — after a read, the lines
    // already complete in the buffer are taken without one (`LineReader::buffered_line`).
    for (name, buffered) in [("read_lines", false), ("read_lines_buffered", true)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let mut reader = LineReader::new(lines.as_slice(), 1 << 20);
                    let mut n = 0;
                    while let Ok(Some(line)) = reader.read_line(true).await {
                        n += line.len;
                        while buffered && let Some(line) = reader.buffered_line() {
                            n += line.len;
                        }
                    }
                    n
                })
            })
        });
    }
    for (name, batched) in [
        ("raw_hand_over_per_message", false),
        ("raw_hand_over", true),
    ] {
        group.bench_function(name, |b| {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<SourceMessage>(1024);
            b.iter_batched(
                || {
                    (0..BATCH)
                        .map(|i| line_message(i as i64 + 1))
                        .collect::<Vec<_>>()
                },
                |messages| runtime.block_on(raw_hand_over(&tx, &mut rx, messages, batched)),
                BatchSize::SmallInput,
            )
        });
    }
    group.bench_function("observe_rows", |b| {
        // The batcher's run statistics in a steady state (every key already counted once).
        let mut stats = RunStats::default();
        b.iter(|| {
            for row in &rows {
                stats.observe_row(row);
            }
            stats.rows
        })
    });
    group.bench_function("kafka_offsets", |b| {
        let topic = "agent-events";
        let tracker = tracker_of_six_partitions(topic);
        let mut offset = 0i64;
        b.iter(|| {
            let mut tokens = Vec::with_capacity(BATCH);
            for i in 0..BATCH {
                let partition = (i % 6) as i32;
                offset += 1;
                tracker.register(topic, partition, offset);
                tokens.push(AckToken::new(
                    Position {
                        stream: topic.into(),
                        partition,
                        offset,
                    },
                    tracker.clone() as std::sync::Arc<dyn Acknowledge>,
                ));
            }
            sqlgrade::sources::ack_all(tokens);
            tracker.in_flight()
        })
    });
    let payload = vec![b'x'; 500];
    for (name, formatted) in [
        ("kafka_hand_out_formatted", true),
        ("kafka_hand_out_per_message", false),
    ] {
        group.bench_function(name, |b| {
            let topic = "agent-events";
            let tracker = tracker_of_six_partitions(topic);
            let mut offset = 0i64;
            b.iter(|| {
                let mut messages = Vec::with_capacity(BATCH);
                for i in 0..BATCH {
                    let partition = (i % 6) as i32;
                    offset += 1;
                    let millis = 1_767_323_045_678 + offset;
                    messages.push(kafka_hand_out(
                        &tracker, topic, partition, offset, &payload, millis, formatted,
                    ));
                }
                sqlgrade::sources::ack_all(messages.into_iter().map(|m| m.ack).collect());
                tracker.in_flight()
            })
        });
    }
    group.bench_function("kafka_hand_out", |b| {
        // As `KafkaSource` does now: the topic's shared name, and the tracker's lock taken once
        // per received batch of up to 64 messages.
        let topic: std::sync::Arc<str> = "agent-events".into();
        let tracker = tracker_of_six_partitions(&topic);
        let mut offset = 0i64;
        let mut taken = Vec::with_capacity(64);
        b.iter(|| {
            let mut messages = Vec::with_capacity(BATCH);
            for i in 0..BATCH {
                let partition = (i % 6) as i32;
                offset += 1;
                let millis = 1_767_323_045_678 + offset;
                taken.push(sqlgrade::sources::kafka::consumer::kafka_message(
                    std::sync::Arc::clone(&topic),
                    partition,
                    offset,
                    &payload,
                    Some(millis),
                    &tracker,
                ));
                if taken.len() == 64 || i + 1 == BATCH {
                    tracker.register_retain(&mut taken, |m| m.ack.position());
                    messages.append(&mut taken);
                }
            }
            sqlgrade::sources::ack_all(messages.into_iter().map(|m| m.ack).collect());
            tracker.in_flight()
        })
    });
    group.finish();
}

/// A file source's message for line `line_no` (a 500-byte payload).
fn line_message(line_no: i64) -> SourceMessage {
    SourceMessage {
        payload: vec![b'x'; 500],
        origin: format!("file:events.jsonl:{line_no}"),
        ack: AckToken::untracked(Position {
            stream: "events.jsonl".into(),
            partition: 0,
            offset: line_no,
        }),
        source_time: None,
        quarantine: None,
    }
}

/// `messages` from the source stage to the scorer pool's runs (two workers), 64 at a time as
/// the source receives them: with the pipeline's own `send_messages` and `take_run`
/// (`batched`), or as it was — a send, and a receive, per message. The runs are returned (and
/// dropped untimed).
async fn raw_hand_over(
    tx: &tokio::sync::mpsc::Sender<SourceMessage>,
    rx: &mut tokio::sync::mpsc::Receiver<SourceMessage>,
    messages: Vec<SourceMessage>,
    batched: bool,
) -> Vec<Vec<SourceMessage>> {
    const WORKERS: usize = 2;
    let mut runs = Vec::new();
    let mut messages = messages.into_iter().peekable();
    let mut batch = Vec::with_capacity(64);
    while messages.peek().is_some() {
        batch.extend(messages.by_ref().take(64));
        if batched {
            sqlgrade::pipeline::send_messages(tx, &mut batch).await;
        } else {
            for message in batch.drain(..) {
                let _ = tx.send(message).await;
            }
        }
        while let Ok(first) = rx.try_recv() {
            if batched {
                runs.push(sqlgrade::pipeline::take_run(rx, first, WORKERS));
            } else {
                let share = (rx.len() / WORKERS).min(31);
                let mut run = vec![first];
                while run.len() <= share {
                    match rx.try_recv() {
                        Ok(message) => run.push(message),
                        Err(_) => break,
                    }
                }
                runs.push(run);
            }
        }
    }
    runs
}

/// An offset tracker with partitions 0–5 of `topic` assigned.
fn tracker_of_six_partitions(topic: &str) -> std::sync::Arc<OffsetTracker> {
    let tracker = std::sync::Arc::new(OffsetTracker::new());
    tracker.assign((0..6).map(|p| (topic, p)));
    tracker
}

/// What `KafkaSource::next` did with each received message (see the module docs): two sessions
/// ago (`formatted`) or until the batched receive.
fn kafka_hand_out(
    tracker: &std::sync::Arc<OffsetTracker>,
    topic: &str,
    partition: i32,
    offset: i64,
    payload: &[u8],
    millis: i64,
    formatted: bool,
) -> SourceMessage {
    let topic: std::sync::Arc<str> = topic.into();
    let payload = payload.to_vec();
    let (source_time, old_text) = if formatted {
        let text = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(millis)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        (None, text)
    } else {
        (SourceTime::from_millis(millis), None)
    };
    tracker.register(&topic, partition, offset);
    let origin = if formatted {
        format!("kafka:{topic}/{partition}@{offset}")
    } else {
        sqlgrade::sources::kafka::consumer::kafka_origin(&topic, partition, offset)
    };
    std::hint::black_box(old_text);
    SourceMessage {
        payload,
        origin,
        ack: AckToken::new(
            Position {
                stream: topic,
                partition,
                offset,
            },
            tracker.clone() as std::sync::Arc<dyn Acknowledge>,
        ),
        source_time,
        quarantine: None,
    }
}

/// `read` run `iters` times on each of `threads` threads at once: the wall time of the slowest.
fn on_threads(threads: usize, iters: u64, read: &(impl Fn(u64) + Sync)) -> Duration {
    let start = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let began = std::time::Instant::now();
                    for i in 0..iters {
                        read(i);
                    }
                    began.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .max()
            .unwrap_or_default()
    })
}

fn bench_shared_reads(c: &mut Criterion) {
    use sqlgrade::score::CatalogueStore;
    let events = support::prediction_events();
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|t| *t < cores)
        .collect();
    counts.push(cores);
    let data = sqlgrade_testkit::data::data_dir();
    let rules = tempfile::tempdir().expect("temp dir");
    let catalogues = CatalogueStore::new(
        vec![
            data.join("bird/tables.json"),
            data.join("spider/tables.json"),
        ],
        rules.path().to_path_buf(),
    );
    let profiles = sqlgrade::score::profiles::RulesStore::from_profiles([(
        "app".to_string(),
        RuleProfile::default(),
    )]);
    let profile = RuleProfile::default();
    let mut group = c.benchmark_group("shared_reads");
    group.sample_size(20);
    for &threads in &counts {
        group.bench_function(format!("rule_profile/{threads}"), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, &|_| {
                    std::hint::black_box(profiles.get(Some("app")));
                })
            })
        });
        group.bench_function(format!("catalogue_select/{threads}"), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, &|i| {
                    let event = &events[i as usize % events.len()];
                    std::hint::black_box(catalogues.select(event, &profile));
                })
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches_cpu;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_cpu
}
criterion_group!(benches_wall, bench_shared_reads);
criterion_main!(benches_cpu, benches_wall);
