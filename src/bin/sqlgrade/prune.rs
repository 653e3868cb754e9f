//! `sqlgrade prune`: retention by whole monthly partitions.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::config_file::load_clickhouse_config;

/// The arguments of `sqlgrade prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// TOML config file with the [clickhouse] settings (and `[sink] kind = "clickhouse"`).
    #[arg(long)]
    config: PathBuf,
    /// Age beyond which whole months are dropped, e.g. `90days`, `26weeks`, `2160h`.
    #[arg(long, value_parser = humantime::parse_duration)]
    older_than: std::time::Duration,
    /// Only this table (repeatable); default: every partitioned table.
    #[arg(long = "table")]
    tables: Vec<String>,
    /// Report what would be dropped without dropping it.
    #[arg(long)]
    dry_run: bool,
    /// Prune the local tables of every shard of this cluster (default: `[clickhouse.cluster]
    /// name`, else one server).
    #[arg(long)]
    cluster: Option<String>,
    /// On a cluster: how long to wait for a replica that has not fetched every part yet (a
    /// table is left untouched when one still lags), and again for a drop to reach every replica.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    replica_wait: std::time::Duration,
}

pub async fn execute(args: PruneArgs) -> Result<ExitCode> {
    let PruneArgs {
        config: config_path,
        older_than,
        tables,
        dry_run,
        cluster,
        replica_wait,
    } = args;
    let config = load_clickhouse_config(&config_path, "prune works on ClickHouse only")?;
    let report = sqlgrade::stores::clickhouse::retention::prune(
        &config.clickhouse,
        &sqlgrade::stores::clickhouse::retention::PruneRequest {
            older_than,
            tables,
            now: chrono::Utc::now(),
            dry_run,
            replica_wait,
        },
        sqlgrade::stores::clickhouse::cluster_layout(&config.clickhouse, cluster.as_deref())
            .as_ref(),
    )
    .await?;
    let verb = if dry_run { "would drop" } else { "dropped" };
    for (table, partition) in &report.dropped {
        println!("{verb}  {table} {partition}");
    }
    for (table, partition) in &report.unrecognised {
        eprintln!("warning: {table} partition {partition} is not a YYYYMM month; left alone");
    }
    println!(
        "cut-off {}: {} partition(s) {verb}, {} kept",
        report.cut_off,
        report.dropped.len(),
        report.kept.len()
    );
    for (table, why) in &report.lagging {
        eprintln!("error: {table} left untouched, a replica lags: {why}");
    }
    for (table, partition, replica) in &report.still_held {
        eprintln!("error: {table} {partition} still held by {replica}; run prune again");
    }
    Ok(if report.complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
