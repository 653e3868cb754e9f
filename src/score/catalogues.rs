//! Schema catalogues at the edge: which database schema the STEF catalogue checks use for an
//! event ([`CatalogueStore::select`]), read from the files of `[stef] catalogues` and of the
//! apps' rule profiles (`catalogue`, `catalogue_db`), and kept fresh.
//!
//! Selection, first that applies: the app's own catalogue (its profile's `catalogue`) with the
//! event's `db_id` (else `gold.db_id`, else the profile's `catalogue_db`, else the catalogue's
//! only database); then the global catalogues in order, by the same `db_id` (without one, only
//! when they hold a single database between them). When a catalogue applies but cannot answer —
//! the file failed to load, the database is in none, an event without `db_id` meets several
//! databases — the row says so (`details.catalogue.status = "unavailable"` with the reason) and
//! the schema-free checks still run. No catalogue configured: nothing is recorded.
//!
//! Files are read once, on first use (the global ones at start), and re-read when their size or
//! modification time changes (checked every `rules.reload_interval_ms` by a background thread).
//! A file that fails to re-read keeps its previous version in force (logged), like rule
//! profiles. Files over [`MAX_CATALOGUE_BYTES`](crate::score::sqlite::schema::MAX_CATALOGUE_BYTES)
//! are refused unread.
//!
//! Every event selects its schema, from every scoring thread, so each thread reads its own copy
//! of the loaded files ([`super::thread_copies`]), taken again when a file is first read or
//! re-read, and hands events a [`CatalogHandle`] whose reference count is that thread's own:
//! selecting touches no lock and no reference count the other threads write.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use sqlgrade_core::catalogue::{DbSchema, SchemaCatalog, SchemaError};
use sqlgrade_core::event::Event;
use sqlgrade_core::stef::{CatalogueSelection, RuleProfile};

use super::thread_copies::{self, Stamp};
use crate::score::sqlite::schema::load_catalogue_file;

/// Size and modification time of a file: a change of either means "read it again".
type Fingerprint = (u64, Option<SystemTime>);

#[derive(Clone)]
struct Entry {
    fingerprint: Option<Fingerprint>,
    loaded: Result<Arc<SchemaCatalog>, Arc<SchemaError>>,
}

struct Inner {
    global: Vec<PathBuf>,
    rules_dir: PathBuf,
    files: RwLock<HashMap<PathBuf, Entry>>,
    /// Changed after every change of `files`; each thread's copy follows it.
    stamp: Stamp,
}

/// A catalogue as a thread hands it to events: a reference count of that thread's own around
/// the shared catalogue, so that cloning and dropping it per event writes no line the other
/// threads write (the shared count is touched once per thread and file version).
#[derive(Debug, Clone)]
#[expect(
    clippy::redundant_allocation,
    reason = "the outer Arc is the thread's own reference count, the point of the handle"
)]
pub struct CatalogHandle(Arc<Arc<SchemaCatalog>>);

impl std::ops::Deref for CatalogHandle {
    type Target = SchemaCatalog;

    fn deref(&self) -> &SchemaCatalog {
        &self.0
    }
}

/// A thread's copy of the loaded files.
type LocalFiles = rustc_hash::FxHashMap<PathBuf, Result<CatalogHandle, Arc<SchemaError>>>;

/// The catalogues of a run; cheap to clone.
#[derive(Clone)]
pub struct CatalogueStore {
    inner: Arc<Inner>,
}

/// The schema chosen for one event (owns what [`CatalogueSelection`] borrows).
#[derive(Debug, Clone)]
pub enum SelectedSchema {
    /// No catalogue applies.
    None,
    /// `db_id` of `catalog`.
    Schema {
        /// The catalogue holding it.
        catalog: CatalogHandle,
        /// The database.
        db_id: String,
    },
    /// A catalogue applies but cannot give the schema.
    Unavailable {
        /// The database asked for.
        db_id: Option<String>,
        /// Why.
        reason: String,
    },
}

impl SelectedSchema {
    /// The borrowed form [`sqlgrade_core::stef::prepare_with`] takes.
    pub fn as_selection(&self) -> CatalogueSelection<'_> {
        match self {
            SelectedSchema::None => CatalogueSelection::None,
            SelectedSchema::Schema { catalog, db_id } => match catalog.get(db_id) {
                Some(schema) => CatalogueSelection::Schema(schema),
                None => CatalogueSelection::None,
            },
            SelectedSchema::Unavailable { db_id, reason } => CatalogueSelection::Unavailable {
                db_id: db_id.as_deref(),
                reason,
            },
        }
    }

    /// The schema, when one was found.
    pub fn schema(&self) -> Option<&DbSchema> {
        match self {
            SelectedSchema::Schema { catalog, db_id } => catalog.get(db_id),
            _ => None,
        }
    }
}

impl CatalogueStore {
    /// A store with the global catalogues `global` (read now; failures are logged and recorded
    /// on the rows of the events they would have served) and profile catalogues resolved
    /// against `rules_dir`.
    pub fn new(global: Vec<PathBuf>, rules_dir: PathBuf) -> CatalogueStore {
        let store = CatalogueStore {
            inner: Arc::new(Inner {
                global,
                rules_dir,
                files: RwLock::new(HashMap::new()),
                stamp: Stamp::new(),
            }),
        };
        for path in &store.inner.global {
            match store.entry(path).loaded {
                Ok(catalog) => tracing::info!(
                    path = %path.display(),
                    databases = catalog.len(),
                    "schema catalogue loaded"
                ),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "schema catalogue unavailable")
                }
            }
        }
        store
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.inner.rules_dir.join(p)
        }
    }

    /// The file's entry from the shared map, read on first use.
    fn entry(&self, path: &Path) -> Entry {
        if let Ok(files) = self.inner.files.read()
            && let Some(entry) = files.get(path)
        {
            return entry.clone();
        }
        let entry = read_entry(path);
        if let Ok(mut files) = self.inner.files.write() {
            files
                .entry(path.to_path_buf())
                .or_insert_with(|| entry.clone());
        }
        self.inner.stamp.changed();
        entry
    }

    /// The file's catalogue (or why there is none) from this thread's copy; from the shared map
    /// when the copy does not have the file yet (its first use: the copy is taken again after).
    fn loaded(&self, path: &Path) -> Result<CatalogHandle, Arc<SchemaError>> {
        let local = thread_copies::read(
            &self.inner.stamp,
            || self.copy(),
            |files: &LocalFiles| files.get(path).cloned(),
        );
        match local {
            Some(Some(found)) => found,
            _ => self
                .entry(path)
                .loaded
                .map(|catalog| CatalogHandle(Arc::new(catalog))),
        }
    }

    /// A copy of the loaded files for this thread's use only.
    fn copy(&self) -> Option<LocalFiles> {
        let files = self.inner.files.read().ok()?;
        Some(
            files
                .iter()
                .map(|(path, entry)| {
                    let loaded = entry.loaded.clone();
                    (path.clone(), loaded.map(|c| CatalogHandle(Arc::new(c))))
                })
                .collect(),
        )
    }

    /// The schema for `event` under `profile` (module docs).
    pub fn select(&self, event: &Event, profile: &RuleProfile) -> SelectedSchema {
        let db_id = event
            .db_id
            .as_deref()
            .or_else(|| event.gold.as_ref().and_then(|g| g.db_id.as_deref()));
        let mut reasons: Vec<String> = Vec::new();
        if let Some(own) = profile.catalogue.as_deref() {
            let path = self.resolve(own);
            match self.loaded(&path) {
                Err(error) => {
                    return SelectedSchema::Unavailable {
                        db_id: db_id.map(str::to_string),
                        reason: format!("the app's catalogue cannot be read: {error}"),
                    };
                }
                Ok(catalog) => {
                    let wanted = db_id.or(profile.catalogue_db.as_deref());
                    match wanted {
                        Some(db) if catalog.get(db).is_some() => {
                            return SelectedSchema::Schema {
                                catalog,
                                db_id: db.to_string(),
                            };
                        }
                        Some(db) => reasons.push(format!(
                            "database {db} is not in the app's catalogue {}",
                            path.display()
                        )),
                        None => match catalog.only_db_id() {
                            Some(only) => {
                                let db_id = only.to_string();
                                return SelectedSchema::Schema { catalog, db_id };
                            }
                            None => reasons.push(format!(
                                "no db_id, and the app's catalogue holds {} databases",
                                catalog.len()
                            )),
                        },
                    }
                }
            }
        }
        if self.inner.global.is_empty() && reasons.is_empty() {
            return SelectedSchema::None;
        }
        // Without a db_id, a single database across the global catalogues serves the event.
        let mut single: Option<CatalogHandle> = None;
        let mut databases = 0usize;
        for path in &self.inner.global {
            match self.loaded(path) {
                Ok(catalog) => {
                    if let Some(db) = db_id
                        && catalog.get(db).is_some()
                    {
                        return SelectedSchema::Schema {
                            catalog,
                            db_id: db.to_string(),
                        };
                    }
                    databases += catalog.len();
                    if catalog.len() == 1 {
                        single = Some(catalog);
                    }
                }
                Err(error) => reasons.push(format!("{} cannot be read: {error}", path.display())),
            }
        }
        if db_id.is_none()
            && databases == 1
            && let Some(catalog) = single
            && let Some(only) = catalog.only_db_id().map(str::to_string)
        {
            return SelectedSchema::Schema {
                catalog,
                db_id: only,
            };
        }
        if !self.inner.global.is_empty() {
            reasons.push(match db_id {
                Some(db) => format!("database {db} is in none of the catalogues"),
                None => format!("no db_id, and the catalogues hold {databases} databases"),
            });
        }
        SelectedSchema::Unavailable {
            db_id: db_id.map(str::to_string),
            reason: reasons.join("; "),
        }
    }

    /// Re-read the files whose size or modification time changed; returns how many were
    /// re-read. A failed re-read keeps the previous good version.
    pub fn refresh(&self) -> usize {
        let known: Vec<(PathBuf, Entry)> = match self.inner.files.read() {
            Ok(files) => files.iter().map(|(p, e)| (p.clone(), e.clone())).collect(),
            Err(_) => return 0,
        };
        let mut reread = 0;
        for (path, old) in known {
            let now = fingerprint(&path);
            if now == old.fingerprint {
                continue;
            }
            let mut fresh = read_entry(&path);
            reread += 1;
            match (&fresh.loaded, &old.loaded) {
                (Ok(catalog), _) => tracing::info!(
                    path = %path.display(),
                    databases = catalog.len(),
                    "schema catalogue reloaded"
                ),
                (Err(error), Ok(_)) => {
                    tracing::warn!(path = %path.display(), %error, "schema catalogue changed but cannot be read; the previous version stays in force");
                    fresh.loaded = old.loaded.clone();
                }
                (Err(error), Err(_)) => {
                    tracing::warn!(path = %path.display(), %error, "schema catalogue still unavailable")
                }
            }
            if let Ok(mut files) = self.inner.files.write() {
                files.insert(path, fresh);
            }
            self.inner.stamp.changed();
        }
        reread
    }

    /// Call [`CatalogueStore::refresh`] every `interval` on a background thread, until the
    /// returned handle is dropped.
    pub fn watch(&self, interval: Duration) -> CatalogueWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let store = self.clone();
        let thread = std::thread::Builder::new()
            .name("sqlgrade-catalogue-watch".into())
            .spawn(move || {
                let tick = interval.clamp(Duration::from_millis(1), Duration::from_millis(100));
                let mut waited = Duration::ZERO;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    waited += tick;
                    if waited >= interval {
                        waited = Duration::ZERO;
                        store.refresh();
                    }
                }
            });
        match thread {
            Ok(handle) => CatalogueWatcher {
                stop,
                thread: Some(handle),
            },
            Err(error) => {
                tracing::error!(%error, "cannot start the catalogue watcher thread");
                CatalogueWatcher { stop, thread: None }
            }
        }
    }
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()))
}

fn read_entry(path: &Path) -> Entry {
    let fingerprint = fingerprint(path);
    let loaded = load_catalogue_file(path).map(Arc::new).map_err(Arc::new);
    Entry {
        fingerprint,
        loaded,
    }
}

/// Handle of the background catalogue watcher; dropping it stops the thread.
pub struct CatalogueWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for CatalogueWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(db_id: Option<&str>) -> Event {
        let mut v = serde_json::json!({"question": "q", "sql": "SELECT 1"});
        if let Some(db) = db_id {
            v["db_id"] = db.into();
        }
        Event::from_value(v).unwrap()
    }

    fn one_db(db_id: &str, column: &str) -> String {
        format!(
            "db_id = \"{db_id}\"\n[[tables]]\nname = \"t\"\ncolumns = [{{ name = \"{column}\" }}]\n"
        )
    }

    #[test]
    fn a_changed_file_is_reread_and_a_broken_change_keeps_the_previous_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, one_db("a", "x")).unwrap();
        let store = CatalogueStore::new(vec![path.clone()], dir.path().to_path_buf());
        let profile = RuleProfile::default();
        let columns = |s: &SelectedSchema| {
            s.schema().map(|db| {
                db.columns
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            columns(&store.select(&event(None), &profile)),
            Some(vec!["*".into(), "x".into()])
        );
        // A longer file (the size changes even within the mtime's resolution).
        std::fs::write(&path, one_db("a", "longer_name")).unwrap();
        assert_eq!(store.refresh(), 1);
        assert_eq!(
            columns(&store.select(&event(Some("a")), &profile)),
            Some(vec!["*".into(), "longer_name".into()])
        );
        std::fs::write(&path, "this is not a catalogue at all, not even close").unwrap();
        assert_eq!(store.refresh(), 1);
        assert_eq!(
            columns(&store.select(&event(Some("a")), &profile)),
            Some(vec!["*".into(), "longer_name".into()]),
            "the previous version stays in force"
        );
        assert_eq!(store.refresh(), 0, "nothing changed since");
    }

    #[test]
    fn each_thread_selects_from_its_own_copy_and_follows_new_and_reread_files() {
        let dir = tempfile::tempdir().unwrap();
        let global = dir.path().join("g.toml");
        std::fs::write(&global, one_db("a", "x")).unwrap();
        std::fs::write(dir.path().join("own.toml"), one_db("b", "y")).unwrap();
        let store = CatalogueStore::new(vec![global.clone()], dir.path().to_path_buf());
        let handle = |s: SelectedSchema| match s {
            SelectedSchema::Schema { catalog, .. } => catalog,
            other => panic!("no schema: {other:?}"),
        };
        let plain = RuleProfile::default();
        let first = handle(store.select(&event(Some("a")), &plain));
        let again = handle(store.select(&event(Some("a")), &plain));
        assert!(
            Arc::ptr_eq(&first.0, &again.0),
            "this thread's own handle, twice"
        );
        let elsewhere = std::thread::scope(|s| {
            s.spawn(|| handle(store.select(&event(Some("a")), &plain)))
                .join()
                .unwrap()
        });
        assert!(
            !Arc::ptr_eq(&first.0, &elsewhere.0),
            "another thread has its own"
        );
        assert!(
            Arc::ptr_eq(&*first.0, &*elsewhere.0),
            "around the same catalogue"
        );

        // An app's own catalogue is read at its first use, and every thread sees it after.
        let own = RuleProfile {
            catalogue: Some("own.toml".into()),
            ..RuleProfile::default()
        };
        let columns = |s: &SelectedSchema| s.schema().map(|db| db.columns.len());
        assert_eq!(columns(&store.select(&event(None), &own)), Some(2));
        let seen = std::thread::scope(|s| {
            s.spawn(|| columns(&store.select(&event(None), &own)))
                .join()
                .unwrap()
        });
        assert_eq!(seen, Some(2));

        // A re-read file replaces every thread's copy.
        std::fs::write(&global, one_db("a2", "x")).unwrap();
        assert_eq!(store.refresh(), 1);
        assert!(store.select(&event(Some("a")), &plain).schema().is_none());
        assert!(store.select(&event(Some("a2")), &plain).schema().is_some());
        let moved = std::thread::scope(|s| {
            s.spawn(|| store.select(&event(Some("a2")), &plain).schema().is_some())
                .join()
                .unwrap()
        });
        assert!(moved);
    }

    #[test]
    fn a_sqlite_file_is_a_catalogue_named_by_its_stem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shop.sqlite");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
             CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), total REAL);",
        )
        .unwrap();
        drop(conn);
        let store = CatalogueStore::new(vec![path], dir.path().to_path_buf());
        let selected = store.select(&event(Some("shop")), &RuleProfile::default());
        let schema = selected.schema().expect("introspected");
        let orders = schema.table_index("orders").unwrap();
        let total = schema.column_index(orders, "total").unwrap();
        assert_eq!(
            schema.columns[total].ty,
            sqlgrade_core::catalogue::ColumnType::Number
        );
        assert_eq!(schema.foreign_keys.len(), 1);
    }
}
