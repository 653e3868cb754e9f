//! Consumer lag against a real broker (tansu): a group commits 10 messages, 40 more are
//! produced while no daemon runs, and the daemon then exports `sqlgrade.consumer.lag` = 20 per
//! partition (high watermark 25 − committed 5) to a local OTLP receiver for as long as it has
//! not committed; once everything is committed the source reports 0 (library accessor and
//! gauge alike).

use sqlgrade_testkit::otlp;
use sqlgrade_testkit::servers as support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlgrade::config::KafkaSourceConfig;
use sqlgrade::config::TelemetryConfig;
use sqlgrade::pipeline::Pipeline;
use sqlgrade::score::Scorer;
use sqlgrade::sources::Source;
use sqlgrade::sources::kafka::KafkaSource;
use sqlgrade::stores::JsonlSink;
use sqlgrade::telemetry::Telemetry;
use support::{Tansu, committed};

const TOPIC: &str = "lag-events";
const GROUP: &str = "lag-group";

fn settings(brokers: &str, commit_interval_ms: u64) -> KafkaSourceConfig {
    KafkaSourceConfig {
        brokers: Some(brokers.to_string()),
        topics: vec![TOPIC.into()],
        group_id: GROUP.into(),
        commit_interval_ms,
        kafka_properties: BTreeMap::from([("statistics.interval.ms".into(), "200".into())]),
        ..KafkaSourceConfig::default()
    }
}

fn start_telemetry(receiver: &otlp::OtlpReceiver) -> Telemetry {
    Telemetry::start(&TelemetryConfig {
        enabled: true,
        otlp_endpoint: receiver.endpoint(),
        export_interval_ms: 200,
        traces: false,
        ..TelemetryConfig::default()
    })
    .unwrap()
}

/// The exported lag per partition (`topic` must be ours).
fn exported_lag(receiver: &otlp::OtlpReceiver) -> BTreeMap<String, f64> {
    receiver
        .gauge("sqlgrade.consumer.lag")
        .into_iter()
        .map(|(attributes, value)| {
            assert!(
                attributes.contains(&format!("topic={TOPIC}")),
                "{attributes:?}"
            );
            let partition = attributes
                .iter()
                .find_map(|a| a.strip_prefix("partition="))
                .expect("partition attribute")
                .to_string();
            (partition, value)
        })
        .collect()
}

async fn wait_for_lag(receiver: &otlp::OtlpReceiver, want: &BTreeMap<String, f64>) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = exported_lag(receiver);
        if &got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "exported consumer lag {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_lag_is_exported_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let kafka = match Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => return support::skip("consumer_lag_is_exported_per_partition", &e),
    };
    kafka.create_topic(TOPIC, 2);
    let brokers = kafka.brokers();
    let producer = support::producer(&brokers);
    let payloads: Vec<Vec<u8>> = support::corpus_events(50)
        .into_iter()
        .map(|(_, p)| p)
        .collect();

    // 1. The group consumes and commits the first 10 messages (5 per partition).
    support::produce_all(&producer, TOPIC, 2, &payloads[..10]).await;
    {
        let mut source = KafkaSource::new(&settings(&brokers, 100), None).unwrap();
        for _ in 0..10 {
            let m = tokio::time::timeout(Duration::from_secs(60), source.next())
                .await
                .expect("messages arrive")
                .unwrap()
                .expect("not stopped");
            m.ack.ack();
        }
        source.finish().await.unwrap();
    }
    assert_eq!(
        committed(&brokers, GROUP, TOPIC, 2),
        BTreeMap::from([(0, 5), (1, 5)])
    );

    // 2. 40 more while no daemon runs.
    support::produce_all(&producer, TOPIC, 2, &payloads[10..]).await;

    // 3. The daemon consumes them but does not commit (hour-long commit interval): the lag it
    //    exports is high watermark 25 − committed 5 on both partitions.
    let receiver = otlp::OtlpReceiver::start().await;
    let telemetry = start_telemetry(&receiver);
    let pipeline = Pipeline::new(
        Box::new(KafkaSource::new(&settings(&brokers, 3_600_000), None).unwrap()),
        Box::new(JsonlSink::open(dir.path().join("out")).await.unwrap()),
        Arc::new(Scorer::deterministic()),
        &sqlgrade::config::PipelineConfig::default(),
        &sqlgrade::config::SinkConfig::default(),
    )
    .with_metrics(telemetry.metrics());
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(pipeline.run(shutdown));
    let want = BTreeMap::from([("0".to_string(), 20.0), ("1".to_string(), 20.0)]);
    wait_for_lag(&receiver, &want).await;
    // Let the 40 messages through before stopping (the final commit covers what was written).
    let deadline = Instant::now() + Duration::from_secs(60);
    while receiver
        .sums_and_histograms()
        .0
        .get("sqlgrade.events.scored")
        != Some(&40.0)
    {
        assert!(Instant::now() < deadline, "the 40 events were not scored");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(exported_lag(&receiver), want, "nothing committed yet");
    stop.send(true).unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.events, 40);
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        committed(&brokers, GROUP, TOPIC, 2),
        BTreeMap::from([(0, 25), (1, 25)])
    );

    // 4. Everything committed: the source reports 0 on both partitions, through its accessor
    //    and through the gauge.
    let receiver = otlp::OtlpReceiver::start().await;
    let telemetry = start_telemetry(&receiver);
    let mut source = KafkaSource::new(&settings(&brokers, 100), None).unwrap();
    source.attach_metrics(telemetry.metrics());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        // Polling serves librdkafka's statistics; there is nothing left to read.
        let next = tokio::time::timeout(Duration::from_millis(200), source.next()).await;
        assert!(
            next.is_err(),
            "unexpected message after everything was committed"
        );
        let lag: Vec<(i32, Option<i64>, i64, i64)> = source
            .consumer_lag()
            .into_iter()
            .map(|l| (l.partition, l.committed, l.high_watermark, l.lag))
            .collect();
        if lag == vec![(0, Some(25), 25, 0), (1, Some(25), 25, 0)] {
            break;
        }
        assert!(Instant::now() < deadline, "consumer lag {lag:?}");
    }
    let want = BTreeMap::from([("0".to_string(), 0.0), ("1".to_string(), 0.0)]);
    wait_for_lag(&receiver, &want).await;
    source.finish().await.unwrap();
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();
}
