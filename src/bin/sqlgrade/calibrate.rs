//! `sqlgrade calibrate`: metrics against human labels (the measurements live in
//! `sqlgrade::calibrate`; this module picks the inputs and prints).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

use crate::config_file::load_config;
use crate::output::print_calibration;

/// The arguments of `sqlgrade calibrate`.
#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Labels JSONL: `event_id` or `question_id` plus boolean `label`, or the review page's
    /// `labels.jsonl`.
    #[arg(long)]
    labels: Option<PathBuf>,
    /// A run's rows JSONL (the JSONL sink's output).
    #[arg(long)]
    rows: Option<PathBuf>,
    /// A JSONL output directory: rows from its evaluations.jsonl, labels from its
    /// labels.jsonl (what `sqlgrade serve --dir` writes).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// TOML config whose ClickHouse [sink] holds the `labels` table and the rows.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Metric name as in the `metric` column (flex, rose, hybrid_ex, stef, ex, ...);
    /// default: every metric the labelled events have.
    #[arg(long)]
    metric: Option<String>,
    /// For continuous metrics: positive iff value >= this (default: the rows' verdicts).
    #[arg(long)]
    cutoff: Option<f64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Where `calibrate` reads labels and rows.
struct CalibrateInputs {
    labels: Option<PathBuf>,
    rows: Option<PathBuf>,
    dir: Option<PathBuf>,
    config: Option<PathBuf>,
}

pub async fn execute(args: CalibrateArgs) -> Result<ExitCode> {
    let CalibrateArgs {
        labels,
        rows,
        dir,
        config,
        metric,
        cutoff,
        json,
    } = args;
    let inputs = CalibrateInputs {
        labels,
        rows,
        dir,
        config,
    };
    let metric = metric.as_deref();
    use sqlgrade::calibrate::{Label, read_labels, read_rows, reviewer_agreement};
    use sqlgrade::store::LABELS_FILE;
    // `--config`: the labels and rows of the store its `[sink]` names (JSONL or ClickHouse).
    let store = match &inputs.config {
        Some(path) => {
            let config = load_config(Some(path))?;
            let store = config.store();
            Some(
                store
                    .reader(config.server.review_max_rows)
                    .with_context(|| {
                        format!(
                            "{}'s store ({}) keeps nothing to read",
                            path.display(),
                            store.describe()
                        )
                    })?,
            )
        }
        None => None,
    };
    let labels: Vec<Label> = match (&inputs.labels, &inputs.dir, &store) {
        (Some(path), _, _) => read_labels(path)?,
        (None, Some(dir), _) => read_labels(&dir.join(LABELS_FILE))?,
        (None, None, Some(store)) => store
            .labels()
            .await?
            .iter()
            .filter_map(Label::from_review)
            .collect(),
        _ => bail!("calibrate needs --labels FILE, --dir DIR or --config FILE (its store)"),
    };
    let rows = match (&inputs.rows, &inputs.dir, &store) {
        (Some(path), _, _) => read_rows(path)?,
        (None, Some(dir), _) => read_rows(&dir.join(sqlgrade::sink::jsonl::EVALUATIONS_FILE))?,
        (None, None, Some(store)) => {
            let mut ids: Vec<String> = labels.iter().filter_map(|l| l.event_id.clone()).collect();
            ids.sort();
            ids.dedup();
            store.rows_of(&ids).await?
        }
        _ => bail!("calibrate needs --rows FILE, --dir DIR or --config FILE (its store)"),
    };
    let metrics: Vec<sqlgrade::evaluation::Metric> = match metric {
        Some(name) => vec![
            serde_json::from_value(serde_json::Value::String(name.to_string()))
                .with_context(|| format!("unknown metric {name:?}"))?,
        ],
        None => {
            let labelled: std::collections::HashSet<&str> = labels
                .iter()
                .filter_map(|l| l.event_id.as_deref())
                .collect();
            let mut found: Vec<_> = rows
                .iter()
                .filter(|r| labelled.is_empty() || labelled.contains(r.event_id.as_str()))
                .filter_map(sqlgrade::stored::StoredRow::known_metric)
                .collect();
            found.sort();
            found.dedup();
            found
        }
    };
    let config = match &inputs.config {
        Some(path) => Some(load_config(Some(path))?),
        None => None,
    };
    let reports: Vec<_> = metrics
        .iter()
        .map(|m| {
            let prices = config
                .as_ref()
                .and_then(|c| sqlgrade::calibrate::prices_for(c, *m));
            sqlgrade::calibrate::calibrate(&labels, &rows, *m, cutoff, prices)
        })
        .collect();
    let agreement = reviewer_agreement(&labels);
    print_calibration(&reports, &agreement, metric.is_some(), json)?;
    Ok(ExitCode::SUCCESS)
}
