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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sqlgrade_core::stef::profile::{DEFAULT_PROFILE, RuleProfile, RulesError, content_version};

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
    profiles: HashMap<String, Arc<RuleProfile>>,
    /// Content hash of every file last seen (valid or not), so unchanged files are not reparsed
    /// and a rejected file is not re-reported until it changes again.
    stamps: HashMap<PathBuf, String>,
}

#[derive(Debug)]
struct StoreInner {
    dir: Option<PathBuf>,
    builtin_default: Arc<RuleProfile>,
    state: RwLock<StoreState>,
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

impl RulesStore {
    /// A store without a directory: every app gets the built-in default profile.
    pub fn empty() -> RulesStore {
        RulesStore {
            inner: Arc::new(StoreInner {
                dir: None,
                builtin_default: Arc::new(RuleProfile::default()),
                state: RwLock::new(StoreState::default()),
            }),
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
            inner: Arc::new(StoreInner {
                dir: Some(dir),
                builtin_default: Arc::new(RuleProfile::default()),
                state: RwLock::new(StoreState::default()),
            }),
        };
        let report = store.reload()?;
        Ok((store, report))
    }

    /// The directory this store loads from, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.inner.dir.as_deref()
    }

    /// The profile for `app_id`: its own, else `default`, else the built-in default.
    pub fn get(&self, app_id: Option<&str>) -> Arc<RuleProfile> {
        let Ok(state) = self.inner.state.read() else {
            return self.inner.builtin_default.clone();
        };
        if let Some(app) = app_id
            && let Some(p) = state.profiles.get(app)
        {
            return p.clone();
        }
        state
            .profiles
            .get(DEFAULT_PROFILE)
            .cloned()
            .unwrap_or_else(|| self.inner.builtin_default.clone())
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
        // Read every candidate file: content hashes (not mtimes, whose granularity can hide a
        // quick edit) decide what changed. Profiles are small, so this is cheap.
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
