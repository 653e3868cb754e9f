//! Printing where output belongs: tables to stdout (a closed pipe is not an error), summaries
//! and alerts away from the rows when rows go to stdout, calibration reports.

use std::io::Write as _;

use anyhow::{Context as _, Result};

use sqlgrade::config::Config;
use sqlgrade::telemetry::summary::Summary;

/// Print a table to stdout; a closed pipe (`sqlgrade audit | head`) is not an error.
pub fn print_stdout(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// Print a summary where it does not mix with rows: stderr when rows go to stdout.
pub fn print_summary(config: &Config, summary: &Summary, title: &str) {
    let text = summary.render(title);
    // A closed pipe (`sqlgrade run | head`) must not turn a finished run into a panic.
    if config.store().writes_to_stdout() {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// The alert state changes of a batch run, after its summary (same stream).
pub fn print_alerts(config: &Config, alerts: &[sqlgrade::alerts::AlertNotification]) {
    let text = sqlgrade::alerts::render_notifications(alerts);
    if config.store().writes_to_stdout() {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// Print calibration reports (text, or JSON: one report alone when one metric was asked for
/// and there is no reviewer agreement).
pub fn print_calibration(
    reports: &[sqlgrade::commands::calibrate::CalibrationReport],
    agreement: &[sqlgrade::commands::calibrate::ReviewerAgreement],
    one_metric: bool,
    json: bool,
) -> Result<()> {
    if json {
        let out = if one_metric && agreement.is_empty() && reports.len() == 1 {
            serde_json::to_value(&reports[0])?
        } else {
            serde_json::json!({ "metrics": reports, "reviewer_agreement": agreement })
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (i, report) in reports.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{report}");
        }
        if !agreement.is_empty() {
            println!();
            println!("agreement between reviewers (events both labelled):");
            let num = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.4}"));
            for a in agreement {
                println!(
                    "  {} ~ {}: {} shared, agreement {}, kappa {}",
                    a.a,
                    a.b,
                    a.shared,
                    num(a.agreement),
                    num(a.kappa)
                );
            }
        }
    }
    Ok(())
}
