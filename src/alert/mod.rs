//! Score-drop detection and alert delivery (see [`engine`] for the detectors and
//! [`delivery`] for the webhook / ClickHouse / log channels). The `[alerts]` rules are
//! configuration ([`crate::config::alerts`]), re-exported here as [`rules`].

pub mod delivery;
pub mod engine;
pub mod firing;
pub mod stats;

pub use crate::config::alerts as rules;

pub use delivery::{AlertHandle, AlertService};
pub use engine::{
    AlertEngine, AlertInput, AlertNotification, AlertState, RuleKind, render_notifications,
};
pub use firing::FiringSeries;
pub use rules::{AlertsConfig, RuleOverrides, RuleSet, SeriesLabel};
