//! Score-drop detection and alert delivery (see [`engine`] for the detectors and
//! [`delivery`] for the webhook / ClickHouse / log channels).

pub mod delivery;
pub mod engine;
pub mod rules;
pub mod stats;

pub use delivery::{AlertHandle, AlertService};
pub use engine::{
    AlertEngine, AlertInput, AlertNotification, AlertState, RuleKind, render_notifications,
};
pub use rules::{AlertsConfig, RuleOverrides, RuleSet, SeriesLabel};
