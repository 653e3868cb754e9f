//! `sqlgrade report`: one run's terminal summary and HTML report, and with labels its judges'
//! agreement.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use crate::output::print_stdout;
use crate::run_rows::RowsFrom;

/// The arguments of `sqlgrade report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The run to report on.
    #[arg(long)]
    run_id: String,
    /// Evaluations JSONL (the JSONL sink's evaluations.jsonl); default: ClickHouse from
    /// --config.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Events JSONL the run was fed, to show SQL in the disagreement listing.
    #[arg(long)]
    events: Option<PathBuf>,
    /// TOML config whose ClickHouse [sink] (on its [clickhouse] server) holds the rows.
    #[arg(long)]
    config: Option<PathBuf>,
    /// HTML output file.
    #[arg(long, default_value = "report.html")]
    out: PathBuf,
    /// Human labels (the review page's `labels.jsonl`, or `event_id`/`question_id` plus
    /// boolean `label`): also print every judge identity of the run with its agreement
    /// (kappa and accuracy with 95% intervals) and the judge disagreement.
    #[arg(long)]
    labels: Option<PathBuf>,
}

pub async fn execute(args: ReportArgs) -> Result<ExitCode> {
    let ReportArgs {
        run_id,
        input,
        events,
        config,
        out,
        labels,
    } = args;
    use sqlgrade::commands::report::{RunReport, html, sql_from_events};
    let from = RowsFrom::from_args(input.as_ref(), config.as_ref(), "report")?;
    let rows = from.run(&run_id).await?;
    let sql = match &events {
        Some(path) => sql_from_events(path)?,
        None => Default::default(),
    };
    let report = RunReport::build(&run_id, &rows, &sql)?;
    print_stdout(&report.terminal_summary())?;
    std::fs::write(&out, html::render(&report))
        .with_context(|| format!("writing {}", out.display()))?;
    println!("HTML report: {}", out.display());
    if let Some(path) = labels {
        let mut ids: Vec<String> = rows.iter().map(|r| r.event_id.clone()).collect();
        ids.sort();
        ids.dedup();
        // The calibration sample is drawn as the review page of that store draws it.
        let sample = from
            .config()
            .map(|c| sqlgrade::review_page::view::CalibrationSample::from_settings(&c.server))
            .unwrap_or_default();
        let plain = sqlgrade::commands::calibrate::read_labels(&path)?;
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (human, unresolved) = sqlgrade::commands::calibrate::resolve_labels(
            &plain,
            &id_refs,
            "imported",
            &sqlgrade::score::now_rfc3339(),
        );
        let (judges, disagreement) = sqlgrade::review_page::view::judges(&rows, &human, &sample);
        let mut text = sqlgrade::review_page::view::judges_text(&judges, &disagreement);
        text.push_str(&sqlgrade::review_page::view::line_rate_text(
            &sqlgrade::review_page::view::line_rate_estimates(&rows, &human, &sample),
        ));
        if unresolved > 0 {
            text.push_str(&format!(
                "  {unresolved} labels name no event of run {run_id} and are left out\n"
            ));
        }
        print_stdout(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}
