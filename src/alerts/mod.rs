//! Score-drop detection and alert delivery (see [`engine`] for the detectors and
//! [`delivery`] for the webhook / ClickHouse / log channels). The `[alerts]` section and its
//! rules live beside them ([`config`]).

pub mod config;
pub mod delivery;
mod detector;
pub mod engine;
mod estimate;
pub mod firing;
mod mix;
pub mod notification;
pub mod stats;

pub use config::{AlertsConfig, RuleOverrides, RuleSet, SeriesLabel};
pub use delivery::{AlertHandle, AlertService};
pub use engine::AlertEngine;
pub use estimate::EstimateSource;
pub use firing::FiringSeries;
pub use notification::{AlertInput, AlertNotification, AlertState, RuleKind, render_notifications};
