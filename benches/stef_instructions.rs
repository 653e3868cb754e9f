//! Instructions per event of the deterministic STEF path, counted by callgrind: a figure that
//! does not move with the machine's load, for before/after comparisons on a shared VM.
//!
//!   cargo bench --bench stef_instructions --no-run
//!   valgrind --tool=callgrind --toggle-collect='*stef_pass*' \
//!       target/release/deps/stef_instructions-<hash> --bench [--catalogue]
//!
//! One pass over the same corpus as `benches/stef.rs` (every BIRD and Spider prediction in
//! `shared/data`, 4,398 events) through `stef_path`, or with `--catalogue` through
//! `stef_path_with_catalogue` (each event's schema from the datasets' `tables.json`). Only the
//! pass is counted (`--toggle-collect` on [`stef_pass`]); loading the corpus is not. Divide
//! callgrind's total by the event count the binary prints. Time per event stays the job of
//! `benches/stef.rs`; this count says whether a change removed work, whatever the load.
//!
//! `--dump FILE` also writes every row (JSON lines, outside the counted pass), so that a change
//! meant to remove work can be shown to leave every output row as it was (`cmp` two dumps).

mod support;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::event::Event;
use sqlgrade::stef::{self, RuleProfile};
use sqlgrade_testkit::data::data_dir;

/// The counted region: every event once through the STEF path, SQL text to row.
#[inline(never)]
fn stef_pass(
    events: &[Event],
    schemas: Option<&[Option<&sqlgrade::catalogue::DbSchema>]>,
    profile: &RuleProfile,
) -> f64 {
    let ts = "2026-11-21T10:00:00Z";
    let mut total = 0.0;
    for (i, event) in events.iter().enumerate() {
        let selection = schemas.and_then(|s| s[i]).map_or(
            stef::CatalogueSelection::None,
            stef::CatalogueSelection::Schema,
        );
        total += support::stef_row_with(event, profile, ts, selection).value;
    }
    total
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench binaries without `--bench`.
        println!("stef_instructions: skipped outside `cargo bench`");
        return;
    }
    let with_catalogue = std::env::args().any(|a| a == "--catalogue");
    let events = support::prediction_events();
    assert!(!events.is_empty(), "no shared data");
    let mut catalogue = SchemaCatalog::new();
    for dataset in ["bird", "spider"] {
        let text = std::fs::read_to_string(data_dir().join(dataset).join("tables.json"))
            .expect("tables.json");
        catalogue.extend(SchemaCatalog::parse_tables_json(&text).expect("tables.json"));
    }
    let schemas: Vec<_> = events
        .iter()
        .map(|e| e.db_id.as_deref().and_then(|db| catalogue.get(db)))
        .collect();
    let profile = RuleProfile::default();
    let argv: Vec<String> = std::env::args().collect();
    if let Some(path) = argv
        .iter()
        .position(|a| a == "--dump")
        .and_then(|i| argv.get(i + 1))
    {
        let mut lines = String::new();
        for (event, schema) in events.iter().zip(&schemas) {
            let selection = schema.filter(|_| with_catalogue).map_or(
                stef::CatalogueSelection::None,
                stef::CatalogueSelection::Schema,
            );
            let row = support::stef_row_with(event, &profile, "2026-11-21T10:00:00Z", selection);
            lines.push_str(&serde_json::to_string(&row).expect("row serialises"));
            lines.push('\n');
        }
        std::fs::write(path, lines).expect("dump file");
    }
    let total = stef_pass(
        &events,
        with_catalogue.then_some(schemas.as_slice()),
        &profile,
    );
    println!(
        "stef_instructions: {} events, catalogue {}, sum of values {total:.3}",
        events.len(),
        if with_catalogue { "on" } else { "off" }
    );
}
