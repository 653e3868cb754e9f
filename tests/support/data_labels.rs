//! People's verdicts on a database we have (`nl2sql-bugs-toxicology.jsonl`), scored with the
//! data: what `sqlgrade_testkit::verdict_labels::data_items` needs from the daemon — each
//! query's run on `shared/data/bird/databases` through the read-only executor (the agent's
//! `result`, as a trace carries it: columns, the first rows, the row count), and the read-only
//! probe ([`sqlgrade::score::probe::Prober`], as `[stef] probe_databases` runs it).
//!
//! Shared by the shipped model's test (`tests/in_process/stef/verdict_model.rs`) and the
//! example that fits and measures it (`examples/verdict_model.rs`, which includes this file
//! by path), so both score the same items the same way.

use std::time::Duration;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::event::{Event, QueryResult};
use sqlgrade::score::probe::Prober;
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};
use sqlgrade_testkit::data::data_dir;
use sqlgrade_testkit::verdict_labels::{DataHooks, LabelledItem, data_items};

/// Each query's time limit on the database (the probe's default is 2 s; the labelled queries
/// all finish well within it on this database, so the figures do not depend on the machine).
const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// The items of the label file with a database, scored in every setting (`catalogue`:
/// BIRD's `tables.json`).
pub fn scored_data_items(catalogue: &SchemaCatalog) -> Vec<LabelledItem> {
    let databases = data_dir().join("bird").join("databases");
    let executor = SqliteExecutor::new(
        &databases,
        ExecLimits {
            timeout: QUERY_TIMEOUT,
            workers: 1,
            cache_bytes: 0,
            ..ExecLimits::default()
        },
    );
    let prober = Prober::new(databases, QUERY_TIMEOUT, 1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let run = |event: &Event| -> Option<QueryResult> {
        executor.result_sample(event.db_id.as_deref()?, &event.sql)
    };
    let probe = |event: &Event,
                 schema: &sqlgrade::catalogue::DbSchema,
                 prepared: &mut sqlgrade::stef::Prepared| {
        runtime.block_on(prober.probe(event, schema, prepared));
    };
    let items = data_items(
        catalogue,
        &DataHooks {
            run: &run,
            probe: &probe,
        },
    );
    executor.shutdown();
    items
}
