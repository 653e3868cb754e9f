//! `sqlgrade migrate`: the versioned ClickHouse DDL, once per deploy.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::config_file::load_clickhouse_config;

/// The arguments of `sqlgrade migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// TOML config file with the [clickhouse] settings (and `[sink] kind = "clickhouse"`).
    #[arg(long)]
    config: PathBuf,
    /// Apply the migrations to every node of this cluster (ON CLUSTER, replicated tables,
    /// Distributed tables in front; default: `[clickhouse.cluster] name`, else one server).
    #[arg(long)]
    cluster: Option<String>,
}

pub async fn execute(args: MigrateArgs) -> Result<ExitCode> {
    let MigrateArgs {
        config: config_path,
        cluster,
    } = args;
    let config = load_clickhouse_config(&config_path, "migrate applies ClickHouse DDL only")?;
    let layout =
        sqlgrade::stores::clickhouse::cluster_layout(&config.clickhouse, cluster.as_deref());
    let report =
        sqlgrade::stores::clickhouse::migrate::migrate(&config.clickhouse, layout.as_ref()).await?;
    for name in &report.applied {
        println!("applied  {name}");
    }
    for name in &report.already_applied {
        println!("present  {name}");
    }
    for name in &report.changed {
        eprintln!("warning: {name} changed after it was applied (not re-applied)");
    }
    println!(
        "database {}{}: {} migration(s) applied, {} already present",
        config.clickhouse.database,
        layout
            .as_ref()
            .map_or(String::new(), |l| format!(" on cluster {}", l.name)),
        report.applied.len(),
        report.already_applied.len()
    );
    Ok(ExitCode::SUCCESS)
}
