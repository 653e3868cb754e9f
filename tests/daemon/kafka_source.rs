//! The Kafka source against a real broker (tansu): commits only the contiguous acknowledged
//! prefix of each partition, applies back-pressure, dead-letters undecodable payloads to a topic
//! with reasons (acknowledging them only after the produce is confirmed), and commits everything
//! acknowledged on finish; and the judge-work hand-over waits out a broker outage instead of
//! failing (issue: keep running through outages).

use sqlgrade_testkit::servers as support;

use std::collections::BTreeMap;
use std::time::Duration;

use sqlgrade::config::KafkaSourceConfig;
use sqlgrade::sources::kafka::{HEADER_REASON, HEADER_SOURCE, KafkaSource};
use sqlgrade::sources::{Source, SourceMessage};
use support::{Tansu, committed, read_topic};

async fn next_within(source: &mut KafkaSource, d: Duration) -> Option<SourceMessage> {
    tokio::time::timeout(d, source.next())
        .await
        .ok()
        .and_then(|r| r.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_source_commits_contiguous_prefix_and_dead_letters() {
    let _servers = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let kafka = match Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => {
            return support::skip(
                "kafka_source_commits_contiguous_prefix_and_dead_letters",
                &e,
            );
        }
    };
    kafka.create_topic("events", 3);
    kafka.create_topic("events-dlq", 1);
    let brokers = kafka.brokers();

    // 300 valid events and 30 malformed ones, interleaved over 3 partitions.
    let valid = support::corpus_events(300);
    let bad = support::malformed(30);
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    for (i, (_, p)) in valid.iter().enumerate() {
        payloads.push(p.clone());
        if i % 10 == 5 {
            payloads.push(bad[i / 10].clone());
        }
    }
    assert_eq!(payloads.len(), 330);
    let producer = support::producer(&brokers);
    support::produce_all(&producer, "events", 3, &payloads).await;

    let settings = KafkaSourceConfig {
        brokers: Some(brokers.clone()),
        topics: vec!["events".into()],
        group_id: "g1".into(),
        dead_letter_topic: Some("events-dlq".into()),
        max_in_flight: std::num::NonZeroUsize::new(100).unwrap(),
        commit_interval_ms: 200,
        ..KafkaSourceConfig::default()
    };
    let mut source = KafkaSource::new(&settings, None).unwrap();
    // The test plays the pipeline's decode stage: what does not decode goes to the source's
    // dead-letter route, acknowledged once the broker has it.
    let route = source
        .dead_letter_route()
        .expect("a dead-letter topic gives a route");
    let valid = |m: SourceMessage| -> Option<SourceMessage> {
        match sqlgrade::event::Event::decode(&m.payload) {
            Ok(_) => Some(m),
            Err(reason) => {
                route.send(m.payload, m.origin, reason.to_string(), m.ack);
                None
            }
        }
    };

    // Back-pressure: 100 messages out and unacknowledged → the source stops handing out more.
    let mut held: Vec<SourceMessage> = Vec::new();
    while held.len() < 100 {
        let m = next_within(&mut source, Duration::from_secs(60))
            .await
            .expect("messages arrive");
        held.extend(valid(m));
    }
    assert!(
        next_within(&mut source, Duration::from_secs(2))
            .await
            .is_none(),
        "101st message handed out despite max_in_flight = 100"
    );

    // Hold back the first message handed out; acknowledge everything else as it arrives.
    let blocker = held.remove(0);
    let blocked_partition = blocker.ack.position().partition;
    let blocked_offset = blocker.ack.position().offset;
    let mut seen = held.len() + 1;
    for m in held.drain(..) {
        m.ack.ack();
    }
    while seen < 300 {
        let m = next_within(&mut source, Duration::from_secs(60))
            .await
            .expect("all valid messages arrive");
        if let Some(m) = valid(m) {
            m.ack.ack();
            seen += 1;
        }
    }

    // The blocked partition cannot commit past the held message; the others commit everything
    // (their malformed messages included, once the dead-letter produce was confirmed).
    let want_blocked: BTreeMap<i32, i64> = (0..3)
        .map(|p| {
            (
                p,
                if p == blocked_partition {
                    blocked_offset
                } else {
                    110
                },
            )
        })
        .collect();
    let mut ok = false;
    for _ in 0..100 {
        if committed(&brokers, "g1", "events", 3) == want_blocked {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        ok,
        "committed = {:?}, want {want_blocked:?}",
        committed(&brokers, "g1", "events", 3)
    );

    blocker.ack.ack();
    source.finish().await.unwrap();
    let c = committed(&brokers, "g1", "events", 3);
    assert_eq!(c, BTreeMap::from([(0, 110), (1, 110), (2, 110)]));

    // Exactly the 30 malformed payloads, byte for byte, with reasons and origins.
    let letters = read_topic(&brokers, "events-dlq", 30);
    assert_eq!(letters.len(), 30);
    let mut got: Vec<Vec<u8>> = letters.iter().map(|(p, _)| p.clone()).collect();
    let mut want = bad.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    for (_, headers) in &letters {
        let reason = &headers[HEADER_REASON];
        assert!(
            [
                "malformed JSON",
                "missing required field",
                "must be a JSON object",
                "not valid UTF-8"
            ]
            .iter()
            .any(|r| reason.contains(r)),
            "{reason}"
        );
        assert!(headers[HEADER_SOURCE].starts_with("kafka:events/"));
    }
}

/// An event without `ts` takes the Kafka message timestamp as its event time, so a redelivery
/// (here: the same messages read again by another consumer group) carries the same time and its
/// rows collapse with the first delivery's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_message_timestamp_is_the_source_time_on_every_delivery() {
    let _servers = crate::one_at_a_time().await;
    use rdkafka::producer::FutureRecord;
    let dir = tempfile::tempdir().unwrap();
    let kafka = match Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => {
            return support::skip(
                "kafka_message_timestamp_is_the_source_time_on_every_delivery",
                &e,
            );
        }
    };
    kafka.create_topic("no-ts", 1);
    let brokers = kafka.brokers();
    let producer = support::producer(&brokers);
    // 2026-01-02T03:04:05.678Z plus i seconds.
    let base_ms: i64 = 1_767_323_045_678;
    for i in 0..3i64 {
        let payload = format!(
            r#"{{"event_id": "nots-{i}", "question": "How many heroes?", "sql": "SELECT COUNT(*) FROM superhero"}}"#
        );
        let record: FutureRecord<'_, (), str> = FutureRecord::to("no-ts")
            .payload(payload.as_str())
            .partition(0)
            .timestamp(base_ms + i * 1000);
        producer
            .send(record, Duration::from_secs(30))
            .await
            .expect("delivered");
    }
    let mut deliveries = Vec::new();
    for group in ["first", "redelivery"] {
        let settings = KafkaSourceConfig {
            brokers: Some(brokers.clone()),
            topics: vec!["no-ts".into()],
            group_id: group.into(),
            ..KafkaSourceConfig::default()
        };
        let mut source = KafkaSource::new(&settings, None).unwrap();
        let mut times = Vec::new();
        while times.len() < 3 {
            let m = next_within(&mut source, Duration::from_secs(60))
                .await
                .expect("messages arrive");
            times.push(m.source_time.map(sqlgrade::sources::SourceTime::rfc3339));
            m.ack.ack();
        }
        source.finish().await.unwrap();
        deliveries.push(times);
    }
    assert_eq!(
        deliveries[0],
        vec![
            Some("2026-01-02T03:04:05.678Z".to_string()),
            Some("2026-01-02T03:04:06.678Z".to_string()),
            Some("2026-01-02T03:04:07.678Z".to_string()),
        ]
    );
    assert_eq!(deliveries[0], deliveries[1], "the same time on redelivery");
}

/// The source receives what librdkafka has fetched in batches and hands them out one by one:
/// messages of a batch that are waiting when the source stops are registered (so the offset
/// tracker counts them) but never handed out, and the final commit stops at the first of them —
/// the next start reads them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_waiting_in_a_received_batch_are_not_committed_past() {
    let _servers = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let kafka = match Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => {
            return support::skip(
                "messages_waiting_in_a_received_batch_are_not_committed_past",
                &e,
            );
        }
    };
    kafka.create_topic("batched", 1);
    let brokers = kafka.brokers();
    let payloads: Vec<Vec<u8>> = support::corpus_events(200)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let positions =
        support::produce_all(&support::producer(&brokers), "batched", 1, &payloads).await;
    let settings = KafkaSourceConfig {
        brokers: Some(brokers.clone()),
        topics: vec!["batched".into()],
        group_id: "g-batched".into(),
        commit_interval_ms: 100,
        ..KafkaSourceConfig::default()
    };
    let mut source = KafkaSource::new(&settings, None).unwrap();
    let mut handed = Vec::new();
    while handed.len() < 100 {
        let message = match source.next_ready() {
            Some(message) => message,
            None => next_within(&mut source, Duration::from_secs(60))
                .await
                .expect("the backlog arrives"),
        };
        handed.push(message);
    }
    // In order, as produced.
    let offsets: Vec<i64> = handed.iter().map(|m| m.ack.position().offset).collect();
    let produced: Vec<i64> = positions[..100].iter().map(|(_, o)| *o).collect();
    assert_eq!(offsets, produced);
    for message in handed {
        message.ack.ack();
    }
    // The whole backlog was fetched before the first message was out, so the second batch
    // (64 at most each) still holds messages: registered, not handed out.
    let waiting = source.tracker().in_flight();
    assert!(
        waiting > 0,
        "a received batch should still hold messages after 100 of 200"
    );
    Source::stop(&mut source);
    assert!(
        source.next_ready().is_none(),
        "a stopped source hands out nothing more"
    );
    assert!(
        next_within(&mut source, Duration::from_secs(5))
            .await
            .is_none()
    );
    source.finish().await.unwrap();
    let committed = committed(&brokers, "g-batched", "batched", 1);
    assert_eq!(
        committed.get(&0),
        Some(&positions[100].1),
        "committed up to the first message not handed out ({waiting} were waiting)"
    );
}

/// A fatal client error — what Apache Kafka raises in a static member fenced by another process
/// with the same `group_instance_id` (FENCED_INSTANCE_ID) — stops the source: it hands out no
/// more messages, reports the error naming the id (so `run` exits non-zero), fails liveness, and
/// commits nothing on finish. tansu 0.6 does not fence, so the fatal error is raised through
/// librdkafka's own test hook; the client then behaves as on the real error.
#[cfg(feature = "test-hooks")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_static_member_stops_consuming_and_fails_loudly() {
    let _servers = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let kafka = match Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => {
            return support::skip(
                "a_fenced_static_member_stops_consuming_and_fails_loudly",
                &e,
            );
        }
    };
    kafka.create_topic("events", 1);
    let brokers = kafka.brokers();
    let payloads: Vec<Vec<u8>> = support::corpus_events(50)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let producer = support::producer(&brokers);
    support::produce_all(&producer, "events", 1, &payloads).await;
    let settings = KafkaSourceConfig {
        brokers: Some(brokers.clone()),
        topics: vec!["events".into()],
        group_id: "fenced".into(),
        group_instance_id: Some("pod-0".into()),
        commit_interval_ms: 3_600_000,
        ..KafkaSourceConfig::default()
    };
    let health = std::sync::Arc::new(sqlgrade::telemetry::health::Health::new());
    let mut source = KafkaSource::new(&settings, Some(health.clone())).unwrap();
    let mut read = Vec::new();
    while read.len() < 10 {
        read.push(
            next_within(&mut source, Duration::from_secs(60))
                .await
                .expect("messages arrive"),
        );
    }
    for m in read {
        m.ack.ack();
    }
    source.simulate_fencing();
    let error = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match source.next().await {
                Err(error) => return error,
                // Messages librdkafka had already fetched may still come first.
                Ok(Some(m)) => drop(m),
                Ok(None) => panic!("the source ended without reporting the fatal error"),
            }
        }
    })
    .await
    .expect("the fatal error is reported");
    let text = error.to_string();
    assert!(text.contains("fatal Kafka client error"), "{text}");
    assert!(text.contains("group_instance_id = \"pod-0\""), "{text}");
    assert!(!health.is_live(), "liveness must fail");
    let finished = source.finish().await;
    assert!(finished.is_err(), "finish must report the fatal error");
    // Nothing was committed: not by the interval (an hour), nor by finish.
    let offsets = committed(&brokers, "fenced", "events", 1);
    assert_eq!(offsets.get(&0), Some(&-1), "{offsets:?}");
}

/// Judge work selected while the broker is away is held, not an error that ends the run: the
/// hand-over retries with backoff, health says `judge_work: degraded` meanwhile, and once the
/// broker is back every record is in the topic and health is `ok` again. (Before, the first
/// failed delivery was returned and ended `sqlgrade run`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_work_waits_out_a_broker_outage() {
    let _servers = crate::one_at_a_time().await;
    use std::sync::Arc;

    use sqlgrade::sampling::{LineRate, Selection};
    use sqlgrade::second_pass::kafka_work::{HEALTH_COMPONENT, KafkaWorkSink};
    use sqlgrade::second_pass::{JudgeWork, WorkSink};
    use sqlgrade::telemetry::health::{ComponentHealth, Health};

    let dir = tempfile::tempdir().unwrap();
    let mut kafka = match Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => return support::skip("judge_work_waits_out_a_broker_outage", &e),
    };
    kafka.create_topic("judge-work", 1);
    let mut source = KafkaSourceConfig {
        brokers: Some(kafka.brokers()),
        ..KafkaSourceConfig::default()
    };
    // Give up on each attempt after 2 s (librdkafka's default is minutes), so the outage is
    // seen as failed deliveries quickly.
    source
        .kafka_properties
        .insert("message.timeout.ms".into(), "2000".into());
    let producer = sqlgrade::sources::kafka::producer(&source, "test-judge-work").unwrap();
    let health = Arc::new(Health::new());
    let sink = Arc::new(KafkaWorkSink::new(
        producer,
        "judge-work",
        Arc::new(tokio::sync::Notify::new()),
        Some(Arc::clone(&health)),
    ));
    let events = support::corpus_events(3);
    let work = |i: usize| {
        let mut event: sqlgrade::event::Event =
            sqlgrade::event::Event::decode(&events[i].1).unwrap();
        event.event_id = format!("w-{i}");
        JudgeWork::new(
            event,
            Selection {
                reasons: Vec::new(),
                uniform: true,
                inclusion_probability: Some(1.0),
            },
            LineRate {
                phi: 80.0,
                verdict: "correct".into(),
                quality_tier: sqlgrade::stef::QualityTier::Good,
                confidence_tier: sqlgrade::stef::ConfidenceTier::Moderate,
                status: "ok".into(),
                correct: Some(true),
                p_correct: Some(0.8),
            },
            "2026-11-27T00:00:00Z",
        )
    };
    sink.submit(vec![work(0)]).await.unwrap();

    kafka.stop();
    let pending = tokio::spawn({
        let sink = Arc::clone(&sink);
        let batch = vec![work(1), work(2)];
        async move { sink.submit(batch).await }
    });
    let degraded = support::eventually(Duration::from_secs(60), || {
        matches!(
            health.components().get(HEALTH_COMPONENT),
            Some(ComponentHealth::Degraded(_))
        )
    });
    assert!(degraded, "{:?}", health.components());
    assert!(
        !pending.is_finished(),
        "the hand-over gave up on a transient outage"
    );

    kafka.start_again();
    let outcome = tokio::time::timeout(Duration::from_secs(120), pending)
        .await
        .expect("the work is delivered once the broker is back")
        .unwrap();
    outcome.unwrap();
    assert_eq!(
        health.components().get(HEALTH_COMPONENT),
        Some(&ComponentHealth::Ok)
    );
    let ids: Vec<String> = read_topic(&kafka.brokers(), "judge-work", 3)
        .into_iter()
        .map(|(payload, _)| {
            serde_json::from_slice::<JudgeWork>(&payload)
                .unwrap()
                .event
                .event_id
        })
        .collect();
    for id in ["w-0", "w-1", "w-2"] {
        assert!(ids.contains(&id.to_string()), "{id} missing from {ids:?}");
    }
}
