//! Alert engine throughput: observations per second through [`AlertEngine::observe`] with the
//! default rules (200/1000 windows, Mann–Whitney every 10 observations; score_drop on stef and
//! ex, poor_share, judge_fallback, dead_letters), 16 series. Run with
//! `cargo bench --bench alert_engine`; numbers in `benches/README.md` ("## alert engine").

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqlgrade::alerts::{AlertEngine, AlertInput, AlertsConfig};
use sqlgrade::evaluation::{EvaluationRow, Metric};
use sqlgrade::event::Event;

fn inputs() -> Vec<AlertInput> {
    let event =
        Event::decode(br#"{"question":"q","sql":"SELECT 1","app_id":"app"}"#).expect("valid event");
    (0..20_000u32)
        .map(|i| {
            let mut stef = EvaluationRow::for_event(&event, "2026-11-21T00:00:00Z", Metric::Stef);
            stef.agent_version = Some(format!("v{}", i % 16).into());
            stef.value = f64::from((i * 37) % 101);
            let mut ex = stef.clone();
            ex.metric = Metric::Ex;
            ex.value = f64::from(i % 3 == 0);
            AlertInput::Rows(vec![stef, ex])
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let inputs = inputs();
    let config = AlertsConfig {
        enabled: true,
        ..AlertsConfig::default()
    };
    let now = chrono::Utc::now();
    let mut group = c.benchmark_group("alert_engine");
    group.throughput(Throughput::Elements(inputs.len() as u64));
    group.sample_size(10);
    group.bench_function("observe_20k_events_16_series", |b| {
        b.iter(|| {
            let mut engine = AlertEngine::new(config.clone());
            let mut notes = 0;
            for input in &inputs {
                notes += engine.observe(input, now).len();
            }
            notes
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
