//! Which series an alert currently fires on, kept up to date by the alert engine and read by
//! the judge planner (events of alerting series are a priority slice).
//!
//! The planner asks for every event, from every scoring thread, and almost always nothing
//! fires: [`FiringSeries::is_empty`] reads a count that only the engine writes (no lock, whose
//! count every reader would write), and the lock is taken only while something fires.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::evaluation::EvaluationRow;

/// Series an alert currently fires on (label sets), kept up to date by the alert engine.
#[derive(Debug, Default)]
pub struct FiringSeries {
    /// Series labels per firing alert (by fingerprint: rule, metric, series).
    firing: RwLock<HashMap<String, BTreeMap<String, String>>>,
    /// How many alerts fire (the map's length, written under its write lock).
    count: AtomicUsize,
}

impl FiringSeries {
    /// Alert `fingerprint` on series `labels` fired (`true`) or resolved (`false`).
    pub fn set(&self, fingerprint: &str, labels: &BTreeMap<String, String>, firing: bool) {
        let mut map = self.firing.write().unwrap_or_else(|p| p.into_inner());
        if firing {
            map.insert(fingerprint.to_string(), labels.clone());
        } else {
            map.remove(fingerprint);
        }
        self.count.store(map.len(), Ordering::Release);
    }

    /// Whether any alert fires on a series whose labels all match the row's (without a lock
    /// while nothing fires).
    pub fn contains(&self, row: &EvaluationRow) -> bool {
        if self.is_empty() {
            return false;
        }
        let map = self.firing.read().unwrap_or_else(|p| p.into_inner());
        map.values().any(|labels| {
            labels
                .iter()
                .all(|(k, v)| row_label(row, k).is_some_and(|x| x == v))
        })
    }

    /// Whether nothing fires.
    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }
}

fn row_label<'r>(row: &'r EvaluationRow, label: &str) -> Option<&'r str> {
    match label {
        "app_id" => row.app_id.as_deref(),
        "agent_id" => row.agent_id.as_deref(),
        "agent_version" => row.agent_version.as_deref(),
        "model" => row.model.as_deref(),
        "run_id" => row.run_id.as_deref(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::Metric;
    use crate::event::Event;

    fn row(app: &str, version: &str) -> EvaluationRow {
        let json = format!(
            r#"{{"question":"q","sql":"SELECT 1","app_id":"{app}","agent_version":"{version}"}}"#
        );
        let event = Event::decode(json.as_bytes()).unwrap();
        EvaluationRow::for_event(&event, "2026-01-01T00:00:00Z", Metric::Stef)
    }

    #[test]
    fn what_fires_is_seen_until_it_resolves() {
        let firing = FiringSeries::default();
        assert!(firing.is_empty());
        assert!(!firing.contains(&row("a", "v1")));
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        firing.set("drop:a", &labels(&[("app_id", "a")]), true);
        firing.set(
            "drop:b/v2",
            &labels(&[("app_id", "b"), ("agent_version", "v2")]),
            true,
        );
        assert!(!firing.is_empty());
        assert!(firing.contains(&row("a", "v1")));
        assert!(firing.contains(&row("b", "v2")));
        assert!(!firing.contains(&row("b", "v1")), "every label must match");
        firing.set("drop:a", &labels(&[("app_id", "a")]), false);
        assert!(!firing.contains(&row("a", "v1")));
        assert!(!firing.is_empty());
        // Resolving twice, or what never fired, changes nothing.
        firing.set("drop:a", &labels(&[("app_id", "a")]), false);
        firing.set("drop:b/v2", &BTreeMap::new(), false);
        assert!(firing.is_empty());
        assert!(!firing.contains(&row("b", "v2")));
    }
}
