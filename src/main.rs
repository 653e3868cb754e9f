//! sqlgrade command line (thin: everything lives in the library).
//!
//! Commands and flags are public interface (README "CLI reference", `ARCHITECTURE.md`): `run`,
//! `score`, `backfill`, `migrate`, `check-config`, `calibrate`, `report`.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

use sqlgrade::backfill::{BackfillFormat, BackfillPlan, BackfillRequest};
use sqlgrade::build::build_scorer;
use sqlgrade::config::{Config, SinkKind, SourceKind};
use sqlgrade::evaluation::DeadLetter;
use sqlgrade::event::Event;
use sqlgrade::pipeline::ProgressFn;
use sqlgrade::summary::Summary;

/// mimalloc instead of glibc malloc: scoring workers allocate rows that the sink task frees, and
/// glibc's arenas spent a quarter of the daemon's CPU in malloc/free (perf); with mimalloc the
/// daemon used 74–79 instead of 80–106 µs CPU per event (`benches/README.md`, "daemon
/// throughput").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code of `score` when the event on stdin is not a valid event.
const EXIT_BAD_EVENT: u8 = 2;

/// Exit code of `run` when shutdown did not finish within `pipeline.shutdown_timeout_ms`
/// (something could not be flushed or committed; it is redelivered on the next start).
const EXIT_SHUTDOWN_INCOMPLETE: u8 = 3;

/// How long past `pipeline.shutdown_timeout_ms` the last-resort watchdog waits before it ends
/// the process itself (the run's own deadline normally ends it first, with a precise error).
const SHUTDOWN_BACKSTOP: Duration = Duration::from_secs(3);

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
    Run {
        /// TOML config file (env SQLGRADE__SECTION__KEY overrides it).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Keep tailing the source file after EOF (overrides source.follow).
        #[arg(long)]
        follow: bool,
    },
    /// One event JSON on stdin → its evaluation rows as JSON lines on stdout (exit 2 and the
    /// dead letter on stdout for a bad event).
    Score {
        /// TOML config file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Replay a batch (events JSONL, or a BIRD/Spider run) through the same pipeline.
    Backfill {
        /// Events JSONL, or the dataset's dev.jsonl for bird/spider.
        #[arg(long)]
        input: PathBuf,
        /// Input format.
        #[arg(long, value_enum, default_value_t = FormatArg::Events)]
        format: FormatArg,
        /// Predictions JSONL (question_id, predicted_sql); required for bird/spider.
        #[arg(long)]
        predictions: Option<PathBuf>,
        /// Run id for every row (default for bird/spider: the predictions file's stem).
        #[arg(long)]
        run_id: Option<String>,
        /// TOML config file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// With an LLM judge: judge every event (`all`, the default for a benchmark run) or
        /// apply the live sampling policy of `[judge.budget]` (`sample`).
        #[arg(long, value_enum, default_value_t = JudgeArg::All)]
        judge: JudgeArg,
        /// After the run, measure its metrics against these labels (as `calibrate --labels`):
        /// per metric, Cohen's kappa and accuracy with 95% intervals, and the judge's tokens and
        /// cost per 1,000 events. Labels JSONL: `event_id` or `question_id` plus boolean `label`,
        /// or the review page's `labels.jsonl`. Needs the JSONL sink and a run id.
        #[arg(long)]
        labels: Option<PathBuf>,
    },
    /// Apply the ClickHouse DDL (idempotent).
    Migrate {
        /// TOML config file with the [sink] ClickHouse settings.
        #[arg(long)]
        config: PathBuf,
        /// Apply the migrations to every node of this cluster (ON CLUSTER, replicated tables,
        /// Distributed tables in front; default: `[sink.cluster] name`, else one server).
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Check metrics against human labels: Cohen's kappa with a bootstrap interval, per
    /// reviewer, accuracy, precision/recall, the confusion matrix, the kappa-maximising cut-off
    /// of continuous metrics (stef, hybrid_ex), and agreement between reviewers.
    Calibrate {
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
    },
    /// Summarise one run (terminal table) and write a self-contained HTML report.
    Report {
        /// The run to report on.
        #[arg(long)]
        run_id: String,
        /// Evaluations JSONL (the JSONL sink's evaluations.jsonl); default: ClickHouse from
        /// --config.
        #[arg(long)]
        input: Option<PathBuf>,
        /// Events JSONL the run was fed, to show SQL in the disagreement listing.
        #[arg(long)]
        events: Option<PathBuf>,
        /// TOML config whose [sink] names the ClickHouse to read from.
        #[arg(long)]
        config: Option<PathBuf>,
        /// HTML output file.
        #[arg(long, default_value = "report.html")]
        out: PathBuf,
        /// Human labels (the review page's `labels.jsonl`, or `event_id`/`question_id` plus
        /// boolean `label`): also print every judge identity of the run with its agreement
        /// (kappa and accuracy with 95% intervals) and the judge disagreement.
        #[arg(long)]
        labels: Option<PathBuf>,
    },
    /// Import human labels into the review store (a JSONL directory's `labels.jsonl`, or
    /// ClickHouse `labels`), where the review page, `calibrate` and the agreement monitor read
    /// them: the review page's own labels (kept as they are), or `event_id` / `question_id`
    /// plus boolean `label` (a `question_id` names the stored event ending in `-<id>`).
    ImportLabels {
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
    },
    /// Point at benchmark items whose gold query is suspect, from several systems' runs over
    /// the same items (cross-system agreement, gold failures, FLEX/ROSE verdicts on the gold);
    /// prints a ranked table and EX per system plain and with the suspected items left out.
    Audit(AuditArgs),
    /// Drop whole monthly partitions older than a duration from the ClickHouse tables (works on
    /// every ClickHouse release; see also TTL in deploy/clickhouse/README.md).
    Prune {
        /// TOML config file with the [sink] ClickHouse settings.
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
        /// Prune the local tables of every shard of this cluster (default: `[sink.cluster]
        /// name`, else one server).
        #[arg(long)]
        cluster: Option<String>,
    },
    /// The review page: overview, review queue, event pages and labelling, over a JSONL output
    /// directory or the ClickHouse of `--config` (labels go to `labels.jsonl` / `labels`).
    Serve {
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
    },
    /// Validate the configuration and print it with secrets redacted.
    CheckConfig {
        /// TOML config file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

/// `backfill --judge` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum JudgeArg {
    /// Judge every event (the batch waits for the judge, `judge.max_concurrency` in flight).
    All,
    /// The live policy: uniform slice plus priority slices within `[judge.budget]`.
    Sample,
}

/// `backfill --format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    /// JSONL events in the input contract.
    Events,
    /// BIRD dev.jsonl joined with --predictions.
    Bird,
    /// Spider dev.jsonl joined with --predictions.
    Spider,
}

impl From<FormatArg> for BackfillFormat {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Events => BackfillFormat::Events,
            FormatArg::Bird => BackfillFormat::Bird,
            FormatArg::Spider => BackfillFormat::Spider,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
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
    // Per-event spans go to OTLP once `[telemetry]` starts, whatever the log level.
    tracing_subscriber::registry()
        .with(sqlgrade::telemetry::span_export_layer())
        .with(logs.with_filter(filter))
        .init();
}

async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run { config, follow } => run(config, follow).await,
        Command::Score { config } => score(config).await,
        Command::Backfill {
            input,
            format,
            predictions,
            run_id,
            config,
            judge,
            labels,
        } => {
            let request = BackfillRequest {
                input,
                format: format.into(),
                predictions,
                run_id,
                judge: match judge {
                    JudgeArg::All => sqlgrade::backfill::PlanMode::Census,
                    JudgeArg::Sample => sqlgrade::backfill::PlanMode::Sample,
                },
            };
            backfill(config, request, labels).await
        }
        Command::Migrate { config, cluster } => migrate(config, cluster).await,
        Command::Prune {
            config,
            older_than,
            tables,
            dry_run,
            cluster,
        } => prune(config, older_than, tables, dry_run, cluster).await,
        Command::CheckConfig { config } => check_config(config),
        Command::Serve {
            dir,
            config,
            listen,
        } => serve(dir, config, listen).await,
        Command::Calibrate {
            labels,
            rows,
            dir,
            config,
            metric,
            cutoff,
            json,
        } => {
            let inputs = CalibrateInputs {
                labels,
                rows,
                dir,
                config,
            };
            calibrate(inputs, metric.as_deref(), cutoff, json).await
        }
        Command::Report {
            run_id,
            input,
            events,
            config,
            out,
            labels,
        } => report(run_id, input, events, config, out, labels).await,
        Command::ImportLabels {
            labels,
            dir,
            config,
            reviewer,
        } => import_labels(labels, dir, config, reviewer).await,
        Command::Audit(args) => audit(args).await,
    }
}

/// The arguments of `sqlgrade audit`.
#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// A run to compare (give at least two; benchmark backfills: the predictions file's stem).
    #[arg(long = "run-id", required = true)]
    run_ids: Vec<String>,
    /// Evaluations JSONL (the JSONL sink's evaluations.jsonl); default: ClickHouse from
    /// --config.
    #[arg(long)]
    input: Option<PathBuf>,
    /// TOML config whose [sink] names the ClickHouse to read from.
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

async fn audit(request: AuditArgs) -> Result<ExitCode> {
    use sqlgrade::audit::{GoldAudit, html, predictions_from_file, texts_from_file};
    use sqlgrade::report::{rows_from_clickhouse, rows_from_jsonl};
    use std::collections::{BTreeMap, HashMap};
    let mut run_ids = request.run_ids.clone();
    run_ids.sort();
    run_ids.dedup();
    if run_ids.len() < 2 {
        anyhow::bail!("audit compares systems: give at least two distinct --run-id");
    }
    let config = match (&request.input, &request.config) {
        (Some(_), _) => None,
        (None, Some(_)) => Some(load_config(request.config.as_ref())?),
        (None, None) => anyhow::bail!("audit needs --input FILE or --config FILE (ClickHouse)"),
    };
    let mut rows = BTreeMap::new();
    for run_id in &run_ids {
        let run_rows = match (&request.input, &config) {
            (Some(path), _) => rows_from_jsonl(path, run_id)?,
            (None, Some(config)) => rows_from_clickhouse(&config.sink, run_id).await?,
            (None, None) => Vec::new(),
        };
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

/// Where `calibrate` reads labels and rows.
struct CalibrateInputs {
    labels: Option<PathBuf>,
    rows: Option<PathBuf>,
    dir: Option<PathBuf>,
    config: Option<PathBuf>,
}

async fn calibrate(
    inputs: CalibrateInputs,
    metric: Option<&str>,
    cutoff: Option<f64>,
    json: bool,
) -> Result<ExitCode> {
    use sqlgrade::calibrate::{Label, read_labels, read_rows, reviewer_agreement};
    use sqlgrade::serve::store::{ClickHouseStore, LABELS_FILE, ReviewStore as _};
    let clickhouse = match &inputs.config {
        Some(path) => {
            let config = load_config(Some(path))?;
            (config.sink.kind == SinkKind::Clickhouse)
                .then(|| ClickHouseStore::new(&config.sink, config.server.review_max_rows))
        }
        None => None,
    };
    let labels: Vec<Label> = match (&inputs.labels, &inputs.dir, &clickhouse) {
        (Some(path), _, _) => read_labels(path)?,
        (None, Some(dir), _) => read_labels(&dir.join(LABELS_FILE))?,
        (None, None, Some(store)) => store
            .labels()
            .await?
            .iter()
            .filter_map(Label::from_review)
            .collect(),
        _ => bail!("calibrate needs --labels FILE, --dir DIR or --config FILE (ClickHouse)"),
    };
    let rows = match (&inputs.rows, &inputs.dir, &clickhouse) {
        (Some(path), _, _) => read_rows(path)?,
        (None, Some(dir), _) => read_rows(&dir.join(sqlgrade::sink::jsonl::EVALUATIONS_FILE))?,
        (None, None, Some(store)) => {
            let mut ids: Vec<String> = labels.iter().filter_map(|l| l.event_id.clone()).collect();
            ids.sort();
            ids.dedup();
            store
                .rows_of(&ids)
                .await?
                .iter()
                .filter_map(sqlgrade::serve::store::ReviewRow::to_evaluation)
                .collect()
        }
        _ => bail!("calibrate needs --rows FILE, --dir DIR or --config FILE (ClickHouse)"),
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
                .map(|r| r.metric)
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

/// Print calibration reports (text, or JSON: one report alone when one metric was asked for
/// and there is no reviewer agreement).
fn print_calibration(
    reports: &[sqlgrade::calibrate::CalibrationReport],
    agreement: &[sqlgrade::calibrate::ReviewerAgreement],
    one_metric: bool,
    json: bool,
) -> Result<()> {
    if json {
        let out = if one_metric && agreement.is_empty() && reports.len() == 1 {
            serde_json::to_value(&reports[0])?
        } else {
            serde_json::json!({ "metrics": reports, "reviewer_agreement": agreement })
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (i, report) in reports.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{report}");
        }
        if !agreement.is_empty() {
            println!();
            println!("agreement between reviewers (events both labelled):");
            let num = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.4}"));
            for a in agreement {
                println!(
                    "  {} ~ {}: {} shared, agreement {}, kappa {}",
                    a.a,
                    a.b,
                    a.shared,
                    num(a.agreement),
                    num(a.kappa)
                );
            }
        }
    }
    Ok(())
}

async fn report(
    run_id: String,
    input: Option<PathBuf>,
    events: Option<PathBuf>,
    config: Option<PathBuf>,
    out: PathBuf,
    labels: Option<PathBuf>,
) -> Result<ExitCode> {
    use sqlgrade::report::{
        RunReport, html, rows_from_clickhouse, rows_from_jsonl, sql_from_events,
    };
    let rows = match (&input, &config) {
        (Some(path), _) => rows_from_jsonl(path, &run_id)?,
        (None, Some(_)) => {
            let config = load_config(config.as_ref())?;
            rows_from_clickhouse(&config.sink, &run_id).await?
        }
        (None, None) => anyhow::bail!("report needs --input FILE or --config FILE (ClickHouse)"),
    };
    let sql = match &events {
        Some(path) => sql_from_events(path)?,
        None => Default::default(),
    };
    let report = RunReport::build(&run_id, &rows, &sql)?;
    print_stdout(&report.terminal_summary())?;
    std::fs::write(&out, html::render(&report))
        .with_context(|| format!("writing {}", out.display()))?;
    println!("HTML report: {}", out.display());
    if let Some(path) = labels {
        let mut ids: Vec<String> = rows.iter().map(|r| r.event_id.clone()).collect();
        ids.sort();
        ids.dedup();
        let (review_rows, sample) = match (&input, &config) {
            (Some(file), _) => {
                let all: Vec<sqlgrade::serve::store::ReviewRow> =
                    sqlgrade::serve::store::read_jsonl(file)?;
                let rows = all
                    .into_iter()
                    .filter(|r| r.run_id.as_deref() == Some(run_id.as_str()))
                    .collect::<Vec<_>>();
                (rows, Default::default())
            }
            _ => {
                use sqlgrade::serve::store::ReviewStore as _;
                let config = load_config(config.as_ref())?;
                let store = sqlgrade::serve::store::ClickHouseStore::new(
                    &config.sink,
                    config.server.review_max_rows,
                );
                let mut rows = Vec::new();
                for chunk in ids.chunks(500) {
                    rows.extend(store.rows_of(chunk).await?);
                }
                rows.retain(|r| r.run_id.as_deref() == Some(run_id.as_str()));
                (
                    rows,
                    sqlgrade::serve::view::CalibrationSample::from_settings(&config.server),
                )
            }
        };
        let plain = sqlgrade::calibrate::read_labels(&path)?;
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (human, unresolved) = sqlgrade::calibrate::resolve_labels(
            &plain,
            &id_refs,
            "imported",
            &sqlgrade::score::now_rfc3339(),
        );
        let (judges, disagreement) = sqlgrade::serve::view::judges(&review_rows, &human, &sample);
        let mut text = sqlgrade::serve::view::judges_text(&judges, &disagreement);
        if unresolved > 0 {
            text.push_str(&format!(
                "  {unresolved} labels name no event of run {run_id} and are left out\n"
            ));
        }
        print_stdout(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `sqlgrade import-labels`: validate each label and add it to the store.
async fn import_labels(
    path: PathBuf,
    dir: Option<PathBuf>,
    config: Option<PathBuf>,
    reviewer: String,
) -> Result<ExitCode> {
    let store: Arc<dyn sqlgrade::serve::store::ReviewStore> = match (&dir, &config) {
        (Some(dir), _) => Arc::new(sqlgrade::serve::store::JsonlStore::new(dir)),
        (None, Some(_)) => {
            let config = load_config(config.as_ref())?;
            sqlgrade::serve::store_for(&config.sink, config.server.review_max_rows)
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
        (sqlgrade::serve::store::labels_from_jsonl(&path)?, 0)
    } else {
        let plain = sqlgrade::calibrate::read_labels(&path)?;
        let needs_rows = plain.iter().any(|l| l.event_id.is_none());
        let rows = if needs_rows {
            store.rows().await?
        } else {
            Arc::new(Vec::new())
        };
        let mut ids: Vec<&str> = rows.iter().map(|r| r.event_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        sqlgrade::calibrate::resolve_labels(
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

/// Print a table to stdout; a closed pipe (`sqlgrade audit | head`) is not an error.
fn print_stdout(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

fn load_config(path: Option<&PathBuf>) -> Result<Config> {
    Config::load(path.map(PathBuf::as_path)).with_context(|| match path {
        Some(p) => format!("configuration {}", p.display()),
        None => "configuration (defaults + SQLGRADE__* environment)".to_string(),
    })
}

/// A watch channel that turns `true` on SIGINT/SIGTERM; a second signal exits at once.
///
/// Signals are received on a thread of their own, not on the async runtime: a step that blocks
/// the runtime's workers (librdkafka commits inside a rebalance callback while the broker is
/// gone) must not keep the daemon from hearing SIGTERM. With `limit`, the first signal also
/// starts a watchdog that ends the process (status [`EXIT_SHUTDOWN_INCOMPLETE`]) if it is still
/// running [`SHUTDOWN_BACKSTOP`] after the limit — the last resort behind the run's own deadline.
fn shutdown_signal(limit: Option<Duration>) -> watch::Receiver<bool> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let (tx, rx) = watch::channel(false);
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGINT/SIGTERM; stop the process with SIGKILL");
            return rx;
        }
    };
    let listening = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = signals.forever();
            if received.next().is_none() {
                return;
            }
            tracing::info!("signal received; draining (press Ctrl-C again to exit immediately)");
            if let Some(limit) = limit {
                start_shutdown_watchdog(limit);
            }
            let _ = tx.send(true);
            if received.next().is_some() {
                eprintln!("sqlgrade: second signal; exiting without draining");
                std::process::exit(130);
            }
        });
    if let Err(error) = listening {
        tracing::warn!(%error, "cannot start the signal thread; stop the process with SIGKILL");
    }
    rx
}

/// End the process [`SHUTDOWN_BACKSTOP`] after `limit` if it is still running.
fn start_shutdown_watchdog(limit: Duration) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(limit + SHUTDOWN_BACKSTOP);
            eprintln!(
                "sqlgrade: error: shutdown did not finish within {limit:?} \
                 (pipeline.shutdown_timeout_ms); exiting. Events not yet written stay \
                 uncommitted and are redelivered on the next start"
            );
            std::process::exit(i32::from(EXIT_SHUTDOWN_INCOMPLETE));
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the shutdown watchdog");
    }
}

/// Print a summary where it does not mix with rows: stderr when rows go to stdout.
fn print_summary(config: &Config, summary: &Summary, title: &str) {
    let text = summary.render(title);
    // A closed pipe (`sqlgrade run | head`) must not turn a finished run into a panic.
    if config.sink.kind == SinkKind::Stdout {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// The alert state changes of a batch run, after its summary (same stream).
fn print_alerts(config: &Config, alerts: &[sqlgrade::alert::AlertNotification]) {
    let text = sqlgrade::alert::render_notifications(alerts);
    if config.sink.kind == SinkKind::Stdout {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

async fn run(config_path: Option<PathBuf>, follow: bool) -> Result<ExitCode> {
    let mut config = load_config(config_path.as_ref())?;
    if follow {
        config.source.follow = true;
    }
    if config.source.kind == SourceKind::File && !config.source.path.exists() {
        bail!(
            "source file {} does not exist (run from the repository root for the default \
             examples/events.jsonl, or set [source] path / SQLGRADE__SOURCE__PATH)",
            config.source.path.display()
        );
    }
    let daemon = sqlgrade::build::Daemon::build(&config).await?;
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

async fn score(config_path: Option<PathBuf>) -> Result<ExitCode> {
    let mut config = load_config(config_path.as_ref())?;
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
    match Event::decode_with_limit(&payload, limit) {
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

async fn backfill(
    config_path: Option<PathBuf>,
    request: BackfillRequest,
    labels_path: Option<PathBuf>,
) -> Result<ExitCode> {
    let mut config = load_config(config_path.as_ref())?;
    // A batch is scored under one version of the rule profiles (no hot reload mid-run).
    config.rules.reload_interval_ms = 0;
    sqlgrade::backfill::apply_benchmark_gold_defaults(&request, &mut config);
    let plan = BackfillPlan::prepare(&request, &config)?;
    // Checked before the run: a measurement that cannot be made should not cost a backfill.
    let labels = match &labels_path {
        Some(path) => {
            if config.sink.kind != SinkKind::Jsonl {
                bail!(
                    "--labels reads the run's rows back from the JSONL sink; this config's sink is {:?} \
                     (run `sqlgrade calibrate --config` on the review page's labels instead)",
                    config.sink.kind
                );
            }
            let Some(run_id) = plan.run_id() else {
                bail!("--labels needs a run id: pass --run-id (bird/spider backfills have one)");
            };
            Some((sqlgrade::calibrate::read_labels(path)?, run_id.to_string()))
        }
        None => None,
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(plan.total());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} events ({per_sec}, eta {eta})",
        ) {
            bar.set_style(style);
        }
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let progress: ProgressFn = {
        let bar = bar.clone();
        Arc::new(move |n| bar.inc(n))
    };
    let title = match plan.run_id() {
        Some(run_id) => format!(
            "sqlgrade backfill summary ({}, run_id {run_id})",
            request.format.as_str()
        ),
        None => format!("sqlgrade backfill summary ({})", request.format.as_str()),
    };
    let result = plan
        .run_with_alerts(&config, shutdown_signal(None), Some(progress))
        .await;
    bar.finish_and_clear();
    let report = result?;
    print_summary(&config, &report.summary, &title);
    print_alerts(&config, &report.alerts);
    if let Some((labels, run_id)) = labels {
        let path = config
            .sink
            .dir
            .join(sqlgrade::sink::jsonl::EVALUATIONS_FILE);
        let rows: Vec<_> = sqlgrade::calibrate::read_rows(&path)?
            .into_iter()
            .filter(|r| r.run_id.as_deref() == Some(run_id.as_str()))
            .collect();
        let mut metrics: Vec<_> = rows.iter().map(|r| r.metric).collect();
        metrics.sort();
        metrics.dedup();
        println!();
        println!(
            "Agreement with {} labels ({}), run {run_id}:",
            labels.len(),
            labels_path
                .as_deref()
                .unwrap_or(std::path::Path::new("-"))
                .display()
        );
        let reports: Vec<_> = metrics
            .iter()
            .map(|m| {
                let prices = sqlgrade::calibrate::prices_for(&config, *m);
                sqlgrade::calibrate::calibrate(&labels, &rows, *m, None, prices)
            })
            .collect();
        print_calibration(&reports, &[], false, false)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn migrate(config_path: PathBuf, cluster: Option<String>) -> Result<ExitCode> {
    let config = load_config(Some(&config_path))?;
    if config.sink.kind != SinkKind::Clickhouse {
        bail!(
            "ClickHouse sink not configured: {} sets sink.kind = {:?}; migrate applies ClickHouse DDL only",
            config_path.display(),
            config.sink.kind
        );
    }
    let layout = sqlgrade::clickhouse::cluster_layout(&config.sink, cluster.as_deref());
    let report = sqlgrade::clickhouse::migrate::migrate(&config.sink, layout.as_ref()).await?;
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
        config.sink.database,
        layout
            .as_ref()
            .map_or(String::new(), |l| format!(" on cluster {}", l.name)),
        report.applied.len(),
        report.already_applied.len()
    );
    Ok(ExitCode::SUCCESS)
}

async fn prune(
    config_path: PathBuf,
    older_than: std::time::Duration,
    tables: Vec<String>,
    dry_run: bool,
    cluster: Option<String>,
) -> Result<ExitCode> {
    let config = load_config(Some(&config_path))?;
    if config.sink.kind != SinkKind::Clickhouse {
        bail!(
            "ClickHouse sink not configured: {} sets sink.kind = {:?}; prune works on ClickHouse only",
            config_path.display(),
            config.sink.kind
        );
    }
    let report = sqlgrade::clickhouse::retention::prune(
        &config.sink,
        older_than,
        &tables,
        chrono::Utc::now(),
        dry_run,
        sqlgrade::clickhouse::cluster_layout(&config.sink, cluster.as_deref()).as_ref(),
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
    Ok(ExitCode::SUCCESS)
}

async fn serve(
    dir: Option<PathBuf>,
    config_path: Option<PathBuf>,
    listen: String,
) -> Result<ExitCode> {
    let config = load_config(config_path.as_ref())?;
    let store: Arc<dyn sqlgrade::serve::store::ReviewStore> = match dir {
        Some(dir) => Arc::new(
            sqlgrade::serve::store::JsonlStore::new(dir)
                .with_max_rows(config.server.review_max_rows),
        ),
        None => sqlgrade::serve::store_for(&config.sink, config.server.review_max_rows)
            .context("the stdout sink stores nothing to review; pass --dir or a config with a JSONL or ClickHouse [sink]")?,
    };
    let state = Arc::new(
        sqlgrade::serve::ReviewState::new(store, config.server.token.clone()).with_calibration(
            sqlgrade::serve::view::CalibrationSample::from_settings(&config.server),
        ),
    );
    let server = sqlgrade::serve::serve(&listen, state).await?;
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

fn check_config(config_path: Option<PathBuf>) -> Result<ExitCode> {
    let config = load_config(config_path.as_ref())?;
    for warning in config_warnings(&config) {
        eprintln!("warning: {warning}");
    }
    let text = format!(
        "# sqlgrade effective configuration (secrets redacted)\n{}",
        config.to_redacted_toml()?
    );
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// Things that are valid but will not work as the user probably expects.
fn config_warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if config.source.kind == SourceKind::File && !config.source.path.exists() {
        warnings.push(format!(
            "source.path {} does not exist (relative paths are resolved from the working directory)",
            config.source.path.display()
        ));
    }
    if !config.rules.dir.is_dir() {
        warnings.push(format!(
            "rules.dir {} is not a directory; every app uses the default rule profile",
            config.rules.dir.display()
        ));
    }
    if let Some(dir) = &config.gold.databases
        && !dir.is_dir()
    {
        warnings.push(format!(
            "gold.databases {} is not a directory",
            dir.display()
        ));
    }
    if config.judge.kind == sqlgrade::config::JudgeKind::Llm {
        // Builds the client without contacting the endpoint: URL, API key, prompt templates.
        if let Err(e) = sqlgrade::llm::LlmJudge::from_config(&config.judge) {
            warnings.push(e.to_string());
        }
    }
    warnings
}
