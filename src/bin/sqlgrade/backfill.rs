//! `sqlgrade backfill`: a batch (events JSONL, or a BIRD/Spider run) through the daemon's
//! pipeline with a progress bar, its summary and alerts, and optionally its agreement with
//! labels.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::ValueEnum;

use sqlgrade::commands::backfill::{BackfillFormat, BackfillPlan, BackfillRequest, PlanMode};
use sqlgrade::pipeline::ProgressFn;

use crate::config_file::load_config;
use crate::output::{print_alerts, print_calibration, print_summary};
use crate::signals::shutdown_signal;

/// The arguments of `sqlgrade backfill`.
#[derive(Debug, clap::Args)]
pub struct BackfillArgs {
    /// Events JSONL, or the dataset's dev.jsonl for bird/spider.
    #[arg(long)]
    input: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value_t = FormatArg::Events)]
    format: FormatArg,
    /// Predictions JSONL (question_id, predicted_sql); required for bird/spider.
    #[arg(long)]
    predictions: Option<PathBuf>,
    /// Run id for every row (default for bird/spider: the predictions file's stem).
    #[arg(long)]
    run_id: Option<String>,
    /// TOML config file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// With an LLM judge: judge every event (`all`, the default for a benchmark run) or
    /// apply the live sampling policy of `[judge.budget]` (`sample`).
    #[arg(long, value_enum, default_value_t = JudgeArg::All)]
    judge: JudgeArg,
    /// After the run, measure its metrics against these labels (as `calibrate --labels`):
    /// per metric, Cohen's kappa and accuracy with 95% intervals, and the judge's tokens and
    /// cost per 1,000 events. Labels JSONL: `event_id` or `question_id` plus boolean `label`,
    /// or the review page's `labels.jsonl`. Needs the JSONL sink and a run id.
    #[arg(long)]
    labels: Option<PathBuf>,
}

/// `backfill --judge` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JudgeArg {
    /// Judge every event (the batch waits for the judge, `judge.max_concurrency` in flight).
    All,
    /// The live policy: uniform slice plus priority slices within `[judge.budget]`.
    Sample,
}

/// `backfill --format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// JSONL events in the input contract.
    Events,
    /// BIRD dev.jsonl joined with --predictions.
    Bird,
    /// Spider dev.jsonl joined with --predictions.
    Spider,
}

impl From<FormatArg> for BackfillFormat {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Events => BackfillFormat::Events,
            FormatArg::Bird => BackfillFormat::Bird,
            FormatArg::Spider => BackfillFormat::Spider,
        }
    }
}

/// A progress bar on a terminal; a hidden one otherwise (logs and pipes get no bar).
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} events ({per_sec}, eta {eta})",
        ) {
            bar.set_style(style);
        }
        bar
    } else {
        indicatif::ProgressBar::hidden()
    }
}

pub async fn execute(args: BackfillArgs) -> Result<ExitCode> {
    let BackfillArgs {
        input,
        format,
        predictions,
        run_id,
        config: config_path,
        judge,
        labels: labels_path,
    } = args;
    let request = BackfillRequest {
        input,
        format: format.into(),
        predictions,
        run_id,
        judge: match judge {
            JudgeArg::All => PlanMode::Census,
            JudgeArg::Sample => PlanMode::Sample,
        },
    };
    let mut config = load_config(config_path.as_ref())?;
    // A batch is scored under one version of the rule profiles (no hot reload mid-run).
    config.rules.reload_interval_ms = 0;
    sqlgrade::commands::backfill::apply_benchmark_gold_defaults(&request, &mut config);
    let plan = BackfillPlan::prepare(&request, &config)?;
    // Checked before the run: a measurement that cannot be made should not cost a backfill.
    let labels = match &labels_path {
        Some(path) => {
            if config
                .store()
                .reader(config.server.review_max_rows)
                .is_none()
            {
                bail!(
                    "--labels reads the run's rows back from its store; this config's store is {}, \
                     which keeps nothing to read (use a JSONL or ClickHouse [sink])",
                    config.store().describe()
                );
            }
            let Some(run_id) = plan.run_id() else {
                bail!("--labels needs a run id: pass --run-id (bird/spider backfills have one)");
            };
            Some((
                sqlgrade::commands::calibrate::read_labels(path)?,
                run_id.to_string(),
            ))
        }
        None => None,
    };
    let bar = progress_bar(plan.total());
    let progress: ProgressFn = {
        let bar = bar.clone();
        Arc::new(move |n| bar.inc(n))
    };
    let title = match plan.run_id() {
        Some(run_id) => format!(
            "sqlgrade backfill summary ({}, run_id {run_id})",
            request.format.as_str()
        ),
        None => format!("sqlgrade backfill summary ({})", request.format.as_str()),
    };
    let result = plan
        .run_with_alerts(&config, shutdown_signal(None), Some(progress))
        .await;
    bar.finish_and_clear();
    let report = result?;
    print_summary(&config, &report.summary, &title);
    print_alerts(&config, &report.alerts);
    if let Some((labels, run_id)) = labels {
        let Some(store) = config.store().reader(config.server.review_max_rows) else {
            bail!("the store keeps no rows to read back");
        };
        let rows = store.rows_of_run(&run_id).await?;
        let mut metrics: Vec<_> = rows
            .iter()
            .filter_map(sqlgrade::stores::StoredRow::known_metric)
            .collect();
        metrics.sort();
        metrics.dedup();
        println!();
        println!(
            "Agreement with {} labels ({}), run {run_id}:",
            labels.len(),
            labels_path
                .as_deref()
                .unwrap_or(std::path::Path::new("-"))
                .display()
        );
        let reports: Vec<_> = metrics
            .iter()
            .map(|m| {
                let prices = sqlgrade::commands::calibrate::prices_for(&config, *m);
                sqlgrade::commands::calibrate::calibrate(&labels, &rows, *m, None, prices)
            })
            .collect();
        print_calibration(&reports, &[], false, false)?;
    }
    Ok(ExitCode::SUCCESS)
}
