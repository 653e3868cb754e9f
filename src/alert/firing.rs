//! Which series an alert currently fires on, kept up to date by the alert engine and read by
//! the judge planner (events of alerting series are a priority slice).

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use crate::evaluation::EvaluationRow;

/// Series an alert currently fires on (label sets), kept up to date by the alert engine.
#[derive(Debug, Default)]
pub struct FiringSeries {
    /// Series labels per firing alert (by fingerprint: rule, metric, series).
    firing: RwLock<HashMap<String, BTreeMap<String, String>>>,
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
    }

    /// Whether any alert fires on a series whose labels all match the row's.
    pub fn contains(&self, row: &EvaluationRow) -> bool {
        let map = self.firing.read().unwrap_or_else(|p| p.into_inner());
        map.values().any(|labels| {
            labels
                .iter()
                .all(|(k, v)| row_label(row, k).is_some_and(|x| x == v))
        })
    }

    /// Whether nothing fires.
    pub fn is_empty(&self) -> bool {
        self.firing
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
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
