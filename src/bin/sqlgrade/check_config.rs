//! `sqlgrade check-config`: validate, warn, and print the effective configuration redacted;
//! with `--schema`, the JSON Schema of the file instead.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use sqlgrade::config::Config;

use crate::config_file::load_config;

/// The arguments of `sqlgrade check-config`.
#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// TOML config file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the JSON Schema of sqlgrade.toml instead (every key, its type, default and doc;
    /// for editors: Taplo / Even Better TOML) and exit.
    #[arg(long, conflicts_with = "config")]
    schema: bool,
}

pub fn execute(args: CheckConfigArgs) -> Result<ExitCode> {
    if args.schema {
        let text = serde_json::to_string_pretty(&sqlgrade::config::json_schema())
            .context("rendering the JSON Schema")?;
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .context("writing to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    let config = load_config(args.config.as_ref())?;
    // A model `run` would refuse is refused here too, with the same reason.
    let model = config.stef.verdict_model()?;
    eprintln!(
        "correctness model: {} ({}; verdict at p_correct >= {:.4})",
        model.version(),
        config
            .stef
            .model
            .as_ref()
            .map_or("shipped".to_string(), |p| p.display().to_string()),
        model.threshold()
    );
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
    if let Some(file) = config.source.file()
        && !file.path.exists()
    {
        warnings.push(format!(
            "source.path {} does not exist (relative paths are resolved from the working directory)",
            file.path.display()
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
    if let Some(judge) = config.judge.llm() {
        // Builds the client without contacting the endpoint: URL, API key, prompt templates.
        if let Err(e) = sqlgrade::llm::LlmJudge::from_config(judge) {
            warnings.push(e.to_string());
        }
    }
    warnings
}
