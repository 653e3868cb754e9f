//! sqlgrade command line: parses the arguments, starts logging and the async runtime, and hands
//! each command to its module (one per command; everything they do lives in the library).
//!
//! Commands and flags are public interface (`docs/reference/cli.md`, generated from this definition; `ARCHITECTURE.md`): `run`,
//! `score`, `backfill`, `migrate`, `prune`, `check-config`, `report`, `audit`, `serve`,
//! `import-labels`, `calibrate`, `breakdown`.

mod audit;
mod backfill;
mod breakdown;
mod calibrate;
mod check_config;
#[cfg(test)]
mod cli_reference;
mod config_file;
mod import_labels;
mod migrate;
mod output;
mod prune;
mod report;
mod run;
mod run_rows;
mod score;
mod serve;
mod signals;

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc malloc: scoring workers allocate rows that the sink task frees, and
/// glibc's arenas spent a quarter of the daemon's CPU in malloc/free (perf); with mimalloc the
/// daemon used 74–79 instead of 80–106 µs CPU per event (`CHANGELOG.md`, "daemon
/// throughput"). Built without asking for transparent huge pages (`no_thp` in `Cargo.toml`):
/// zeroing them on first touch cost short runs up to a quarter of their CPU. Plain blocks where
/// they are aligned enough: `sqlgrade::pipeline::allocator`.
#[global_allocator]
static GLOBAL: sqlgrade::pipeline::allocator::Allocator = sqlgrade::pipeline::allocator::Allocator;

#[derive(Debug, Parser)]
#[command(
    name = "sqlgrade",
    version,
    about = "Continuous quality scoring for text-to-SQL agents (STEF live score + gold metrics)"
)]
struct Cli {
    /// Log format on stderr (level from RUST_LOG, default info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The daemon. Without a config: file source examples/events.jsonl, deterministic judge,
    /// JSONL sink in ./sqlgrade-out/, summary at EOF.
    Run(run::RunArgs),
    /// One event JSON on stdin → its evaluation rows as JSON lines on stdout (exit 2 and the
    /// dead letter on stdout for a bad event).
    Score(score::ScoreArgs),
    /// Replay a batch (events JSONL, or a BIRD/Spider run) through the same pipeline.
    Backfill(backfill::BackfillArgs),
    /// Apply the ClickHouse DDL (idempotent).
    Migrate(migrate::MigrateArgs),
    /// Check metrics against human labels: Cohen's kappa with a bootstrap interval, per
    /// reviewer, accuracy, precision/recall, the confusion matrix, the kappa-maximising cut-off
    /// of continuous metrics (stef, hybrid_ex), and agreement between reviewers.
    Calibrate(calibrate::CalibrateArgs),
    /// Summarise one run (terminal table) and write a self-contained HTML report.
    Report(report::ReportArgs),
    /// Import human labels into the review store (a JSONL directory's `labels.jsonl`, or
    /// ClickHouse `labels`), where the review page, `calibrate` and the agreement monitor read
    /// them: the review page's own labels (kept as they are), or `event_id` / `question_id`
    /// plus boolean `label` (a `question_id` names the stored event ending in `-<id>`).
    ImportLabels(import_labels::ImportLabelsArgs),
    /// Point at benchmark items whose gold query is suspect, from several systems' runs over
    /// the same items (cross-system agreement, gold failures, FLEX/ROSE verdicts on the gold);
    /// prints a ranked table and EX per system plain and with the suspected items left out.
    Audit(audit::AuditArgs),
    /// Drop whole monthly partitions older than a duration from the ClickHouse tables (works on
    /// every ClickHouse release; see also TTL in deploy/clickhouse/README.md).
    Prune(prune::PruneArgs),
    /// The review page: overview, review queue, event pages and labelling, over a JSONL output
    /// directory or the ClickHouse of `--config` (labels go to `labels.jsonl` / `labels`).
    Serve(serve::ServeArgs),
    /// Validate the configuration and print it with secrets redacted.
    CheckConfig(check_config::CheckConfigArgs),
    /// Where the agent goes wrong: line-rate events per table, column, join edge or question
    /// type — flagged, share flagged, mean p_correct, top findings — against the window before
    /// and another version, from a JSONL directory or the ClickHouse of --config.
    Breakdown(breakdown::BreakdownArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    // Workers and blocking threads with 8 MiB stacks (tokio's default is 2 MiB): every walk
    // over an event's SQL is bounded in depth (ESM+, ETM: 256 levels; the parser's own limit),
    // and this holds the deepest one allowed with room to spare, in any build. Only what is
    // used becomes resident.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(8 * 1024 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sqlgrade: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("sqlgrade: error: {error:#}");
            ExitCode::FAILURE
        }
    };
    // Do not wait for blocking tasks that cannot finish (a librdkafka call waiting for a broker
    // that is gone): everything that had to be written was written, or reported above.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::FilterExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs.boxed(),
        LogFormat::Json => logs.json().boxed(),
    };
    // Per-event spans go to OTLP once `[telemetry]` starts, whatever the log level; the logs
    // leave them out (formatting their fields cost ~3 % of the daemon's CPU).
    let filter = filter.and(sqlgrade::telemetry::without_event_spans());
    tracing_subscriber::registry()
        .with(sqlgrade::telemetry::span_export_layer())
        .with(logs.with_filter(filter))
        .init();
}

async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => run::execute(args).await,
        Command::Score(args) => score::execute(args).await,
        Command::Backfill(args) => backfill::execute(args).await,
        Command::Migrate(args) => migrate::execute(args).await,
        Command::Calibrate(args) => calibrate::execute(args).await,
        Command::Report(args) => report::execute(args).await,
        Command::ImportLabels(args) => import_labels::execute(args).await,
        Command::Audit(args) => audit::execute(args).await,
        Command::Prune(args) => prune::execute(args).await,
        Command::Serve(args) => serve::execute(args).await,
        Command::CheckConfig(args) => check_config::execute(args),
        Command::Breakdown(args) => breakdown::execute(args).await,
    }
}
