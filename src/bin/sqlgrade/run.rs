//! `sqlgrade run`: the daemon (`sqlgrade::assembly::Daemon`) until EOF or a signal, then its
//! summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};

use sqlgrade::config::SourceKind;

use crate::config_file::load_config;
use crate::output::print_summary;
use crate::signals::{EXIT_SHUTDOWN_INCOMPLETE, shutdown_signal};

/// The arguments of `sqlgrade run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// TOML config file (env SQLGRADE__SECTION__KEY overrides it).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Keep tailing the source file after EOF (overrides source.follow).
    #[arg(long)]
    follow: bool,
}

pub async fn execute(args: RunArgs) -> Result<ExitCode> {
    let mut config = load_config(args.config.as_ref())?;
    if let SourceKind::File(file) = &mut config.source.kind {
        if args.follow {
            file.follow = true;
        }
        if !file.path.exists() {
            bail!(
                "source file {} does not exist (run from the repository root for the default \
                 examples/events.jsonl, or set [source] path / SQLGRADE__SOURCE__PATH)",
                file.path.display()
            );
        }
    }
    let daemon = sqlgrade::assembly::Daemon::build(&config).await?;
    let limit = Duration::from_millis(config.pipeline.shutdown_timeout_ms.max(1));
    let summary = match daemon.run(shutdown_signal(Some(limit))).await {
        Ok(summary) => summary,
        Err(error @ sqlgrade::pipeline::PipelineError::ShutdownTimeout { .. }) => {
            tracing::error!("{error}");
            eprintln!("sqlgrade: error: {error}");
            return Ok(ExitCode::from(EXIT_SHUTDOWN_INCOMPLETE));
        }
        Err(error) => return Err(error.into()),
    };
    print_summary(&config, &summary, "sqlgrade run summary");
    Ok(ExitCode::SUCCESS)
}
