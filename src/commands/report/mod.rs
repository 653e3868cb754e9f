//! `sqlgrade report --run-id ID`: a run's evaluation rows (from the JSONL output or ClickHouse)
//! summarised for the terminal and as a self-contained HTML page with inline SVG charts.
//!
//! Rows are grouped by *variant*: the agent_version, else the agent_id (benchmark runs carry the
//! system name as agent_id), else `unknown`.

pub mod html;
pub mod paired;
mod run;

use run::share;
pub use run::{
    Comparison, Disagreement, EventSql, PHI_BINS, ReportError, RunReport, TIERS, VariantStats,
    format_p, sql_from_events,
};
