//! `sqlgrade breakdown`: where the agent goes wrong — line-rate events per table, column, join
//! edge or question type, flagged and share flagged with intervals, mean `p_correct`, the top
//! findings, against the window before and another version. The numbers are
//! `sqlgrade::stores::breakdown::breakdown`'s, the same the review page shows, over the cells
//! the store hands over (a JSONL directory folds its rows; ClickHouse reads its rollups).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use sqlgrade::stores::breakdown::{BreakdownLine, BreakdownQuery, Dimension, breakdown};

use crate::config_file::load_config;

/// The arguments of `sqlgrade breakdown`.
#[derive(Debug, clap::Args)]
pub struct BreakdownArgs {
    /// What to count by: table, column, join or question_type.
    #[arg(long, value_parser = ["table", "column", "join", "question_type"])]
    by: String,
    /// JSONL output directory to read (default: the `[sink]` of --config, else
    /// ./sqlgrade-out).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// TOML config whose `[sink]` (JSONL or ClickHouse) holds the rows.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Only this app.
    #[arg(long)]
    app: Option<String>,
    /// Only this agent.
    #[arg(long)]
    agent: Option<String>,
    /// Only this agent version.
    #[arg(long)]
    version: Option<String>,
    /// Compare with this version over the same window (ranked by the rise in flagged events).
    #[arg(long)]
    against_version: Option<String>,
    /// Window start: an RFC 3339 time, or `<n>h` / `<n>d` back from the end of the newest hour
    /// with events (so a replayed run reads the same whenever it is read); the window before,
    /// as long, is compared with it.
    #[arg(long)]
    since: Option<String>,
    /// Window end (exclusive), RFC 3339; default: the end of the newest hour with events.
    #[arg(long)]
    until: Option<String>,
    /// One JSON object per element on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Elements printed at most (0: all).
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

/// A time argument: RFC 3339, or `<n>h` / `<n>d` before `end`.
fn parse_time(text: &str, end: i64) -> Result<i64> {
    if let Some(time) = sqlgrade::stores::parse_time(text) {
        return Ok(time);
    }
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let seconds = match unit {
        "h" => 3_600,
        "d" => 86_400,
        _ => bail!("{text:?} is neither an RFC 3339 time nor a duration like 24h or 7d"),
    };
    let n: i64 = number
        .parse()
        .with_context(|| format!("{text:?}: the duration's number"))?;
    Ok(end - n * seconds)
}

pub async fn execute(args: BreakdownArgs) -> Result<ExitCode> {
    let config = load_config(args.config.as_ref())?;
    let store = match &args.dir {
        Some(dir) => sqlgrade::stores::Store::jsonl_dir(dir.clone()),
        None => config.store(),
    };
    let store = store.reader(config.server.review_max_rows).context(
        "the stdout sink stores nothing; pass --dir or a config with a JSONL or ClickHouse [sink]",
    )?;
    let data = store.breakdown().await?;
    let newest_end = data
        .cells
        .iter()
        .map(|c| c.hour + sqlgrade::stores::monitor::HOUR)
        .max()
        .unwrap_or(0);
    let until = args
        .until
        .as_deref()
        .map(|t| parse_time(t, newest_end))
        .transpose()?;
    let since = args
        .since
        .as_deref()
        .map(|t| parse_time(t, until.unwrap_or(newest_end)))
        .transpose()?;
    let query = BreakdownQuery {
        by: Dimension::parse(&args.by).context("--by")?,
        app: args.app,
        agent: args.agent,
        version: args.version,
        against_version: args.against_version,
        since,
        until,
    };
    let mut lines = breakdown(&data, &query);
    if args.limit > 0 {
        lines.truncate(args.limit);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        for line in &lines {
            serde_json::to_writer(&mut out, line)?;
            writeln!(out)?;
        }
    } else {
        write!(out, "{}", table(&lines, &query))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "—".into(), |s| format!("{:.1} %", s * 100.0))
}

/// The terminal table.
fn table(lines: &[BreakdownLine], query: &BreakdownQuery) -> String {
    let mut out = String::new();
    if lines.is_empty() {
        out.push_str("no line-rate events in the window\n");
        return out;
    }
    let against = query.against_version.as_deref();
    out.push_str(&format!(
        "{:<40} {:>7} {:>7} {:>22} {:>7}",
        query.by.as_str(),
        "events",
        "flagged",
        "share flagged (95 %)",
        "mean p"
    ));
    if let Some(v) = against {
        out.push_str(&format!(
            " {:>14} {:>24}",
            format!("{v}: flagged"),
            "difference (95 %)"
        ));
    } else if query.since.is_some() {
        out.push_str(&format!(
            " {:>14} {:>24}",
            "before: flagged", "change (95 %)"
        ));
    }
    out.push_str("  top findings\n");
    for l in lines {
        let interval = l
            .share_flagged_interval
            .map_or_else(String::new, |(lo, hi)| {
                format!(" [{:.0}–{:.0}]", lo * 100.0, hi * 100.0)
            });
        let name = if l.label != l.element {
            format!("{} ({})", l.label, l.element)
        } else {
            l.element.clone()
        };
        out.push_str(&format!(
            "{:<40} {:>7} {:>7} {:>22} {:>7}",
            name,
            l.events,
            l.flagged,
            format!("{}{interval}", percent(l.share_flagged)),
            l.mean_p_correct
                .map_or_else(|| "—".into(), |p| format!("{p:.2}")),
        ));
        let other = l.against.as_ref().or(l.previous.as_ref());
        let diff = l.difference.as_ref().or(l.change.as_ref());
        if against.is_some() || query.since.is_some() {
            out.push_str(&format!(
                " {:>14} {:>24}",
                other.map_or_else(|| "—".into(), |s| s.flagged.to_string()),
                diff.map_or_else(
                    || if l.new_this_period {
                        "new".into()
                    } else {
                        "—".into()
                    },
                    |d| format!(
                        "{:+.1} pts [{:+.0}, {:+.0}]",
                        d.share_flagged * 100.0,
                        d.lower * 100.0,
                        d.upper * 100.0
                    )
                ),
            ));
        }
        let top: Vec<String> = l
            .top_findings
            .iter()
            .map(|f| format!("{} ({})", f.code, f.events))
            .collect();
        out.push_str(&format!("  {}\n", top.join(", ")));
    }
    out
}
