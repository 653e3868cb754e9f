//! `sqlgrade serve`: the review page over a JSONL directory or ClickHouse.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result};

use crate::config_file::load_config;

/// The arguments of `sqlgrade serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// JSONL output directory to read (default: the `[sink]` of --config, else
    /// ./sqlgrade-out).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// TOML config: `[sink]` (JSONL or ClickHouse) and `[server] token` (env
    /// SQLGRADE__SERVER__TOKEN works without a file).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on (localhost unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:8089")]
    listen: String,
}

pub async fn execute(args: ServeArgs) -> Result<ExitCode> {
    let ServeArgs {
        dir,
        config: config_path,
        listen,
    } = args;
    let config = load_config(config_path.as_ref())?;
    let store = match dir {
        Some(dir) => sqlgrade::stores::Store::jsonl_dir(dir),
        None => config.store(),
    };
    let store: Arc<dyn sqlgrade::stores::ReviewStore> = store
        .reader(config.server.review_max_rows)
        .context("the stdout sink stores nothing to review; pass --dir or a config with a JSONL or ClickHouse [sink]")?;
    let state = Arc::new(
        sqlgrade::review_page::ReviewState::new(store, config.server.token.clone())
            .with_allowed_hosts(&config.server.allowed_hosts)
            .with_calibration(
                sqlgrade::review_page::view::CalibrationSample::from_settings(&config.server),
            )
            .with_model(config.stef.verdict_model()?),
    );
    let server = sqlgrade::review_page::serve(&listen, state).await?;
    eprintln!(
        "sqlgrade: review page on http://{} (Ctrl-C to stop)",
        server.local_addr
    );
    tokio::select! {
        () = server.wait() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(ExitCode::SUCCESS)
}
