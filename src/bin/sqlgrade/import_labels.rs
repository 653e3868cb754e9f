//! `sqlgrade import-labels`: human labels into the review store, validated as the page does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};

use crate::config_file::load_config;

/// The arguments of `sqlgrade import-labels`.
#[derive(Debug, clap::Args)]
pub struct ImportLabelsArgs {
    /// Labels JSONL.
    #[arg(long)]
    labels: PathBuf,
    /// A JSONL output directory (the store of `sqlgrade serve --dir`).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// TOML config whose [sink] is the store (JSONL directory or ClickHouse).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Reviewer name for labels that carry none.
    #[arg(long, default_value = "imported")]
    reviewer: String,
}

/// `sqlgrade import-labels`: validate each label and add it to the store.
pub async fn execute(args: ImportLabelsArgs) -> Result<ExitCode> {
    let ImportLabelsArgs {
        labels: path,
        dir,
        config,
        reviewer,
    } = args;
    let store: Arc<dyn sqlgrade::stores::ReviewStore> = match (&dir, &config) {
        (Some(dir), _) => sqlgrade::stores::Store::jsonl_dir(dir)
            .reader(usize::MAX)
            .context("a JSONL directory is readable")?,
        (None, Some(_)) => {
            let config = load_config(config.as_ref())?;
            config.store()
                .reader(config.server.review_max_rows)
                .context("the stdout sink stores nothing; pass --dir or a config with a JSONL or ClickHouse [sink]")?
        }
        (None, None) => bail!("import-labels needs --dir DIR or --config FILE"),
    };
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let review_format = text.lines().filter(|l| !l.trim().is_empty()).any(|l| {
        serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v.get("verdict").is_some())
    });
    let (labels, unresolved) = if review_format {
        (sqlgrade::stores::labels_from_jsonl(&path)?, 0)
    } else {
        let plain = sqlgrade::commands::calibrate::read_labels(&path)?;
        let needs_rows = plain.iter().any(|l| l.event_id.is_none());
        let rows = if needs_rows {
            store.rows().await?
        } else {
            Arc::new(Vec::new())
        };
        let mut ids: Vec<&str> = rows.iter().map(|r| r.event_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        sqlgrade::commands::calibrate::resolve_labels(
            &plain,
            &ids,
            &reviewer,
            &sqlgrade::score::now_rfc3339(),
        )
    };
    let (mut imported, mut refused) = (0usize, 0usize);
    for label in labels {
        match sqlgrade::review::HumanLabel::validated(
            &label.event_id,
            &label.reviewer,
            label.verdict.as_str(),
            label.category.as_deref().unwrap_or(""),
            label.note.as_deref().unwrap_or(""),
            label.labelled_at.clone(),
        ) {
            Ok(valid) => {
                store.add_label(&valid).await?;
                imported += 1;
            }
            Err(error) => {
                refused += 1;
                eprintln!("sqlgrade: label on {:?} refused: {error}", label.event_id);
            }
        }
    }
    println!(
        "imported {imported} labels into {}; {unresolved} named no stored event, {refused} refused",
        store.describe()
    );
    Ok(if refused > 0 || unresolved > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
