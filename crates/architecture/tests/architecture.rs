//! The architecture, checked from the code (`ARCHITECTURE.md` explains it):
//!
//! - the core crate depends on no runtime or client (tokio, reqwest, rusqlite, rdkafka,
//!   clickhouse, …), the testkit not on the daemon;
//! - in every workspace crate (the core, the daemon library, the daemon binary, the testkit),
//!   no file imports a file that imports it back, directly or through others;
//! - `ARCHITECTURE.md` is the one layer list: its table for each crate names every top-level
//!   module exactly once (read from the document here, not copied), and every import between
//!   top-level modules goes down that order;
//! - the findings tables (`docs/reference/findings.md`, and the check modules' docs) name every `FindingCode`,
//!   read from its definition, and no other.
//!
//! Imports are read with `syn`: `use` trees and every `crate::`/`super::`/`self::` path (and
//! paths through a child module's name) in items. A name is resolved to the file that defines
//! it, following `pub use` re-exports; a module file's `pub use` of its children is a
//! re-export, not an import. `#[cfg(test)]` items are left out: tests may exercise several
//! modules together. Paths inside macro invocations are not seen.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Module path (`["stef", "align"]`; empty for the crate root).
type ModPath = Vec<String>;

struct ModFile {
    /// Names defined at the top level (items, child modules).
    defines: BTreeSet<String>,
    /// `pub use` re-exports: exported name → full path (`*` for globs, keyed by the path).
    reexports: Vec<(String, Vec<String>)>,
    /// Paths this file imports or names.
    references: Vec<Vec<String>>,
}

/// Every module file under `root` (a crate's source root: `lib.rs` or `main.rs` is the crate
/// root), leaving out the directories named in `skip` (relative to `root`: another crate's
/// files, such as the binary's `bin/` beside the library).
fn module_files(root: &Path, skip: &[&str]) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !skip.iter().any(|s| path == root.join(s)) {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut segs: ModPath = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(segs.last().map(String::as_str), Some("mod"))
                || (segs.len() == 1 && matches!(segs[0].as_str(), "lib" | "main"))
            {
                segs.pop();
            }
            out.insert(segs, path);
        }
    }
    out
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Flatten a use tree into full paths (with the name each path is bound to).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            if name != "self" {
                path.push(name.clone());
            }
            let bound = if name == "self" {
                prefix.last().cloned().unwrap_or_default()
            } else {
                name
            };
            out.push((bound, path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// Every `syn::Path` in the items of a file.
#[derive(Default)]
struct PathCollector {
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}

    // `pub(super)` / `pub(in path)` name a scope, not something imported.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_cfg_test(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Const(i) => i.ident.to_string(),
        syn::Item::Enum(i) => i.ident.to_string(),
        syn::Item::Fn(i) => i.sig.ident.to_string(),
        syn::Item::Mod(i) => i.ident.to_string(),
        syn::Item::Static(i) => i.ident.to_string(),
        syn::Item::Struct(i) => i.ident.to_string(),
        syn::Item::Trait(i) => i.ident.to_string(),
        syn::Item::Type(i) => i.ident.to_string(),
        syn::Item::Union(i) => i.ident.to_string(),
        syn::Item::Macro(i) => i.ident.as_ref()?.to_string(),
        _ => return None,
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

fn read_module(path: &Path) -> ModFile {
    let text = std::fs::read_to_string(path).unwrap();
    let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut module = ModFile {
        defines: BTreeSet::new(),
        reexports: Vec::new(),
        references: Vec::new(),
    };
    let mut collector = PathCollector::default();
    for item in &file.items {
        if is_cfg_test(item_attrs(item)) {
            continue;
        }
        if let Some(name) = item_name(item) {
            module.defines.insert(name);
        }
        if let syn::Item::Use(u) = item {
            let mut paths = Vec::new();
            use_paths(&u.tree, &mut Vec::new(), &mut paths);
            let public = !matches!(u.vis, syn::Visibility::Inherited);
            for (name, path) in paths {
                if public {
                    module.reexports.push((name, path.clone()));
                }
                // A `pub use` is also an import unless it only re-exports a child (below).
                module.references.push(path);
            }
            continue;
        }
        collector.visit_item(item);
    }
    module.references.extend(collector.paths);
    module
}

struct Crate {
    files: BTreeMap<ModPath, PathBuf>,
    modules: BTreeMap<ModPath, ModFile>,
}

impl Crate {
    fn load(root: &Path) -> Crate {
        Crate::load_without(root, &[])
    }

    fn load_without(root: &Path, skip: &[&str]) -> Crate {
        let files = module_files(root, skip);
        let modules = files
            .iter()
            .map(|(m, p)| (m.clone(), read_module(p)))
            .collect();
        Crate { files, modules }
    }

    /// The file a path used in module `from` resolves to (`None`: outside the crate).
    fn resolve(&self, from: &ModPath, path: &[String], depth: usize) -> Option<ModPath> {
        let first = path.first()?;
        let mut current: ModPath;
        let mut rest: &[String] = path;
        match first.as_str() {
            "crate" => {
                current = Vec::new();
                rest = &path[1..];
            }
            "self" | "super" => {
                current = from.clone();
                while let Some(seg) = rest.first() {
                    match seg.as_str() {
                        "self" => {}
                        "super" => {
                            current.pop();
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            name => {
                // `child::Item` through a child module of `from` (a lone `name` is a local
                // variable or an imported item, not a module path).
                let mut child = from.clone();
                child.push(name.to_string());
                if path.len() >= 2 && self.files.contains_key(&child) {
                    current = from.clone();
                } else {
                    return None;
                }
            }
        }
        for (i, seg) in rest.iter().enumerate() {
            let mut child = current.clone();
            child.push(seg.clone());
            if self.files.contains_key(&child) {
                current = child;
                continue;
            }
            // `seg` is an item of `current`: follow a re-export if that is where it comes from.
            let module = self.modules.get(&current)?;
            if depth < 16 && !module.defines.contains(seg) {
                if let Some((_, target)) = module.reexports.iter().find(|(n, _)| n == seg) {
                    let mut full = target.clone();
                    full.extend(rest[i + 1..].iter().cloned());
                    return self.resolve(&current, &full, depth + 1).or(Some(current));
                }
                for (_, target) in module.reexports.iter().filter(|(n, _)| n == "*") {
                    let mut full = target.clone();
                    full.extend(rest[i..].iter().cloned());
                    if let Some(found) = self.resolve(&current, &full, depth + 1)
                        && found != current
                    {
                        return Some(found);
                    }
                }
            }
            return Some(current);
        }
        Some(current)
    }

    /// Edges file → file (each with one example path).
    fn edges(&self) -> BTreeMap<ModPath, BTreeMap<ModPath, String>> {
        let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, String>> = BTreeMap::new();
        for (from, module) in &self.modules {
            for path in &module.references {
                let Some(to) = self.resolve(from, path, 0) else {
                    continue;
                };
                if &to == from {
                    continue;
                }
                // A module file re-exporting (or naming) its own descendants is its interface,
                // not an import: `pub use child::Item`, `pub mod child`.
                let reexported = module
                    .reexports
                    .iter()
                    .any(|(_, p)| self.resolve(from, p, 0).as_ref() == Some(&to));
                if reexported && to.starts_with(from) {
                    continue;
                }
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| path.join("::"));
            }
        }
        edges
    }
}

/// Strongly connected components with more than one file.
fn cycles(edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeMap<ModPath, String>>,
        index: HashMap<ModPath, usize>,
        low: HashMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on_stack: BTreeSet<ModPath>,
        next: usize,
        out: Vec<Vec<ModPath>>,
    }
    fn visit(s: &mut State<'_>, v: &ModPath) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        let targets: Vec<ModPath> = s
            .edges
            .get(v)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low[v];
                s.low.insert(v.clone(), lv.min(lw));
            } else if s.on_stack.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low[v];
                s.low.insert(v.clone(), lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let done = &w == v;
                component.push(w);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: BTreeSet<ModPath> = edges
        .iter()
        .flat_map(|(a, m)| std::iter::once(a.clone()).chain(m.keys().cloned()))
        .collect();
    for v in &nodes {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out
}

fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "(crate root)".into()
    } else {
        m.join("::")
    }
}

fn assert_acyclic(label: &str, krate: &Crate) -> BTreeMap<ModPath, BTreeMap<ModPath, String>> {
    let edges = krate.edges();
    let found = cycles(&edges);
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!(
            "\n{label}: import cycle among {}",
            component.iter().map(name).collect::<Vec<_>>().join(", ")
        ));
        for a in component {
            for (b, example) in &edges[a] {
                if component.contains(b) {
                    report.push_str(&format!("\n    {} -> {} ({example})", name(a), name(b)));
                }
            }
        }
    }
    assert!(found.is_empty(), "{report}");
    edges
}

/// The unit a module belongs to: the longest documented name (`pipeline`, `stores::jsonl`) that
/// is a prefix of its path. A folder that groups modules by kind (`stores/`, `sources/`) lists
/// its children in the layer table, each in its own layer; a plain module lists itself.
fn unit_of<'a>(module: &ModPath, units: &'a [Vec<String>]) -> Option<&'a Vec<String>> {
    units
        .iter()
        .filter(|u| !u.is_empty() && module.starts_with(u))
        .max_by_key(|u| u.len())
}

/// Check that every edge between two units goes to a strictly lower layer.
fn assert_layers(
    label: &str,
    edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>,
    layers: &[&[&str]],
) {
    let rank: HashMap<Vec<String>, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, names)| names.iter().map(move |n| (unit_path(n), i)))
        .collect();
    let units: Vec<Vec<String>> = rank.keys().cloned().collect();
    let mut problems = Vec::new();
    for (from, targets) in edges {
        if from.is_empty() {
            continue;
        }
        for (to, example) in targets {
            if to.is_empty() {
                continue;
            }
            let (Some(a), Some(b)) = (unit_of(from, &units), unit_of(to, &units)) else {
                problems.push(format!(
                    "{} or {} is in no layer of ARCHITECTURE.md",
                    name(from),
                    name(to)
                ));
                continue;
            };
            // A group's own file declaring or re-exporting its children is not an import.
            if a == b || b.starts_with(a) {
                continue;
            }
            if rank[b] >= rank[a] {
                problems.push(format!(
                    "{} imports {} ({example}), which is not in a lower layer",
                    name(from),
                    name(to)
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{label}: layering broken:\n  {}",
        problems.join("\n  ")
    );
}

/// `stores::jsonl` as a module path.
fn unit_path(name: &str) -> Vec<String> {
    name.split("::").map(str::to_string).collect()
}

/// The workspace root (this crate is `crates/architecture`).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The layer tables of `ARCHITECTURE.md`, the one list: per crate source root (the heading
/// "### `crates/core/src` …"), its layers lowest first, each the module names of its row.
fn documented_layers() -> BTreeMap<String, Vec<Vec<String>>> {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let mut out: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("### `") {
            current = heading.split('`').next().map(str::to_string);
            continue;
        }
        if line.starts_with("## ") {
            current = None;
        }
        let Some(root) = &current else { continue };
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| 3 | `a`, `b` | what they are |`
        if cells.len() < 4 || cells[1].parse::<usize>().is_err() {
            continue;
        }
        let layer = cells[1].parse::<usize>().unwrap();
        let names: Vec<String> = cells[2]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        let layers = out.entry(root.clone()).or_default();
        if layers.len() <= layer {
            layers.resize(layer + 1, Vec::new());
        }
        layers[layer].extend(names);
    }
    out
}

/// The top-level modules of a crate: its module files' first segments and what its root
/// re-exports from another crate (`pub use sqlgrade_core::{…}`).
fn top_level_modules(krate: &Crate) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = krate
        .files
        .keys()
        .filter_map(|m| m.first().cloned())
        .collect();
    if let Some(root) = krate.modules.get(&Vec::new()) {
        for (name, path) in &root.reexports {
            if path.first().is_some_and(|p| p.starts_with("sqlgrade_")) {
                names.insert(name.clone());
            }
        }
    }
    names
}

/// Check one workspace crate against `ARCHITECTURE.md`: no import cycle between its files,
/// every top-level module in exactly one documented layer (and every documented name a module),
/// every import going to a lower layer.
fn check_crate(label: &str, root: &str, skip: &[&str]) {
    let layers = documented_layers();
    let Some(layers) = layers.get(root) else {
        panic!("ARCHITECTURE.md has no layer table under a heading ### `{root}`");
    };
    let krate = Crate::load_without(&repo().join(root), skip);
    let edges = assert_acyclic(label, &krate);
    let modules = top_level_modules(&krate);
    let mut documented = BTreeSet::new();
    for name in layers.iter().flatten() {
        assert!(
            documented.insert(name.clone()),
            "{label}: ARCHITECTURE.md lists `{name}` in two layers"
        );
    }
    // Every module file in a documented unit, except a group's own file that only declares
    // and re-exports its children (`stores/mod.rs`); every documented unit a module.
    let units: Vec<Vec<String>> = documented.iter().map(|n| unit_path(n)).collect();
    let missing: Vec<String> = krate
        .files
        .keys()
        .filter(|m| !m.is_empty() && unit_of(m, &units).is_none())
        .filter(|m| {
            let children: BTreeSet<&String> = krate
                .files
                .keys()
                .filter(|c| c.len() == m.len() + 1 && c.starts_with(m))
                .filter_map(|c| c.last())
                .collect();
            krate.modules[*m]
                .defines
                .iter()
                .any(|item| !children.contains(item))
        })
        .map(name)
        .collect();
    let stale: Vec<&String> = documented
        .iter()
        .filter(|n| {
            let path = unit_path(n);
            !(krate.files.contains_key(&path) || path.len() == 1 && modules.contains(&path[0]))
        })
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{label}: the layer table of ARCHITECTURE.md (### `{root}`) and the code disagree: \
         modules in no layer {missing:?}; listed but not modules {stale:?}"
    );
    let layers: Vec<Vec<&str>> = layers
        .iter()
        .map(|l| l.iter().map(String::as_str).collect())
        .collect();
    let layers: Vec<&[&str]> = layers.iter().map(Vec::as_slice).collect();
    assert_layers(label, &edges, &layers);
}

#[test]
fn core_has_no_io_dependencies() {
    let manifest = std::fs::read_to_string(repo().join("crates/core/Cargo.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&manifest).unwrap();
    let deps = manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .expect("[dependencies]");
    for forbidden in [
        "tokio",
        "reqwest",
        "rusqlite",
        "rdkafka",
        "clickhouse",
        "hyper",
        "axum",
        "moka",
        "governor",
        "opentelemetry",
        "libsqlite3-sys",
    ] {
        assert!(
            !deps.contains_key(forbidden),
            "sqlgrade-core must not depend on {forbidden}"
        );
    }
}

#[test]
fn testkit_depends_on_the_core_only() {
    let manifest = std::fs::read_to_string(repo().join("crates/testkit/Cargo.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&manifest).unwrap();
    let deps = manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .expect("[dependencies]");
    assert!(
        !deps.contains_key("sqlgrade"),
        "sqlgrade-testkit must not depend on the daemon (helpers that need its types live in \
         tests/support)"
    );
}

/// Every workspace crate has a layer table, and every crate root in the table is a crate.
#[test]
fn every_workspace_crate_is_checked() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&manifest).unwrap();
    let members: Vec<&str> = manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    let checked = [
        "src",
        "src/bin/sqlgrade",
        "crates/core/src",
        "crates/testkit/src",
    ];
    for member in &members {
        // A crate that exists for its tests (`crates/architecture`) has no modules to check.
        let lib = repo().join(member).join("src/lib.rs");
        if *member != "."
            && std::fs::read_to_string(&lib).is_ok_and(|text| {
                text.lines()
                    .all(|line| line.is_empty() || line.starts_with("//!"))
            })
        {
            continue;
        }
        let root = if *member == "." {
            "src".to_string()
        } else {
            format!("{member}/src")
        };
        assert!(
            checked.contains(&root.as_str()),
            "workspace member {member} is not checked"
        );
    }
    let documented = documented_layers();
    for root in documented.keys() {
        assert!(
            checked.contains(&root.as_str()),
            "ARCHITECTURE.md names {root}, which is not checked"
        );
    }
    assert_eq!(documented.len(), checked.len(), "{:?}", documented.keys());
}

#[test]
fn core_keeps_its_layers() {
    check_crate("sqlgrade-core", "crates/core/src", &[]);
}

#[test]
fn daemon_library_keeps_its_layers() {
    check_crate("sqlgrade", "src", &["bin"]);
}

/// Folders are layers too: no two folders of `src/` import each other (one may import the
/// other; a folder's files may import one another). A pair is reported with one import each way.
#[test]
fn no_two_folders_of_the_daemon_import_each_other() {
    let root = repo().join("src");
    let krate = Crate::load_without(&root, &["bin"]);
    let folder = |m: &ModPath| -> Option<String> {
        let first = m.first()?;
        root.join(first).is_dir().then(|| first.clone())
    };
    let mut arrows: BTreeMap<(String, String), String> = BTreeMap::new();
    for (from, tos) in krate.edges() {
        let Some(a) = folder(&from) else { continue };
        for (to, example) in tos {
            if let Some(b) = folder(&to)
                && a != b
            {
                arrows
                    .entry((a.clone(), b))
                    .or_insert_with(|| format!("{} -> {} ({example})", name(&from), name(&to)));
            }
        }
    }
    let pairs: Vec<String> = arrows
        .iter()
        .filter(|((a, b), _)| a < b && arrows.contains_key(&(b.clone(), a.clone())))
        .map(|((a, b), one)| format!("{a} <-> {b}: {one}; {}", arrows[&(b.clone(), a.clone())]))
        .collect();
    assert!(
        arrows.len() > 10,
        "the folders' imports were read: {arrows:?}"
    );
    assert!(
        pairs.is_empty(),
        "folders of src/ that import each other:\n{}",
        pairs.join("\n")
    );
}

#[test]
fn daemon_binary_keeps_its_layers() {
    check_crate("sqlgrade (binary)", "src/bin/sqlgrade", &[]);
}

#[test]
fn testkit_keeps_its_layers() {
    check_crate("sqlgrade-testkit", "crates/testkit/src", &[]);
}

#[test]
fn the_checker_sees_a_cycle() {
    // Two files that import each other, and a module file that only re-exports its child.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "pub mod child;\npub use child::Thing;\npub struct Root;\n",
    )
    .unwrap();
    std::fs::write(src.join("a/child.rs"), "pub struct Thing(crate::b::B);\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct B;\npub fn f(_: crate::a::Thing) {}\n",
    )
    .unwrap();
    let krate = Crate::load(src);
    let found = cycles(&krate.edges());
    assert_eq!(found.len(), 1, "{found:?}");
    let mut members: Vec<String> = found[0].iter().map(name).collect();
    members.sort();
    assert_eq!(members, vec!["a::child", "b"]);
    // Without the back edge there is none; the re-export alone is not an import.
    std::fs::write(src.join("b.rs"), "pub struct B;\n").unwrap();
    assert!(cycles(&Crate::load(src).edges()).is_empty());
}

/// The finding codes, as stored (`details.findings[].code`): the variants of
/// `stef::FindingCode`, read from its definition and written in snake case as serde does.
fn finding_codes() -> BTreeSet<String> {
    let path = repo().join("crates/core/src/stef/findings.rs");
    let file = syn::parse_file(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let variants = file
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Enum(e) if e.ident == "FindingCode" => Some(&e.variants),
            _ => None,
        })
        .expect("stef::FindingCode");
    variants
        .iter()
        .map(|v| {
            let mut snake = String::new();
            for (i, c) in v.ident.to_string().chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            snake
        })
        .collect()
}

/// The codes of the rows of the markdown tables in `text` whose first cell is a code
/// (`` | `code` | ``); `prefix` is what each table line starts with (`//! ` in module docs).
fn table_codes(text: &str, prefix: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix(prefix)?.strip_prefix("| `"))
        .filter_map(|rest| Some(rest.split_once("` |")?.0.to_string()))
        .filter(|code| code.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

/// The findings are listed in two places for two readers — the findings reference (for
/// users, with each check's measured precision) and the check modules' docs (for developers) —
/// and both must name every code the core can emit, and nothing else.
#[test]
fn the_findings_tables_name_every_finding_code() {
    let codes = finding_codes();
    assert!(codes.len() > 30, "{codes:?}");
    let section = std::fs::read_to_string(repo().join("docs/reference/findings.md")).unwrap();
    let mut module_docs = String::new();
    for file in ["stef/checks/mod.rs", "stef/result_checks.rs"] {
        module_docs
            .push_str(&std::fs::read_to_string(repo().join("crates/core/src").join(file)).unwrap());
    }
    for (place, listed) in [
        ("docs/reference/findings.md", table_codes(&section, "")),
        (
            "the docs of stef/checks/mod.rs and stef/result_checks.rs",
            table_codes(&module_docs, "//! "),
        ),
    ] {
        let missing: Vec<_> = codes.difference(&listed).collect();
        let unknown: Vec<_> = listed.difference(&codes).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "{place}: codes without a row {missing:?}; rows of no code {unknown:?}"
        );
    }
}

/// The module files that break the two-shapes rule today (define items *and* import from their
/// children). The list may only shrink: a new one fails the check, and so does a listed one
/// that keeps the rule now (take it off the list).
const TWO_SHAPES_DEBT: &[(&str, &str)] = &[];

/// Module files with children that define items and also import from a child (by `edges`:
/// re-exports of children are not imports).
fn two_shapes_violators(root: &str, skip: &[&str]) -> BTreeMap<String, String> {
    let krate = Crate::load_without(&repo().join(root), skip);
    let edges = krate.edges();
    let mut out = BTreeMap::new();
    for (module, file) in &krate.modules {
        let children: BTreeSet<&String> = krate
            .files
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| &m[module.len()])
            .collect();
        if children.is_empty() || module.is_empty() {
            continue;
        }
        let defines_items = file.defines.iter().any(|name| !children.contains(name));
        let imported_child = edges.get(module).and_then(|to| {
            to.iter()
                .find(|(target, _)| target.len() > module.len() && target.starts_with(module))
                .map(|(_, example)| example.clone())
        });
        if let (true, Some(example)) = (defines_items, imported_child) {
            out.insert(module.join("::"), example);
        }
    }
    out
}

#[test]
fn module_files_with_children_keep_one_of_two_shapes() {
    for (root, skip) in [
        ("crates/core/src", &[][..]),
        ("src", &["bin"][..]),
        ("src/bin/sqlgrade", &[][..]),
        ("crates/testkit/src", &[][..]),
    ] {
        let found = two_shapes_violators(root, skip);
        let debt: BTreeSet<&str> = TWO_SHAPES_DEBT
            .iter()
            .filter(|(r, _)| *r == root)
            .map(|(_, m)| *m)
            .collect();
        let new: Vec<String> = found
            .iter()
            .filter(|(m, _)| !debt.contains(m.as_str()))
            .map(|(m, example)| format!("{m} (imports {example})"))
            .collect();
        assert!(
            new.is_empty(),
            "{root}: these module files define items and import from their children; keep one \
             shape (ARCHITECTURE.md, \"Layers\"): move the items into a child, or the imports \
             out: {new:?}"
        );
        let paid: Vec<&&str> = debt.iter().filter(|m| !found.contains_key(**m)).collect();
        assert!(
            paid.is_empty(),
            "{root}: these keep the rule now; take them off TWO_SHAPES_DEBT: {paid:?}"
        );
    }
}

/// The integration test binaries (ARCHITECTURE.md, "Where to add … a test"): `tests/in_process/`
/// (one binary, its tests in parallel threads) holds no test that starts a real server or a
/// model; `tests/daemon/` (one binary of server tests) runs its tests one at a time, each holding
/// `one_at_a_time()` for its whole life; any other test that starts servers, sets a process-wide
/// setting or measures timing is a top-level `tests/*.rs` of its own, so `cargo test` runs it
/// after the other binaries, never beside them.
#[test]
fn test_groups_start_no_servers() {
    let mut offenders = Vec::new();
    for path in rust_files(&[repo().join("tests/in_process")]) {
        let text = std::fs::read_to_string(&path).expect("a test file");
        for needle in [
            "Harness::",
            "Servers::start",
            "ClickHouse::start",
            "ClickHouseCluster",
            "Tansu::start",
            "LlamaServer",
            "chromedriver",
            "set_var(",
            "set_global_default",
            ".init()",
        ] {
            if text.contains(needle) {
                offenders.push(format!("{} uses {needle}", path.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "tests that start servers, or set what the whole process shares, go in tests/daemon/ or \
         a top-level tests/*.rs of their own: {offenders:?}"
    );

    let mut unlocked = Vec::new();
    for path in rust_files(&[repo().join("tests/daemon")]) {
        let text = std::fs::read_to_string(&path).expect("a test file");
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let line = line.trim_start();
            if !(line.starts_with("#[test]") || line.starts_with("#[tokio::test")) {
                continue;
            }
            // The signature, then the body's first statement.
            let signature: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim_end().ends_with('{'))
                .collect();
            let first = lines.next().unwrap_or("").trim();
            if first != "let _servers = crate::one_at_a_time().await;" {
                unlocked.push(format!("{}: {signature:?}", path.display()));
            }
        }
    }
    assert!(
        unlocked.is_empty(),
        "every test of tests/daemon/ starts with `let _servers = crate::one_at_a_time().await;`, so \
         that no two of them run their servers at once: {unlocked:?}"
    );
}

/// Integration test binaries stay few (issue 77: each one links its crate and every
/// dependency again): a file `tests/*.rs` or a folder `tests/*/main.rs` of any workspace crate is
/// one binary. A new test is a module of an existing binary unless it starts servers of its own
/// or changes what the whole process shares (`test_groups_start_no_servers`).
#[test]
fn integration_test_binaries_stay_few() {
    const MOST: usize = 25;
    let mut binaries = Vec::new();
    for tests in [
        "tests",
        "crates/core/tests",
        "crates/testkit/tests",
        "crates/architecture/tests",
    ] {
        let Ok(entries) = std::fs::read_dir(repo().join(tests)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let binary = if path.is_dir() {
                path.join("main.rs").is_file()
            } else {
                path.extension().is_some_and(|e| e == "rs")
            };
            if binary {
                binaries.push(
                    path.strip_prefix(repo())
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                );
            }
        }
    }
    binaries.sort();
    assert!(
        binaries.len() <= MOST,
        "{} integration test binaries (at most {MOST}): {binaries:?}",
        binaries.len()
    );
}

/// The store's kind is matched in two places only: `stores::config`, which reads each kind's keys,
/// and `stores::open`, which builds the kind's writer and reader (ARCHITECTURE.md, "a store
/// kind"). Everything else takes the `Store`. Test modules (after `#[cfg(test)]`) may name
/// kinds to set them up.
#[test]
fn the_store_kind_is_matched_in_its_own_two_places() {
    let offenders = files_naming_outside(
        "SinkKind::",
        &["src/stores/config.rs", "src/stores/open.rs"],
    );
    assert!(
        offenders.is_empty(),
        "match the store's kind in src/stores/open.rs (Store's methods), not in {offenders:?}"
    );
}

/// The judge's kind is matched where its section is read and where the judge is built; every
/// other component takes the LLM kind's settings (`JudgeConfig::llm`) or the built judge.
#[test]
fn the_judge_kind_is_matched_in_its_own_two_places() {
    let offenders = files_naming_outside(
        "JudgeConfig::",
        &["src/llm/config.rs", "src/assembly/components.rs"],
    );
    assert!(
        offenders.is_empty(),
        "match the judge's kind in src/assembly/components.rs (build_judge), not in {offenders:?}"
    );
}

/// Config sections are read by serde per kind (issue 77): no section is converted from or into a
/// hand-kept "as written" struct (`#[serde(from = …)]`, `into`, `try_from`) — a section whose
/// `kind` chooses its keys implements `settings::KindedSettings` instead.
#[test]
fn config_sections_are_not_converted_by_hand() {
    let mut offenders = Vec::new();
    for pattern in ["serde(from", "into = \"", "try_from = \""] {
        offenders.extend(files_naming_outside(pattern, &[]));
    }
    assert!(
        offenders.is_empty(),
        "read the section per kind (settings::WrittenSection), not through a \
         conversion: {offenders:?}"
    );
}

/// The files under `src/` other than `allowed` whose non-test code names `pattern` (not as the
/// end of a longer name: `LlmJudgeConfig::` is not `JudgeConfig::`). Test files are not read.
fn files_naming_outside(pattern: &str, allowed: &[&str]) -> Vec<String> {
    let mut offenders = Vec::new();
    for path in rust_files(&[repo().join("src")]) {
        let relative = path.strip_prefix(repo()).expect("under the repository");
        if allowed.iter().any(|a| relative == Path::new(a)) || is_test_file(&path) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let named = code
            .match_indices(pattern)
            .any(|(at, _)| !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
        if named {
            offenders.push(relative.display().to_string());
        }
    }
    offenders.sort();
    offenders
}

/// Whether `path` holds a test module of its own (`tests.rs`, `*_tests.rs`).
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// Every `.rs` file under `roots`, recursively.
fn rust_files(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = roots.to_vec();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// No source file is longer than 1,000 lines before its test module (ARCHITECTURE.md): a longer
/// one is split along its seams. Test files (`tests.rs`, `*_tests.rs`) are not counted.
#[test]
fn no_source_file_passes_a_thousand_lines() {
    let roots = ["src", "crates/core/src", "crates/testkit/src"].map(|r| repo().join(r));
    let mut offenders = Vec::new();
    for path in rust_files(&roots) {
        if is_test_file(&path) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
        let lines = code.lines().count();
        if lines > 1000 {
            offenders.push(format!("{} ({lines} lines)", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "files over 1,000 lines: {offenders:?}"
    );
}
