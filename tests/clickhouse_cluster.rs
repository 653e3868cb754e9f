//! ClickHouse at scale, for real: ZooKeeper and 2 shards × 2 replicas of Debian's
//! `clickhouse-server`, laid out by `sqlgrade migrate --cluster` (ON CLUSTER, replicated local
//! tables, `Distributed` tables in front). Two daemons in one consumer group write 20,000 events
//! from the real broker through different nodes; mid-stream one daemon is SIGKILLed and one
//! replica is stopped (and later started again); the restarted daemon writes straight into the
//! shards' local tables (`[sink.cluster] write = "shards"`). Afterwards, through the `Distributed` table with
//! `FINAL`: exactly 20,000 distinct events per metric, one row each; both replicas of each shard
//! hold the same rows; the rollups agree with the detail table; the dashboard's queries and the
//! access paths run on the cluster; the durable judge cache works across nodes; `prune` drops an
//! old month from every replica, and refuses while a replica lags.

use std::time::Duration;

use sqlgrade::config::{ClickHouseConfig, ClusterConfig};
use sqlgrade::stores::clickhouse::judge_cache::JudgeCacheStore;
use sqlgrade::stores::clickhouse::queries;
use sqlgrade::stores::clickhouse::sink::shard_of;
use sqlgrade_testkit::dashboard;
use sqlgrade_testkit::servers::cluster::CLUSTER;
use sqlgrade_testkit::servers::{ClickHouse, DEAD_MEMBER_EVICTION, Harness, eventually, free_port};

const EVENTS: usize = 20_000;
const DB: &str = "sqlgrade";

fn query(node: &ClickHouse, sql: &str) -> String {
    node.try_query_in(DB, sql)
        .unwrap_or_else(|e| panic!("{sql:?} on {}: {e}", node.url()))
}

fn number(node: &ClickHouse, sql: &str) -> u64 {
    let body = query(node, sql);
    body.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql:?} returned {body:?}"))
}

fn migrate_output(h: &Harness, name: &str) -> String {
    let config = h.write_config(name, free_port());
    let out = std::process::Command::new(sqlgrade_testkit::bin::sqlgrade())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "migrate failed: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_write_through_a_replicated_sharded_cluster() {
    let t0 = std::time::Instant::now();
    // The harness runs `sqlgrade migrate` with `[sink.cluster] name` once; a second run applies
    // nothing.
    let Some(mut h) = Harness::start_cluster("clickhouse_cluster", EVENTS, 2, 2) else {
        return;
    };
    eprintln!("cluster up and migrated in {:.1?}", t0.elapsed());
    let again = migrate_output(&h, "migrate-again");
    assert!(
        again.contains(&format!("on cluster {CLUSTER}: 0 migration(s) applied")),
        "{again}"
    );
    let nodes = [(1, 1), (1, 2), (2, 1), (2, 2)];
    for (s, r) in nodes {
        let node = h.servers.node(s, r);
        let tables = query(
            node,
            "SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name",
        );
        for (table, engine) in [
            ("evaluations", "Distributed"),
            ("evaluations_local", "ReplicatedReplacingMergeTree"),
            ("evaluations_by_event_local", "ReplicatedReplacingMergeTree"),
            ("evaluations_hourly_local", "ReplicatedAggregatingMergeTree"),
            ("evaluations_scored_hourly", "Distributed"),
            ("judge_cache", "Distributed"),
            ("dead_letters_local", "ReplicatedReplacingMergeTree"),
            ("schema_migrations", "ReplicatedMergeTree"),
            ("stef_estimates_hourly", "View"),
        ] {
            assert!(
                tables.contains(&format!("{table}\t{engine}\n")),
                "node {s}/{r} lacks {table} ({engine}):\n{tables}"
            );
        }
        assert!(!tables.contains("evaluations_keyed"), "{tables}");
        assert_eq!(
            number(node, "SELECT count() FROM schema_migrations"),
            sqlgrade::stores::clickhouse::migrate::MIGRATIONS.len() as u64,
            "node {s}/{r} shares the migration history"
        );
    }

    // Two daemons, one consumer group, writing through different shards' nodes.
    h.sink_urls = vec![h.servers.node(1, 1).url(), h.servers.node(2, 1).url()];
    h.produce(6_000).await;
    let mut first = h.spawn_daemon();
    let second = h.spawn_daemon();
    assert!(
        h.wait_rows(1_500, Duration::from_secs(180)),
        "no progress:\n{}\n----\n{}",
        first.log_text(),
        second.log_text()
    );
    // Mid-stream: SIGKILL the first daemon and stop one replica of shard 2. The killed member
    // is restarted, as an orchestrator would, once its session has timed out: tansu 0.6
    // evicts a dead member when another joins after its session timeout (a restart within it
    // could leave the dead member's partitions assigned to it, and whether the test passed
    // depended on which partitions it held). Its uncommitted events are delivered again, and
    // both daemons now write through other nodes than before, so redelivered rows reach their
    // shard another way.
    first.kill9();
    h.servers.node_mut(2, 2).stop();
    h.produce_rest().await;
    // The restarted member writes straight into the shards' local tables
    // (`write = "shards"`), routing rows itself as the Distributed tables do.
    h.sink_urls = vec![h.servers.node(2, 1).url(), h.servers.node(1, 2).url()];
    let shard_urls = |s: u32| {
        format!(
            "[\"{}\", \"{}\"]",
            h.servers.node(s, 1).url(),
            h.servers.node(s, 2).url()
        )
    };
    h.extra_config.push_str(&format!(
        "write = \"shards\"\nshard_urls = [{}, {}]\n",
        shard_urls(1),
        shard_urls(2)
    ));
    tokio::time::sleep(DEAD_MEMBER_EVICTION).await;
    let restarted = h.spawn_daemon();
    assert!(
        h.wait_rows(EVENTS as u64 / 2, Duration::from_secs(300)),
        "stalled with a replica down at {} rows:\n{}\n----\n{}",
        h.stef_rows(),
        second.log_text(),
        restarted.log_text()
    );
    h.servers.node_mut(2, 2).start_again();
    assert!(
        h.wait_rows(EVENTS as u64, Duration::from_secs(400)),
        "only {} rows (partitions: committed, end = {:?}):\n{}\n----\n{}",
        h.stef_rows(),
        h.committed_offsets(),
        second.log_text(),
        restarted.log_text()
    );
    eprintln!("20,000 events stored in {:.1?}", t0.elapsed());
    // Every partition was consumed and committed to its end.
    assert!(
        h.wait_all_partitions_committed(Duration::from_secs(60)),
        "partitions not committed to their end: {:?}",
        h.committed_offsets()
    );

    // Both replicas of each shard converge (the stopped one catches up from its peer), and
    // the shards split the events.
    let mut shard_totals = 0;
    for shard in [1, 2] {
        let ids = |r: u32| {
            query(
                h.servers.node(shard, r),
                "SELECT count(), groupArray(event_id) FROM (SELECT event_id FROM evaluations_local FINAL WHERE metric = 'stef' ORDER BY event_id)",
            )
        };
        assert!(
            eventually(Duration::from_secs(180), || ids(1) == ids(2)),
            "shard {shard}: the replicas hold different events ({} vs {} rows)",
            number(
                h.servers.node(shard, 1),
                "SELECT count() FROM evaluations_local FINAL WHERE metric = 'stef'"
            ),
            number(
                h.servers.node(shard, 2),
                "SELECT count() FROM evaluations_local FINAL WHERE metric = 'stef'"
            ),
        );
        let rows = number(
            h.servers.node(shard, 1),
            "SELECT count() FROM evaluations_local FINAL WHERE metric = 'stef'",
        );
        assert!(rows > 0, "shard {shard} got no events");
        shard_totals += rows;
        // Every event sits on the shard ClickHouse's cityHash64 picks — whether the Distributed
        // table routed it or the sink did.
        let ids = query(
            h.servers.node(shard, 1),
            "SELECT DISTINCT event_id FROM evaluations_local",
        );
        let misplaced: Vec<&str> = ids
            .lines()
            .filter(|id| shard_of(id, 2) + 1 != shard as usize)
            .take(5)
            .collect();
        assert!(misplaced.is_empty(), "shard {shard} holds {misplaced:?}");
    }
    assert_eq!(
        shard_totals, EVENTS as u64,
        "an event is on exactly one shard"
    );

    // Exactly one row per (event, metric) through the Distributed table with FINAL, whichever
    // node is asked.
    let mut per_metric = String::new();
    for (s, r) in nodes {
        per_metric = query(
            h.servers.node(s, r),
            "SELECT metric, count(), uniqExact(event_id) FROM evaluations FINAL GROUP BY metric ORDER BY metric",
        );
        assert!(!per_metric.is_empty());
        for line in per_metric.lines() {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(
                cols[1..],
                [EVENTS.to_string(), EVENTS.to_string()],
                "through node {s}/{r}: {per_metric}"
            );
        }
    }
    h.assert_exactly_all_events();
    let reader = h.servers.node(2, 2);

    // The rollups (per shard, read through their Distributed tables) agree with the detail table.
    let detail = query(
        reader,
        "SELECT toStartOfHour(ts) AS hour, uniqExact(event_id) FROM evaluations FINAL WHERE metric = 'stef' GROUP BY hour ORDER BY hour",
    );
    let rollup = query(
        reader,
        "SELECT hour, uniqMerge(events) FROM evaluations_hourly WHERE metric = 'stef' GROUP BY hour ORDER BY hour",
    );
    assert_eq!(detail, rollup, "hourly rollup vs detail");
    let scored_detail = query(
        reader,
        "SELECT uniqExact(event_id), countIf(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error')) FROM evaluations FINAL WHERE metric = 'stef'",
    );
    let scored_rollup = query(
        reader,
        "SELECT uniqMerge(events), uniqIfMerge(scored) FROM evaluations_scored_hourly WHERE metric = 'stef'",
    );
    assert_eq!(scored_detail, scored_rollup, "scored rollup vs detail");

    // The dashboard's queries and the access paths run on the cluster.
    for q in dashboard::dashboard_queries() {
        let sql = dashboard::grafana_to_sql(&q);
        reader
            .try_query_in(DB, &sql)
            .unwrap_or_else(|e| panic!("dashboard query failed on the cluster: {sql}\n{e}"));
    }
    let some_id = query(
        reader,
        "SELECT any(event_id) FROM evaluations WHERE metric = 'stef'",
    );
    let some_id = some_id.trim();
    let rows = query(
        reader,
        &queries::EVENT_ROWS.replace('?', &format!("'{some_id}'")),
    );
    assert_eq!(rows.lines().count(), per_metric.lines().count(), "{rows}");

    // The durable judge cache across nodes: put through one node, read through another.
    let settings = |node: &ClickHouse| ClickHouseConfig {
        url: Some(node.url()),
        database: DB.into(),
        cluster: ClusterConfig {
            name: Some(CLUSTER.into()),
            ..ClusterConfig::default()
        },
        ..ClickHouseConfig::default()
    };
    let writer = JudgeCacheStore::new(&settings(h.servers.node(1, 1)));
    writer
        .put("cluster-key", "{\"verdict\":\"correct\"}")
        .await
        .unwrap();
    // Replication is asynchronous: the other node may ask the replica that has not fetched the
    // part yet, so the entry shows up within moments (a miss meanwhile costs one LLM call).
    let other = JudgeCacheStore::new(&settings(h.servers.node(2, 2)));
    let mut found = None;
    for _ in 0..100 {
        found = other.get("cluster-key").await.unwrap();
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(found.as_deref(), Some("{\"verdict\":\"correct\"}"));
    drop((second, restarted));

    // Retention on the cluster: rows of an old month on both shards, dropped by `prune` from
    // every shard's local tables (the newer months stay) — but not while a replica lags. Every
    // node stops fetching `evaluations_local`, so in each shard the replica the insert went to
    // holds the old month and its peer has it queued, unfetched.
    let local = format!("{DB}.evaluations_local");
    for (s, r) in nodes {
        query(
            h.servers.node(s, r),
            &format!("SYSTEM STOP FETCHES {local}"),
        );
    }
    query(
        reader,
        "INSERT INTO evaluations (event_id, ts, metric, value, status, details, rules_fired, scored_at, run_key, app_key, agent_key, version_key) \
         SELECT concat('old-', toString(number)), toDateTime('2020-01-15 00:00:00'), 'stef', 50, 'ok', '{}', [], now(), '', '', '', '' FROM numbers(200)",
    );
    let old_local =
        "SELECT count() FROM evaluations_local WHERE ts < toDateTime('2021-01-01 00:00:00')";
    let queued = "SELECT inserts_in_queue FROM system.replicas WHERE table = 'evaluations_local'";
    for shard in [1, 2] {
        let (a, b) = (h.servers.node(shard, 1), h.servers.node(shard, 2));
        assert!(
            eventually(Duration::from_secs(30), || number(a, old_local)
                + number(b, old_local)
                > 0
                && number(a, queued) + number(b, queued) > 0),
            "shard {shard}: no lagging replica"
        );
    }
    let prune = |name: &str, extra: &[&str]| {
        let config = h.write_config(name, free_port());
        let out = std::process::Command::new(sqlgrade_testkit::bin::sqlgrade())
            .args(["prune", "--older-than", "365days"])
            .args(extra)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, text, errors) = prune("prune-lagging", &["--replica-wait", "2s"]);
    assert!(!ok, "prune must fail while a replica lags: {text}{errors}");
    assert!(
        errors.contains("evaluations left untouched, a replica lags")
            && errors.contains("not fetched yet"),
        "{errors}"
    );
    assert!(!text.contains("evaluations 202001"), "{text}");
    let on_nodes = |sql: &str| -> u64 {
        nodes
            .iter()
            .map(|&(s, r)| number(h.servers.node(s, r), sql))
            .sum()
    };
    assert_eq!(on_nodes(old_local), 200, "nothing dropped while lagging");
    for (s, r) in nodes {
        query(
            h.servers.node(s, r),
            &format!("SYSTEM START FETCHES {local}"),
        );
    }
    let (ok, text, errors) = prune("prune", &[]);
    assert!(ok, "prune failed: {text}{errors}");
    assert!(text.contains("dropped  evaluations 202001"), "{text}");
    // `prune` itself waits until every replica has dropped the month.
    for (s, r) in nodes {
        assert_eq!(
            number(h.servers.node(s, r), old_local),
            0,
            "node {s}/{r} still has the old month"
        );
    }
    assert_eq!(
        number(
            reader,
            "SELECT uniqExact(event_id) FROM evaluations FINAL WHERE metric = 'stef'"
        ),
        EVENTS as u64
    );
    eprintln!("cluster test done in {:.1?}", t0.elapsed());
}
