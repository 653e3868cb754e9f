//! What the commands do beyond wiring a run: the benchmark and JSONL replays ([`backfill`]),
//! the run report ([`report`]), the gold audit over several runs ([`audit`]) and agreement with
//! people's labels and the correctness model's refit ([`calibrate`]). The command line itself
//! (arguments, output) is the binary, `src/bin/sqlgrade/`, one module per command.

pub mod audit;
pub mod backfill;
pub mod calibrate;
pub mod report;
