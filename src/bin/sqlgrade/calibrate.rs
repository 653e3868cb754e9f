//! `sqlgrade calibrate`: metrics against human labels (the measurements live in
//! `sqlgrade::commands::calibrate`; this module picks the inputs and prints).

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
    /// Refit the correctness model (the line-rate `p_correct` and verdict) on these labels and
    /// compare it, on the same cross-validated folds, with the model in use (`[stef] model` of
    /// --config, else the shipped one).
    #[arg(long)]
    fit: bool,
    /// With --fit: write the refit to this file, only if it has enough labels of each kind and
    /// beats the current model on the held-out folds; then set `[stef] model` to it.
    #[arg(long, requires = "fit")]
    write: Option<PathBuf>,
    /// With --fit: the share of correct queries the verdict's threshold may flag, at most.
    #[arg(long, default_value_t = 0.10, requires = "fit")]
    flag_rate: f64,
    /// With --fit: cross-validation folds (by a hash of the event id).
    #[arg(long, default_value_t = 5, requires = "fit")]
    folds: usize,
    /// With --fit: labels of each kind (correct, wrong) needed to write a model.
    #[arg(long, default_value_t = 100, requires = "fit")]
    min_per_class: usize,
    /// With --fit: the L2 penalty of the logistic regression (on the distance from the model
    /// in use, or from zero with --from-zero).
    #[arg(long, default_value_t = sqlgrade::sampling::verdict_fit::DEFAULT_L2, requires = "fit")]
    l2: f64,
    /// With --fit: fit from nothing (the penalty pulls the weights toward zero) instead of
    /// anchoring the refit on the model in use; for many thousands of labels of one's own.
    #[arg(long, requires = "fit")]
    from_zero: bool,
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
        fit,
        write,
        flag_rate,
        folds,
        min_per_class,
        l2,
        from_zero,
    } = args;
    if !(flag_rate.is_finite() && (0.0..1.0).contains(&flag_rate)) {
        bail!("--flag-rate must be a share in [0, 1), not {flag_rate}");
    }
    if !(l2.is_finite() && l2 > 0.0) {
        bail!("--l2 must be positive, not {l2}");
    }
    let fit_options = fit.then_some(sqlgrade::commands::calibrate::fit::FitOptions {
        target_flag_rate: flag_rate,
        l2,
        folds: folds.max(2),
        min_per_class,
        anchored: !from_zero,
    });
    let inputs = CalibrateInputs {
        labels,
        rows,
        dir,
        config,
    };
    let metric = metric.as_deref();
    use sqlgrade::commands::calibrate::reviewer_agreement;
    use sqlgrade::stores::LABELS_FILE;
    let (labels, rows) = read_labels_and_rows(&inputs).await?;
    if let Some(options) = fit_options {
        let source = match (&inputs.labels, &inputs.dir) {
            (Some(path), _) => label_source(path)?,
            (None, Some(dir)) => label_source(&dir.join(LABELS_FILE))?,
            (None, None) => sqlgrade::stef::correctness::LabelSource {
                name: "the store of --config".to_string(),
                sha256: String::new(),
                bytes: 0,
                items: 0,
                correct: 0,
            },
        };
        return fit_model(&labels, &rows, &inputs, source, &options, write, json);
    }
    let metrics = metrics_to_calibrate(metric, &labels, &rows)?;
    let config = match &inputs.config {
        Some(path) => Some(load_config(Some(path))?),
        None => None,
    };
    let reports: Vec<_> = metrics
        .iter()
        .map(|m| {
            let prices = config
                .as_ref()
                .and_then(|c| sqlgrade::commands::calibrate::prices_for(c, *m));
            sqlgrade::commands::calibrate::calibrate(&labels, &rows, *m, cutoff, prices)
        })
        .collect();
    let agreement = reviewer_agreement(&labels);
    print_calibration(&reports, &agreement, metric.is_some(), json)?;
    Ok(ExitCode::SUCCESS)
}

/// The labels and rows `calibrate` reads: files, a JSONL directory, or the store `--config`'s
/// `[sink]` names (its rows of the labelled events only).
async fn read_labels_and_rows(
    inputs: &CalibrateInputs,
) -> Result<(
    Vec<sqlgrade::commands::calibrate::Label>,
    Vec<sqlgrade::stores::StoredRow>,
)> {
    use sqlgrade::commands::calibrate::{Label, read_labels, read_rows};
    use sqlgrade::stores::LABELS_FILE;
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
        (None, Some(dir), _) => {
            read_rows(&dir.join(sqlgrade::stores::jsonl::writer::EVALUATIONS_FILE))?
        }
        (None, None, Some(store)) => {
            let mut ids: Vec<String> = labels.iter().filter_map(|l| l.event_id.clone()).collect();
            ids.sort();
            ids.dedup();
            store.rows_of(&ids).await?
        }
        _ => bail!("calibrate needs --rows FILE, --dir DIR or --config FILE (its store)"),
    };
    Ok((labels, rows))
}

/// The metrics to calibrate: `--metric`, else every known metric of the labelled events' rows.
fn metrics_to_calibrate(
    metric: Option<&str>,
    labels: &[sqlgrade::commands::calibrate::Label],
    rows: &[sqlgrade::stores::StoredRow],
) -> Result<Vec<sqlgrade::evaluation::Metric>> {
    Ok(match metric {
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
                .filter_map(sqlgrade::stores::StoredRow::known_metric)
                .collect();
            found.sort();
            found.dedup();
            found
        }
    })
}

/// A labels file as a label source of the model file: its name, SHA-256 and size.
fn label_source(path: &std::path::Path) -> Result<sqlgrade::stef::correctness::LabelSource> {
    use sha2::Digest as _;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(sqlgrade::stef::correctness::LabelSource {
        name: path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        bytes: bytes.len() as u64,
        items: 0,
        correct: 0,
    })
}

/// `calibrate --fit`: refit, compare, and write when asked and better.
fn fit_model(
    labels: &[sqlgrade::commands::calibrate::Label],
    rows: &[sqlgrade::stores::StoredRow],
    inputs: &CalibrateInputs,
    source: sqlgrade::stef::correctness::LabelSource,
    options: &sqlgrade::commands::calibrate::fit::FitOptions,
    write: Option<PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    use sqlgrade::commands::calibrate::fit::{FitDecision, fit_and_compare, labelled_features};
    let current = match &inputs.config {
        Some(path) => load_config(Some(path))?.stef.verdict_model()?,
        None => std::sync::Arc::new(sqlgrade::stef::correctness::VerdictModel::shipped().clone()),
    };
    let (items, skipped) = labelled_features(labels, rows);
    let report = fit_and_compare(&items, skipped, &current, options, source);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    let Some(path) = write else {
        return Ok(ExitCode::SUCCESS);
    };
    match (&report.decision, &report.model) {
        (FitDecision::Better, Some(model)) => {
            let text = serde_json::to_string_pretty(model)? + "\n";
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            let version = sqlgrade::stef::correctness::VerdictModel::from_file(model.clone())
                .map(|m| m.version().to_string())
                .unwrap_or_default();
            eprintln!(
                "wrote {} (model {version}); use it with [stef] model = \"{}\"",
                path.display(),
                path.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            eprintln!("not written: {}", path.display());
            Ok(ExitCode::FAILURE)
        }
    }
}
