//! Rule profiles: the shipped `rules/` directory loads cleanly, and the store hot-reloads.

use std::time::{Duration, Instant};

use sqlgrade::score::profiles::RulesStore;
use sqlgrade::stef::profile::{RuleProfile, content_version};

fn rules_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules")
}

#[test]
fn shipped_profiles_load_and_validate() {
    let (store, report) = RulesStore::load_dir(rules_dir()).unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for app in [
        "default",
        "example-app",
        "superhero-analytics",
        "toxicology-lab",
        "student-club-portal",
    ] {
        assert!(store.app_ids().contains(&app.to_string()), "{app} missing");
    }
    let example = store.get(Some("example-app"));
    assert_eq!(example.column_mappings["region"], "RegionName");
    assert_eq!(example.benign_filters.len(), 2);
    assert_eq!(example.dialect.as_deref(), Some("snowflake"));
    let text = std::fs::read_to_string(rules_dir().join("example-app.toml")).unwrap();
    assert_eq!(example.version, content_version(text.as_bytes()));
    // Unknown apps fall back to default.toml.
    let fallback = store.get(Some("no-such-app"));
    let default_text = std::fs::read_to_string(rules_dir().join("default.toml")).unwrap();
    assert_eq!(fallback.version, content_version(default_text.as_bytes()));
    assert_eq!(store.get(None).version, fallback.version);
    // Without a directory: the built-in default.
    assert_eq!(RulesStore::empty().get(Some("x")).version, "default");
}

fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn hot_reload_picks_up_changes_and_keeps_the_last_good_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.toml");
    std::fs::write(&path, "limit_min = 100\n").unwrap();
    let (store, report) = RulesStore::load_dir(dir.path()).unwrap();
    assert_eq!(report.loaded, vec!["app"]);
    assert_eq!(store.get(Some("app")).limit_min, 100);
    let watcher = store.watch(Duration::from_millis(50));
    let reader = store.clone(); // clones share state

    // A change is picked up without restart (size differs, so mtime granularity does not matter).
    std::fs::write(&path, "limit_min = 25000\n").unwrap();
    assert!(wait_for(|| reader.get(Some("app")).limit_min == 25000));
    let good_version = reader.get(Some("app")).version.clone();
    assert_eq!(good_version, content_version(b"limit_min = 25000\n"));

    // An invalid edit is rejected: the previous version stays in force.
    std::fs::write(&path, "limit_min = \"lots\"   # broken\n").unwrap();
    std::thread::sleep(Duration::from_millis(300)); // several watcher intervals
    assert_eq!(reader.get(Some("app")).version, good_version);
    assert_eq!(reader.get(Some("app")).limit_min, 25000);

    // New files appear, deleted ones disappear.
    std::fs::write(dir.path().join("other.json"), r#"{"limit_min": 7}"#).unwrap();
    assert!(wait_for(|| reader.get(Some("other")).limit_min == 7));
    std::fs::remove_file(dir.path().join("other.json")).unwrap();
    assert!(wait_for(
        || reader.get(Some("other")).limit_min == RuleProfile::default().limit_min
    ));

    // Fixing the broken file loads it again.
    std::fs::write(&path, "limit_min = 5\n").unwrap();
    assert!(wait_for(|| reader.get(Some("app")).limit_min == 5));
    watcher.stop();
}

#[test]
fn reload_reports_errors_for_invalid_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.toml"), "limit_min = 3\n").unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "benign_filters = [\"nonsense\"]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("ignored.txt"), "whatever").unwrap();
    let (store, report) = RulesStore::load_dir(dir.path()).unwrap();
    assert_eq!(report.loaded, vec!["ok"]);
    assert_eq!(report.errors.len(), 1);
    assert!(report.errors[0].to_string().contains("bad.toml"));
    assert_eq!(store.app_ids(), vec!["ok"]);
    assert!(RulesStore::load_dir(dir.path().join("missing")).is_err());

    // Without a watcher, reload() is the same scan: a broken edit keeps the last good version.
    let before = store.get(Some("ok"));
    std::fs::write(
        dir.path().join("ok.toml"),
        "limit_min = 0 # invalid: must be >= 1\n",
    )
    .unwrap();
    let report = store.reload().unwrap();
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.loaded.is_empty());
    assert_eq!(store.get(Some("ok")), before);
    // Unchanged files are not reparsed.
    assert_eq!(store.reload().unwrap(), Default::default());
}
