//! The Kafka source stage's CPU per message against a real broker (tansu): what the one task
//! that receives every message spends on it, librdkafka's receive included.
//!
//!   cargo bench --bench kafka_source -- [--messages N] [--rounds R] [--partitions P]
//!       [--prefetch-seconds S] [--broker sqlite|memory]
//!
//! Starts its own tansu (`scripts/services.sh install` first), produces N events of the shared
//! corpus (default 100,000) over P partitions (default 6) as a backlog, then, per round, on a
//! fresh consumer group each time, reads the whole backlog on one thread (a current-thread
//! runtime) in two ways, alternating their order from round to round:
//!
//! - `recv_per_message`: a bare `StreamConsumer` with the source's librdkafka properties, one
//!   `recv` per message (a message stream, and its waker slot, made and dropped per message)
//!   and the payload copied — the receive as the source did it before the batched receive,
//!   without anything else it did;
//! - `kafka_source`: the source as the source stage asks it (`Source::next_ready`, else
//!   `Source::next`) until N messages are out: the receive in batches, the
//!   topic, payload, time and origin of each message, its registration with the offset tracker
//!   and its acknowledgement token — everything the source stage gets from the source.
//!
//! Each reader takes its first message, then waits S seconds (default 8) for librdkafka to
//! fetch the rest of the backlog into its queue (its bound raised to 256 MiB for the bench), so
//! the clock measures draining a full queue — a daemon behind on a backlog, where the stage's
//! cost limits the rate — not waiting on the broker (this VM's tansu serves ~30,000 messages/s,
//! slower than either reader).
//!
//! Each is measured in the reading thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: librdkafka's
//! own fetch threads are not in it; the rebalance and statistics callbacks the poll serves
//! are) from the first message to the last, divided by the messages, and in wall-clock
//! messages per second. The reader hands its messages, 1,000 at a time, to another thread that
//! acknowledges the tokens and frees them (in the daemon the batcher acknowledges and the
//! scoring threads free), so memory is reused rather than grown. `max_in_flight` is set above
//! N, so back-pressure never waits.
//!
//! With `--prefetch-seconds 0` the readers drain as the broker serves, so wall-clock messages
//! per second is the broker's serving rate when it is the slower side. The broker keeps the
//! topics in memory (`--broker memory`, the default since 2026-12-02; `servers::BrokerStorage`,
//! a tansu built with `--features libsql,dynostore`, as `scripts/services.sh install` builds
//! it); `--broker sqlite` keeps them in SQLite, as the tests do (the figures recorded before
//! that date).
//!
//! The scaling issue's target: what must stay single costs ≤ 1 µs per event. Results in
//! `benches/README.md` ("The Kafka source receives in batches").

mod support;

use std::time::{Duration, Instant};

use rdkafka::Message as _;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use sqlgrade::config::KafkaSourceConfig;
use sqlgrade::sources::kafka::KafkaSource;
use sqlgrade::sources::{AckToken, Source, SourceMessage, ack_all};
use sqlgrade_testkit::servers;
use support::thread_cpu_now;

const TOPIC: &str = "events";
/// The longest a round may wait for its backlog (a broker that stalls ends the bench).
const ROUND_LIMIT: Duration = Duration::from_secs(300);

struct Args {
    messages: usize,
    prefetch: Duration,
    rounds: usize,
    partitions: i32,
    broker: servers::BrokerStorage,
}

fn args() -> Args {
    let mut out = Args {
        messages: 100_000,
        prefetch: Duration::from_secs(8),
        rounds: 3,
        partitions: 6,
        broker: servers::BrokerStorage::Memory,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--messages" => out.messages = value("--messages"),
            "--rounds" => out.rounds = value("--rounds").max(1),
            "--prefetch-seconds" => {
                out.prefetch = Duration::from_secs(value("--prefetch-seconds") as u64)
            }
            "--partitions" => out.partitions = value("--partitions").max(1) as i32,
            "--broker" => {
                out.broker = it
                    .next()
                    .and_then(|name| servers::BrokerStorage::parse(&name))
                    .unwrap_or_else(|| panic!("--broker wants sqlite or memory"))
            }
            // cargo bench passes `--bench`; criterion-style filters are not used here.
            _ => {}
        }
    }
    out
}

/// One way of reading the backlog: thread CPU and wall time from the first message to the last.
struct Reading {
    cpu: Duration,
    wall: Duration,
    messages: usize,
}

impl Reading {
    fn cpu_per_message_ns(&self) -> f64 {
        self.cpu.as_nanos() as f64 / self.messages.max(1) as f64
    }

    fn per_second(&self) -> f64 {
        self.messages as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

fn settings(brokers: &str, group: &str, messages: usize) -> KafkaSourceConfig {
    KafkaSourceConfig {
        brokers: Some(brokers.to_string()),
        topics: vec![TOPIC.into()],
        group_id: group.into(),
        max_in_flight: std::num::NonZeroUsize::MIN.saturating_add(messages),
        // Room for the whole backlog in librdkafka's queue (the source's default bounds it at
        // 16 MiB), so that it can be fetched before the clock starts.
        kafka_properties: [(
            "queued.max.messages.kbytes".to_string(),
            "262144".to_string(),
        )]
        .into(),
        ..KafkaSourceConfig::default()
    }
}

/// Let librdkafka fetch the backlog into its queue before the clock starts: the reader then
/// drains a full queue, as a daemon behind on a backlog does, instead of waiting on the
/// broker (this VM's tansu serves ~30,000 messages/s, slower than either reader).
async fn let_the_backlog_arrive(prefetch: Duration) {
    tokio::time::sleep(prefetch).await;
}

/// The source as the source stage asks it until `n` messages are out.
async fn read_with_source(brokers: &str, group: &str, n: usize, prefetch: Duration) -> Reading {
    let mut source = KafkaSource::new(&settings(brokers, group, n), None).expect("kafka source");
    let reading = timed_drain(
        n,
        prefetch,
        async || match source.next_ready() {
            // What is already received first, else wait.
            Some(message) => message,
            None => tokio::time::timeout(ROUND_LIMIT, source.next())
                .await
                .expect("the backlog stalled")
                .expect("receive")
                .expect("a message"),
        },
        // In the daemon the batcher acknowledges and the scoring threads free.
        |chunk: Vec<SourceMessage>| {
            ack_all(chunk.into_iter().map(|m| m.ack).collect::<Vec<AckToken>>());
        },
    )
    .await;
    source.stop();
    let _ = tokio::time::timeout(Duration::from_secs(20), source.finish()).await;
    reading
}

/// A bare consumer with the source's properties: one `recv` per message, the payload copied.
async fn read_per_message(brokers: &str, group: &str, n: usize, prefetch: Duration) -> Reading {
    let consumer: StreamConsumer =
        sqlgrade::sources::kafka::client::consumer_config(&settings(brokers, group, n))
            .create()
            .expect("consumer");
    consumer.subscribe(&[TOPIC]).expect("subscribe");
    timed_drain(
        n,
        prefetch,
        async || {
            let message = tokio::time::timeout(ROUND_LIMIT, consumer.recv())
                .await
                .expect("the backlog stalled")
                .expect("receive");
            message.payload().unwrap_or_default().to_vec()
        },
        drop::<Vec<Vec<u8>>>,
    )
    .await
}

/// Take `n` messages with `next`: the first, then a wait for the backlog to arrive, then the
/// rest on the clock. Messages go, `CHUNK` at a time, to another thread that `release`s them,
/// so memory is reused rather than grown.
async fn timed_drain<T: Send + 'static>(
    n: usize,
    prefetch: Duration,
    mut next: impl AsyncFnMut() -> T,
    release: impl Fn(Vec<T>) + Send + 'static,
) -> Reading {
    let (chunks, releaser) = release_elsewhere(release);
    let mut chunk: Vec<T> = Vec::with_capacity(CHUNK);
    // Joining the group and the first fetch are not the stage's per-message cost.
    chunk.push(next().await);
    let_the_backlog_arrive(prefetch).await;
    let (cpu0, wall0) = (thread_cpu_now(), Instant::now());
    for _ in 1..n {
        chunk.push(next().await);
        if chunk.len() == CHUNK {
            let _ = chunks.send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)));
        }
    }
    let reading = Reading {
        cpu: thread_cpu_now() - cpu0,
        wall: wall0.elapsed(),
        messages: n - 1,
    };
    let _ = chunks.send(chunk);
    drop(chunks);
    let _ = releaser.join();
    reading
}

/// Messages handed to another thread this many at a time.
const CHUNK: usize = 1_000;

/// A thread that receives chunks of messages and releases each with `release`.
fn release_elsewhere<T: Send + 'static>(
    release: impl Fn(Vec<T>) + Send + 'static,
) -> (std::sync::mpsc::Sender<Vec<T>>, std::thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<T>>();
    let handle = std::thread::spawn(move || {
        for chunk in rx {
            release(chunk);
        }
    });
    (tx, handle)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench binaries without `--bench`; the Kafka source's
        // tests (`tests/daemon/kafka_source.rs`) cover correctness, so there is nothing to
        // measure here (it drained 100,000 messages three times in the test run before).
        println!("kafka_source: skipped outside `cargo bench`");
        return;
    }
    let args = args();
    let dir = tempfile::tempdir().expect("temp dir");
    let kafka = match servers::Tansu::start_with(dir.path(), args.broker) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("kafka_source: cannot start tansu ({e}); run scripts/services.sh install");
            return;
        }
    };
    kafka.create_topic(TOPIC, args.partitions as u32);
    let brokers = kafka.brokers();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let payloads: Vec<Vec<u8>> = servers::corpus_events(args.messages)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let mean_bytes = payloads.iter().map(Vec::len).sum::<usize>() / payloads.len().max(1);
    let produced = Instant::now();
    runtime.block_on(async {
        let producer = servers::producer(&brokers);
        servers::produce_all(&producer, TOPIC, args.partitions, &payloads).await;
    });
    drop(payloads);
    println!(
        "kafka_source: {} messages (mean {mean_bytes} bytes) over {} partitions produced in {:.1} s \
         (broker topics in {}); load average {}",
        args.messages,
        args.partitions,
        produced.elapsed().as_secs_f64(),
        args.broker.name(),
        load_average()
    );
    println!(
        "{:<6} {:<18} {:>14} {:>14}",
        "round", "reader", "CPU ns/msg", "messages/s"
    );
    let mut per_message = Vec::new();
    let mut batched = Vec::new();
    for round in 0..args.rounds {
        let order: [bool; 2] = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for use_source in order {
            let group = format!("bench-{round}-{use_source}");
            let reading = runtime.block_on(async {
                if use_source {
                    read_with_source(&brokers, &group, args.messages, args.prefetch).await
                } else {
                    read_per_message(&brokers, &group, args.messages, args.prefetch).await
                }
            });
            let name = if use_source {
                "kafka_source"
            } else {
                "recv_per_message"
            };
            println!(
                "{:<6} {:<18} {:>14.0} {:>14.0}",
                round + 1,
                name,
                reading.cpu_per_message_ns(),
                reading.per_second()
            );
            if use_source {
                batched.push(reading);
            } else {
                per_message.push(reading);
            }
        }
    }
    let mean =
        |r: &[Reading]| r.iter().map(Reading::cpu_per_message_ns).sum::<f64>() / r.len() as f64;
    let (a, b) = (mean(&per_message), mean(&batched));
    println!(
        "mean CPU per message: recv_per_message {a:.0} ns, kafka_source {b:.0} ns ({:.1} % of it); \
         load average {}",
        100.0 * b / a,
        load_average()
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
