//! `sqlgrade audit`: suspect gold queries of a benchmark, from several systems' runs over the
//! same items (the evidence and its weights live in `sqlgrade::commands::audit`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use crate::output::print_stdout;
use crate::run_rows::RowsFrom;

/// The arguments of `sqlgrade audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// A run to compare (give at least two; benchmark backfills: the predictions file's stem).
    #[arg(long = "run-id", required = true)]
    run_ids: Vec<String>,
    /// Evaluations JSONL (the JSONL sink's evaluations.jsonl); default: ClickHouse from
    /// --config.
    #[arg(long)]
    input: Option<PathBuf>,
    /// TOML config whose ClickHouse [sink] (on its [clickhouse] server) holds the rows.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The benchmark's dev.jsonl (or the events JSONL), to show questions and gold SQL.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// A predictions file (question_id, predicted_sql) or events JSONL of one run, to show
    /// its SQL: `RUN_ID=FILE`, or FILE whose stem is the run id. Repeatable.
    #[arg(long = "predictions")]
    predictions: Vec<String>,
    /// Items shown in the terminal table.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Write every item with evidence as JSONL (for dataset maintainers).
    #[arg(long)]
    jsonl: Option<PathBuf>,
    /// HTML output file.
    #[arg(long, default_value = "audit.html")]
    out: PathBuf,
}

pub async fn execute(request: AuditArgs) -> Result<ExitCode> {
    use sqlgrade::commands::audit::{GoldAudit, html, predictions_from_file, texts_from_file};
    use std::collections::{BTreeMap, HashMap};
    let mut run_ids = request.run_ids.clone();
    run_ids.sort();
    run_ids.dedup();
    if run_ids.len() < 2 {
        anyhow::bail!("audit compares systems: give at least two distinct --run-id");
    }
    let from = RowsFrom::from_args(request.input.as_ref(), request.config.as_ref(), "audit")?;
    let mut rows = BTreeMap::new();
    for run_id in &run_ids {
        let run_rows = from.run(run_id).await?;
        if run_rows.is_empty() {
            anyhow::bail!("no evaluation rows with run_id {run_id:?}");
        }
        rows.insert(run_id.clone(), run_rows);
    }
    let texts = match &request.dataset {
        Some(path) => texts_from_file(path)?,
        None => HashMap::new(),
    };
    let mut predictions = HashMap::new();
    for spec in &request.predictions {
        let (run, path) = match spec.split_once('=') {
            Some((run, path)) if run_ids.iter().any(|r| r == run) => {
                (run.to_string(), PathBuf::from(path))
            }
            _ => {
                let path = PathBuf::from(spec);
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (stem, path)
            }
        };
        if !run_ids.contains(&run) {
            anyhow::bail!(
                "--predictions {spec}: run {run:?} is not one of the --run-id values (use RUN_ID=FILE)"
            );
        }
        for (item, sql) in predictions_from_file(&path)? {
            predictions.insert((run.clone(), item), sql);
        }
    }
    let audit = GoldAudit::build(&rows, &texts, &predictions);
    print_stdout(&audit.terminal_summary(request.top))?;
    if let Some(path) = &request.jsonl {
        std::fs::write(path, audit.to_jsonl())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("JSONL: {}", path.display());
    }
    std::fs::write(&request.out, html::render(&audit))
        .with_context(|| format!("writing {}", request.out.display()))?;
    println!("HTML: {}", request.out.display());
    Ok(ExitCode::SUCCESS)
}
