//! Consumer lag from librdkafka's statistics: per assigned partition, the high watermark minus
//! the committed offset (messages not yet durably processed by the group).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::lock;
use crate::telemetry::PipelineMetrics;

/// Consumer lag of one assigned partition, from librdkafka's latest statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionLag {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset the next produced message will get (end of the log).
    pub high_watermark: i64,
    /// The group's committed offset (next offset to read); `None` when nothing was committed
    /// yet, in which case the lag counts from the log start (`auto.offset.reset = earliest`).
    pub committed: Option<i64>,
    /// Messages not yet durably processed by the group.
    pub lag: i64,
}

/// The parts of librdkafka's statistics JSON the lag needs (the full document is much larger
/// and varies between librdkafka versions).
#[derive(Debug, Default, Deserialize)]
struct LagStatistics {
    #[serde(default)]
    topics: BTreeMap<String, TopicStatistics>,
}

#[derive(Debug, Default, Deserialize)]
struct TopicStatistics {
    #[serde(default)]
    partitions: BTreeMap<String, PartitionStatistics>,
}

#[derive(Debug, Default, Deserialize)]
struct PartitionStatistics {
    #[serde(default = "invalid_offset")]
    hi_offset: i64,
    #[serde(default = "invalid_offset")]
    lo_offset: i64,
    #[serde(default = "invalid_offset")]
    committed_offset: i64,
}

fn invalid_offset() -> i64 {
    -1
}

impl PartitionStatistics {
    /// The lag, when the statistics tell it: high watermark − committed offset, or − log start
    /// when the group has committed nothing for the partition.
    fn lag(&self, topic: &str, partition: i32) -> Option<PartitionLag> {
        if self.hi_offset < 0 {
            return None;
        }
        let (committed, from) = if self.committed_offset >= 0 {
            (Some(self.committed_offset), self.committed_offset)
        } else if self.lo_offset >= 0 {
            (None, self.lo_offset)
        } else {
            return None;
        };
        Some(PartitionLag {
            topic: topic.to_string(),
            partition,
            high_watermark: self.hi_offset,
            committed,
            lag: (self.hi_offset - from).max(0),
        })
    }
}

/// Consumer lag per assigned partition, shared by the librdkafka callbacks and the source.
#[derive(Debug, Default)]
pub(super) struct LagTable {
    assigned: Mutex<BTreeSet<(String, i32)>>,
    lags: Mutex<BTreeMap<(String, i32), PartitionLag>>,
    pub(super) metrics: Mutex<Option<PipelineMetrics>>,
}

impl LagTable {
    pub(super) fn assign(&self, partitions: &[(String, i32)]) {
        lock(&self.assigned).extend(partitions.iter().cloned());
    }

    pub(super) fn revoke(&self, partitions: &[(String, i32)]) {
        let mut assigned = lock(&self.assigned);
        let mut lags = lock(&self.lags);
        for p in partitions {
            assigned.remove(p);
            lags.remove(p);
        }
    }

    /// Take in one statistics document (ignored when it cannot be read).
    pub(super) fn update(&self, json: &[u8]) {
        let statistics: LagStatistics = match serde_json::from_slice(json) {
            Ok(s) => s,
            Err(error) => {
                tracing::debug!(%error, "unreadable librdkafka statistics");
                return;
            }
        };
        let assigned = lock(&self.assigned).clone();
        let mut fresh = Vec::new();
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                let Ok(partition) = partition.parse::<i32>() else {
                    continue;
                };
                if !assigned.contains(&(topic.clone(), partition)) {
                    continue;
                }
                if let Some(lag) = p.lag(topic, partition) {
                    fresh.push(lag);
                }
            }
        }
        let metrics = lock(&self.metrics).clone();
        let mut lags = lock(&self.lags);
        for lag in fresh {
            if let Some(metrics) = &metrics {
                metrics.consumer_lag(&lag.topic, lag.partition, lag.lag);
            }
            tracing::trace!(topic = %lag.topic, partition = lag.partition, lag = lag.lag, "consumer lag");
            lags.insert((lag.topic.clone(), lag.partition), lag);
        }
    }

    pub(super) fn snapshot(&self) -> Vec<PartitionLag> {
        lock(&self.lags).values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_comes_from_statistics_of_assigned_partitions_only() {
        // Trimmed from a real librdkafka statistics document (unknown fields are ignored;
        // partition -1 is librdkafka's internal "unassigned" partition).
        let stats = br#"{"name":"sqlgrade#consumer-1","type":"consumer","topics":{
            "events":{"topic":"events","partitions":{
                "0":{"partition":0,"hi_offset":25,"lo_offset":0,"committed_offset":5,"consumer_lag":20},
                "1":{"partition":1,"hi_offset":30,"lo_offset":10,"committed_offset":-1001},
                "2":{"partition":2,"hi_offset":-1,"lo_offset":-1,"committed_offset":-1001},
                "3":{"partition":3,"hi_offset":9,"lo_offset":0,"committed_offset":4},
                "-1":{"partition":-1,"hi_offset":-1001,"committed_offset":-1001}}}}}"#;
        let table = LagTable::default();
        table.assign(&[
            ("events".into(), 0),
            ("events".into(), 1),
            ("events".into(), 2),
        ]);
        table.update(stats);
        let lag: Vec<_> = table
            .snapshot()
            .into_iter()
            .map(|l| (l.partition, l.committed, l.lag))
            .collect();
        // 0: 25 − 5; 1: nothing committed, 30 − log start 10; 2: no watermark yet; 3: not ours.
        assert_eq!(lag, vec![(0, Some(5), 20), (1, None, 20)]);
        table.revoke(&[("events".into(), 0)]);
        assert_eq!(table.snapshot().len(), 1);
        table.update(b"not json");
        assert_eq!(table.snapshot().len(), 1);
    }
}
