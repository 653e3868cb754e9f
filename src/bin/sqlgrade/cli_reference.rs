//! The CLI reference (`docs/reference/cli.md`), generated from the command-line definition
//! itself: every command, its summary, usage and each flag with its help, default and values.
//! A unit test fails when the checked-in page differs (and rewrites it with
//! `SQLGRADE_WRITE_DOCS=1`), so the page cannot go stale.

use clap::{Arg, ArgAction, Command};

/// The page for `command` (the `sqlgrade` root and its subcommands), in Markdown.
pub fn markdown(command: &Command) -> String {
    let mut root = command.clone();
    root.build();
    let mut out = String::new();
    out.push_str("# CLI reference\n\n");
    out.push_str(
        "<!-- generated from the command-line definition (src/bin/sqlgrade/cli_reference.rs): do not edit -->\n\n",
    );
    if let Some(about) = root.get_about() {
        out.push_str(&format!("{about}\n\n"));
    }
    out.push_str(&format!("```\n{}\n```\n\n", usage(&mut root)));
    let global: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set() && !is_builtin(a))
        .collect();
    if !global.is_empty() {
        out.push_str("Global flags (before or after the command):\n\n");
        for arg in &global {
            out.push_str(&arg_line(arg));
        }
        out.push('\n');
    }
    out.push_str(
        "Exit codes: 0 success, 1 error (configuration, I/O, sink failure), 2 `score` got a bad \
         event, 3 shutdown deadline passed, 130 second interrupt. What each command is for: \
         [commands](../guides/commands.md).\n",
    );
    let mut subcommands: Vec<Command> = root
        .get_subcommands()
        .filter(|c| c.get_name() != "help")
        .cloned()
        .collect();
    subcommands.sort_by(|a, b| a.get_name().cmp(b.get_name()));
    for mut sub in subcommands {
        out.push_str(&format!("\n## `sqlgrade {}`\n\n", sub.get_name()));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            out.push_str(&format!("{}.\n\n", flatten(&about.to_string())));
        }
        out.push_str(&format!("```\n{}\n```\n\n", usage(&mut sub)));
        let args: Vec<&Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_global_set() && !is_builtin(a))
            .collect();
        for arg in args {
            out.push_str(&arg_line(arg));
        }
    }
    out
}

/// The command's usage line, without clap's `Usage: ` label.
fn usage(command: &mut Command) -> String {
    let usage = command.render_usage().to_string();
    usage
        .strip_prefix("Usage: ")
        .unwrap_or(&usage)
        .trim()
        .to_string()
}

fn is_builtin(arg: &Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version")
}

/// A help text's lines as one paragraph.
fn flatten(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One flag: its spelling, its help, its values and default.
fn arg_line(arg: &Arg) -> String {
    let name = match (arg.get_long(), arg.get_short()) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => arg.get_id().to_string().to_uppercase(),
    };
    let takes_value = !matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
    );
    let spelling = match arg.get_value_names() {
        Some(names) if takes_value && arg.get_long().is_some() => {
            format!("{name} <{}>", names.join(" "))
        }
        _ if takes_value && arg.get_long().is_some() => {
            format!("{name} <{}>", arg.get_id().as_str().to_uppercase())
        }
        _ => name,
    };
    let mut line = format!("- `{spelling}`");
    if arg.is_required_set() {
        line.push_str(" (required)");
    }
    if matches!(arg.get_action(), ArgAction::Append) {
        line.push_str(" (repeatable)");
    }
    if let Some(help) = arg.get_long_help().or(arg.get_help()) {
        let help = flatten(&help.to_string());
        line.push_str(&format!(" — {help}"));
        if !help.ends_with(['.', '?', '!', ')']) || help.ends_with("etc)") {
            line.push('.');
        }
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if takes_value && !values.is_empty() {
        line.push_str(&format!(" Values: {}.", values.join(", ")));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if takes_value && !defaults.is_empty() {
        line.push_str(&format!(" Default: `{}`.", defaults.join(" ")));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `docs/reference/cli.md` is the CLI definition's (rewritten with `SQLGRADE_WRITE_DOCS=1`).
    #[test]
    fn the_cli_reference_is_the_cli_definition() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/cli.md");
        let generated = super::markdown(&crate::Cli::command());
        let page = std::fs::read_to_string(&path).unwrap_or_default();
        if page != generated && std::env::var_os("SQLGRADE_WRITE_DOCS").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        assert!(
            page == generated,
            "docs/reference/cli.md is not the CLI definition's; run \
             `SQLGRADE_WRITE_DOCS=1 cargo test --bin sqlgrade cli_reference` to rewrite it"
        );
    }
}
