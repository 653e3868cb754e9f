//! `sqlgrade score`: one event on stdin, its rows (or its dead letter) on stdout.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use sqlgrade::assembly::build_scorer;
use sqlgrade::evaluation::DeadLetter;
use sqlgrade::pipeline::decode_payload;

use crate::config_file::load_config;

/// Exit code of `score` when the event on stdin is not a valid event.
const EXIT_BAD_EVENT: u8 = 2;

/// The arguments of `sqlgrade score`.
#[derive(Debug, clap::Args)]
pub struct ScoreArgs {
    /// TOML config file.
    #[arg(long)]
    config: Option<PathBuf>,
}

pub async fn execute(args: ScoreArgs) -> Result<ExitCode> {
    let mut config = load_config(args.config.as_ref())?;
    // One event: no need to watch the rules directory.
    config.rules.reload_interval_ms = 0;
    let scorer = build_scorer(&config)?;
    let limit = config.pipeline.max_event_bytes;
    let mut payload = Vec::new();
    // Read one byte past the limit so an oversized event is recognised without reading it all.
    std::io::stdin()
        .take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut payload)
        .context("reading the event from stdin")?;
    let mut out = std::io::stdout().lock();
    match decode_payload(&payload, limit) {
        Ok(event) => {
            let rows = scorer.score_both_passes(&event).await;
            scorer.flush().await;
            for row in rows {
                serde_json::to_writer(&mut out, &row)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            let dead_letter = DeadLetter::new("stdin", error.to_string(), &payload);
            serde_json::to_writer(&mut out, &dead_letter)?;
            out.write_all(b"\n")?;
            out.flush()?;
            Ok(ExitCode::from(EXIT_BAD_EVENT))
        }
    }
}
