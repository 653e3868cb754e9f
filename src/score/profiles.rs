//! Rule profiles at the edge: reading `rules/<app_id>.toml` (or `.json`) files into a
//! [`RulesStore`] (`app_id` → [`RuleProfile`]), hot reloading, and the [`ProfileLookup`] seam the
//! scorer reads profiles through.
//!
//! [`RulesStore`] is cheap to clone (an `Arc`), safe to share between threads, and can watch its
//! directory: [`RulesStore::watch`] starts a background thread that polls file contents (hashes)
//! and reloads changed files. A file that fails to parse or validate is logged and the previous
//! version of that profile stays in force. `default.toml` (or `.json`), when present, is the
//! profile for events whose app has none. Parsing and validation themselves are pure
//! ([`sqlgrade_core::stef::profile`]).
//!
//! Every event looks its profile up, from every scoring thread. So that no lock or shared
//! reference count is touched per event (with many workers, one shared cache line written by
//! all of them), each thread reads its own copy of a store's profiles ([`super::thread_copies`]),
//! taken again only when a reload changed something: a lookup reads one shared atomic (never
//! written between reloads) and clones a reference count only its own thread uses.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sqlgrade_core::stef::profile::{DEFAULT_PROFILE, RuleProfile, RulesError, content_version};

use super::thread_copies::{self, Stamp};

/// Looks up the rule profile Rapp of an app (hot-reloaded stores implement this).
pub trait ProfileLookup: Send + Sync {
    /// The profile for `app_id` (the default profile when the app has none).
    fn profile_for(&self, app_id: Option<&str>) -> Arc<RuleProfile>;
}

/// The same profile for every app (no `rules/` directory, tests, benchmarks).
#[derive(Debug, Clone, Default)]
pub struct SingleProfile(pub Arc<RuleProfile>);

impl ProfileLookup for SingleProfile {
    fn profile_for(&self, _app_id: Option<&str>) -> Arc<RuleProfile> {
        Arc::clone(&self.0)
    }
}

impl ProfileLookup for RulesStore {
    fn profile_for(&self, app_id: Option<&str>) -> Arc<RuleProfile> {
        self.get(app_id)
    }
}

/// A [`RulesStore`] kept fresh by its background watcher; the watcher stops when this is dropped
/// (i.e. with the scorer that holds it).
pub struct WatchedRules {
    store: RulesStore,
    _watcher: RulesWatcher,
}

impl WatchedRules {
    /// Start watching `store` every `interval`.
    pub fn new(store: RulesStore, interval: Duration) -> WatchedRules {
        let watcher = store.watch(interval);
        WatchedRules {
            store,
            _watcher: watcher,
        }
    }
}

impl ProfileLookup for WatchedRules {
    fn profile_for(&self, app_id: Option<&str>) -> Arc<RuleProfile> {
        self.store.get(app_id)
    }
}

/// Load one profile file (`.toml` or `.json`); its version is the content hash.
pub fn load_profile(path: &Path) -> Result<RuleProfile, RulesError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| RulesError::Io {
        path: origin.clone(),
        message: e.to_string(),
    })?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => RuleProfile::from_json_str(&text, &origin),
        _ => RuleProfile::from_toml_str(&text, &origin),
    }
}

/// Load errors and results of one scan of the rules directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloadReport {
    /// App ids (re)loaded.
    pub loaded: Vec<String>,
    /// App ids whose file disappeared (profile removed).
    pub removed: Vec<String>,
    /// Files that failed (previous version kept).
    pub errors: Vec<RulesError>,
}

#[derive(Debug, Default)]
struct StoreState {
    profiles: FxHashMap<String, Arc<RuleProfile>>,
    /// Content hash of every file last seen (valid or not), so unchanged files are not reparsed
    /// and a rejected file is not re-reported until it changes again.
    stamps: HashMap<PathBuf, String>,
}

#[derive(Debug)]
struct StoreInner {
    /// Changed after every change of `state.profiles`; each thread's copy follows it.
    stamp: Stamp,
    dir: Option<PathBuf>,
    builtin_default: Arc<RuleProfile>,
    state: RwLock<StoreState>,
}

impl StoreInner {
    fn new(dir: Option<PathBuf>) -> StoreInner {
        StoreInner {
            stamp: Stamp::new(),
            dir,
            builtin_default: Arc::new(RuleProfile::default()),
            state: RwLock::new(StoreState::default()),
        }
    }

    fn changed(&self) {
        self.stamp.changed();
    }
}

/// The profile of `app_id` among `profiles`: its own, else `default`, else `builtin`.
fn resolve<'p>(
    profiles: &'p FxHashMap<String, Arc<RuleProfile>>,
    builtin: &'p Arc<RuleProfile>,
    app_id: Option<&str>,
) -> &'p Arc<RuleProfile> {
    app_id
        .and_then(|app| profiles.get(app))
        .or_else(|| profiles.get(DEFAULT_PROFILE))
        .unwrap_or(builtin)
}

/// One thread's copy of a store's profiles.
struct Snapshot {
    profiles: FxHashMap<String, Arc<RuleProfile>>,
    builtin: Arc<RuleProfile>,
}

/// Thread-safe, cheaply cloneable map `app_id` → [`RuleProfile`], optionally hot-reloaded.
#[derive(Debug, Clone)]
pub struct RulesStore {
    inner: Arc<StoreInner>,
}

impl Default for RulesStore {
    fn default() -> Self {
        Self::empty()
    }
}

/// Every candidate profile file of the directory (`<app>.toml` or `<app>.json`), read: its app,
/// content hash and bytes. Content hashes (not mtimes, whose granularity can hide a quick edit)
/// decide what changed; profiles are small, so this is cheap. A file that cannot be read is an
/// error of the report.
fn read_candidates(
    entries: std::fs::ReadDir,
    report: &mut ReloadReport,
) -> HashMap<PathBuf, (String, String, Vec<u8>)> {
    let mut seen: HashMap<PathBuf, (String, String, Vec<u8>)> = HashMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let ext = path.extension().and_then(|e| e.to_str());
        if !matches!(ext, Some("toml" | "json")) {
            continue;
        }
        let Some(app) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if !entry.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        match std::fs::read(&path) {
            Ok(bytes) => {
                let hash = content_version(&bytes);
                seen.insert(path, (app, hash, bytes));
            }
            Err(err) => report.errors.push(RulesError::Io {
                path: path.display().to_string(),
                message: err.to_string(),
            }),
        }
    }
    seen
}

impl RulesStore {
    /// A store without a directory: every app gets the built-in default profile.
    pub fn empty() -> RulesStore {
        RulesStore {
            inner: Arc::new(StoreInner::new(None)),
        }
    }

    /// A store over fixed profiles (tests, embedding): `app_id` → profile.
    pub fn from_profiles(profiles: impl IntoIterator<Item = (String, RuleProfile)>) -> RulesStore {
        let store = Self::empty();
        if let Ok(mut state) = store.inner.state.write() {
            for (app, p) in profiles {
                state.profiles.insert(app, Arc::new(p));
            }
        }
        store.inner.changed();
        store
    }

    /// Load every `*.toml` / `*.json` of `dir` (file stem = app id). Invalid files are logged
    /// and reported in the returned report; only an unreadable directory is an error.
    pub fn load_dir(dir: impl Into<PathBuf>) -> Result<(RulesStore, ReloadReport), RulesError> {
        let dir = dir.into();
        if !dir.is_dir() {
            return Err(RulesError::Io {
                path: dir.display().to_string(),
                message: "not a directory".into(),
            });
        }
        let store = RulesStore {
            inner: Arc::new(StoreInner::new(Some(dir))),
        };
        let report = store.reload()?;
        Ok((store, report))
    }

    /// The directory this store loads from, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.inner.dir.as_deref()
    }

    /// The profile for `app_id`: its own, else `default`, else the built-in default — from
    /// this thread's copy of the store (module doc), taken again after a reload changed it.
    pub fn get(&self, app_id: Option<&str>) -> Arc<RuleProfile> {
        let local = thread_copies::read(
            &self.inner.stamp,
            || self.snapshot(),
            |s: &Snapshot| resolve(&s.profiles, &s.builtin, app_id).clone(),
        );
        // `None`: the thread is exiting (its copies are gone) or the lock is poisoned.
        local.unwrap_or_else(|| self.get_shared(app_id))
    }

    /// A copy of the profiles for this thread's use only (their reference counts are its own).
    fn snapshot(&self) -> Option<Snapshot> {
        let state = self.inner.state.read().ok()?;
        let own = |p: &Arc<RuleProfile>| Arc::new(RuleProfile::clone(p));
        Some(Snapshot {
            profiles: state
                .profiles
                .iter()
                .map(|(app, p)| (app.clone(), own(p)))
                .collect(),
            builtin: own(&self.inner.builtin_default),
        })
    }

    /// [`RulesStore::get`] from the shared map itself.
    fn get_shared(&self, app_id: Option<&str>) -> Arc<RuleProfile> {
        let Ok(state) = self.inner.state.read() else {
            return self.inner.builtin_default.clone();
        };
        resolve(&state.profiles, &self.inner.builtin_default, app_id).clone()
    }

    /// App ids with a profile, sorted.
    pub fn app_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .inner
            .state
            .read()
            .map(|s| s.profiles.keys().cloned().collect())
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// Rescan the directory: reload new or changed files, drop profiles whose file is gone.
    /// A file that fails keeps the previous version of its profile.
    pub fn reload(&self) -> Result<ReloadReport, RulesError> {
        let mut report = ReloadReport::default();
        let Some(dir) = self.inner.dir.as_deref() else {
            return Ok(report);
        };
        let entries = std::fs::read_dir(dir).map_err(|e| RulesError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
        let seen = read_candidates(entries, &mut report);
        let changed: Vec<PathBuf> = {
            let state = self.inner.state.read().map_err(|_| poisoned(dir))?;
            seen.iter()
                .filter(|(path, (_, hash, _))| state.stamps.get(*path) != Some(hash))
                .map(|(p, _)| p.clone())
                .collect()
        };
        // Parse outside the lock; `.toml` sorts after `.json`, so it wins when both exist.
        let mut parsed: Vec<(PathBuf, String, String, Result<RuleProfile, RulesError>)> = changed
            .into_iter()
            .filter_map(|p| {
                let (app, hash, bytes) = seen.get(&p)?;
                let origin = p.display().to_string();
                let result = match std::str::from_utf8(bytes) {
                    Err(e) => Err(RulesError::Parse {
                        path: origin,
                        message: format!("not UTF-8: {e}"),
                    }),
                    Ok(text) if p.extension().is_some_and(|e| e == "json") => {
                        RuleProfile::from_json_str(text, &origin)
                    }
                    Ok(text) => RuleProfile::from_toml_str(text, &origin),
                };
                Some((p, app.clone(), hash.clone(), result))
            })
            .collect();
        parsed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut state = self.inner.state.write().map_err(|_| poisoned(dir))?;
        for (path, app, stamp, result) in parsed {
            state.stamps.insert(path.clone(), stamp);
            match result {
                Ok(profile) => {
                    let unchanged = state
                        .profiles
                        .get(&app)
                        .is_some_and(|old| old.version == profile.version);
                    if !unchanged {
                        tracing::info!(app_id = %app, version = %profile.version, path = %path.display(), "rule profile loaded");
                        state.profiles.insert(app.clone(), Arc::new(profile));
                        report.loaded.push(app);
                    }
                }
                Err(err) => {
                    tracing::warn!(app_id = %app, error = %err, "rule profile rejected; keeping the previous version");
                    report.errors.push(err);
                }
            }
        }
        let gone: Vec<PathBuf> = state
            .stamps
            .keys()
            .filter(|p| !seen.contains_key(*p))
            .cloned()
            .collect();
        for path in gone {
            state.stamps.remove(&path);
            if let Some(app) = path.file_stem().and_then(|s| s.to_str()) {
                let still_present = seen.values().any(|(a, _, _)| a == app);
                if !still_present && state.profiles.remove(app).is_some() {
                    tracing::info!(app_id = %app, "rule profile removed");
                    report.removed.push(app.to_string());
                }
            }
        }
        if !report.loaded.is_empty() || !report.removed.is_empty() {
            self.inner.changed();
        }
        drop(state);
        report.loaded.sort();
        Ok(report)
    }

    /// Poll the directory every `interval` on a background thread and reload changes. The
    /// thread stops when the returned handle is dropped.
    pub fn watch(&self, interval: Duration) -> RulesWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let store = self.clone();
        let flag = stop.clone();
        let spawn = std::thread::Builder::new()
            .name("sqlgrade-rules-watch".into())
            .spawn(move || {
                let tick = interval
                    .min(Duration::from_millis(100))
                    .max(Duration::from_millis(1));
                let mut waited = Duration::ZERO;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    waited += tick;
                    if waited < interval {
                        continue;
                    }
                    waited = Duration::ZERO;
                    if let Err(err) = store.reload() {
                        tracing::warn!(error = %err, "rules directory scan failed");
                    }
                }
            });
        let thread = match spawn {
            Ok(handle) => Some(handle),
            Err(err) => {
                tracing::error!(error = %err, "cannot start the rules watcher thread");
                None
            }
        };
        RulesWatcher { stop, thread }
    }
}

fn poisoned(dir: &Path) -> RulesError {
    RulesError::Io {
        path: dir.display().to_string(),
        message: "rules store lock poisoned".into(),
    }
}

/// Handle of a background rules watcher; dropping it stops the thread.
#[derive(Debug)]
pub struct RulesWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RulesWatcher {
    /// Stop the watcher and wait for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RulesWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(limit_min: u64) -> RuleProfile {
        RuleProfile {
            limit_min,
            ..RuleProfile::default()
        }
    }

    #[test]
    fn each_thread_reads_its_own_copy_and_follows_every_store_and_reload() {
        // More stores than a thread keeps copies of, read in turns: each answers for itself.
        let stores: Vec<RulesStore> = (1..=thread_copies::COPIES_PER_THREAD as u64 + 2)
            .map(|n| RulesStore::from_profiles([("app".to_string(), limit(n))]))
            .collect();
        for _ in 0..3 {
            for (n, store) in (1..).zip(&stores) {
                assert_eq!(store.get(Some("app")).limit_min, n);
                assert_eq!(store.get(Some("other")), store.get_shared(Some("other")));
                assert_eq!(store.get(None), store.get_shared(None));
            }
        }

        // A reload that adds a default and changes an app is seen at the next lookup, on this
        // thread and on another; a reload that changes nothing keeps the copies.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.toml"), "limit_min = 3\n").unwrap();
        let (store, _) = RulesStore::load_dir(dir.path()).unwrap();
        assert_eq!(store.get(Some("app")).limit_min, 3);
        let builtin = RuleProfile::default().limit_min;
        assert_eq!(store.get(Some("unknown")).limit_min, builtin);
        let generation = store.inner.stamp.generation();
        assert!(store.reload().unwrap().loaded.is_empty());
        assert_eq!(store.inner.stamp.generation(), generation);

        std::fs::write(dir.path().join("app.toml"), "limit_min = 4\n").unwrap();
        std::fs::write(dir.path().join("default.toml"), "limit_min = 9\n").unwrap();
        store.reload().unwrap();
        assert_eq!(store.get(Some("app")).limit_min, 4);
        assert_eq!(store.get(Some("unknown")).limit_min, 9);
        assert_eq!(store.get(None).limit_min, 9);
        let other = store.clone();
        let seen = std::thread::spawn(move || other.get(Some("app")).limit_min)
            .join()
            .unwrap();
        assert_eq!(seen, 4);

        std::fs::remove_file(dir.path().join("default.toml")).unwrap();
        assert_eq!(store.reload().unwrap().removed, vec!["default"]);
        assert_eq!(store.get(Some("unknown")).limit_min, builtin);
    }
}
