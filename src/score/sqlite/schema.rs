//! Schemas read from files: Spider/BIRD `tables.json` documents and SQLite database files
//! (opened read-only), handed to the pure [`SchemaCatalog`] that ESM/ESM+ read.
//!
//! Introspection reads `sqlite_master` and the `table_info`, `index_list`, `index_info` and
//! `foreign_key_list` pragmas — only reads, on a connection opened with `SQLITE_OPEN_READ_ONLY`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sqlgrade_core::catalogue::{IntrospectedDb, SchemaCatalog, SchemaError};

/// Read and parse a `tables.json` file.
pub fn load_tables_json(path: &Path) -> Result<SchemaCatalog, SchemaError> {
    let text = std::fs::read_to_string(path).map_err(|source| SchemaError::Io {
        path: path.display().to_string(),
        source,
    })?;
    SchemaCatalog::parse_tables_json(&text)
}

/// For every database with a `<db_id>/<db_id>.sqlite` file under `root`, add NOT NULL and
/// single-column UNIQUE facts to `catalog` (and, for databases absent from `tables.json`, the
/// whole schema). Returns how many databases were introspected.
pub fn introspect_sqlite_dir(
    catalog: &mut SchemaCatalog,
    root: &Path,
) -> Result<usize, SchemaError> {
    let mut n = 0;
    let entries = std::fs::read_dir(root).map_err(|source| SchemaError::Io {
        path: root.display().to_string(),
        source,
    })?;
    for entry in entries.flatten() {
        let db_id = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path().join(format!("{db_id}.sqlite"));
        if path.is_file() {
            introspect_sqlite(catalog, &db_id, &path)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Introspect one SQLite file (opened read-only) for `db_id` into `catalog`.
pub fn introspect_sqlite(
    catalog: &mut SchemaCatalog,
    db_id: &str,
    path: &Path,
) -> Result<(), SchemaError> {
    catalog.merge_introspected(db_id, read_sqlite_facts(path)?);
    Ok(())
}

/// Tables, columns, primary and foreign keys, NOT NULL and single-column UNIQUE facts of one
/// SQLite file.
pub fn read_sqlite_facts(path: &Path) -> Result<IntrospectedDb, SchemaError> {
    let err = |e: rusqlite::Error| SchemaError::Sqlite {
        path: path.display().to_string(),
        source: Box::new(e),
    };
    super::configure();
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(err)?;
    let table_names: Vec<String> = {
        let mut stmt = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            )
            .map_err(err)?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)?
    };
    let mut not_null = BTreeSet::new();
    let mut unique = BTreeSet::new();
    let mut column_types = BTreeMap::new();
    let mut tables: Vec<(String, Vec<(String, bool)>)> = Vec::new();
    let mut foreign_keys: Vec<(String, String, String, String)> = Vec::new();
    for t in &table_names {
        let tl = t.to_lowercase();
        let quoted = t.replace('"', "\"\"");
        let mut cols = Vec::new();
        {
            let mut stmt = conn
                .prepare(&format!("PRAGMA table_info(\"{quoted}\")"))
                .map_err(err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(5)?,
                    ))
                })
                .map_err(err)?;
            for row in rows {
                let (name, declared, notnull, pk) = row.map_err(err)?;
                if let Some(declared) = declared.filter(|d| !d.is_empty()) {
                    column_types.insert(format!("{tl}.{}", name.to_lowercase()), declared);
                }
                if notnull != 0 {
                    not_null.insert(format!("{tl}.{}", name.to_lowercase()));
                }
                cols.push((name, pk != 0));
            }
        }
        let pk_cols: Vec<&String> = cols.iter().filter(|c| c.1).map(|c| &c.0).collect();
        if let [only] = pk_cols.as_slice() {
            unique.insert(format!("{tl}.{}", only.to_lowercase()));
        }
        for col in unique_index_columns(&conn, &quoted).map_err(err)? {
            unique.insert(format!("{tl}.{}", col.to_lowercase()));
        }
        {
            let mut stmt = conn
                .prepare(&format!("PRAGMA foreign_key_list(\"{quoted}\")"))
                .map_err(err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                    ))
                })
                .map_err(err)?;
            for row in rows {
                let (rt, from, to) = row.map_err(err)?;
                foreign_keys.push((t.clone(), from, rt, to.unwrap_or_default()));
            }
        }
        tables.push((t.clone(), cols));
    }
    Ok(IntrospectedDb {
        tables,
        column_types,
        foreign_keys,
        not_null,
        unique,
    })
}

/// The columns of `quoted`'s single-column UNIQUE indexes (`quoted`: the table's name with its
/// double quotes doubled).
fn unique_index_columns(
    conn: &rusqlite::Connection,
    quoted: &str,
) -> Result<Vec<String>, rusqlite::Error> {
    let mut stmt = conn.prepare(&format!("PRAGMA index_list(\"{quoted}\")"))?;
    let idx: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut columns = Vec::new();
    for (name, is_unique) in idx {
        if is_unique == 0 {
            continue;
        }
        let q = name.replace('"', "\"\"");
        let mut s = conn.prepare(&format!("PRAGMA index_info(\"{q}\")"))?;
        let members: Vec<Option<String>> = s
            .query_map([], |r| r.get::<_, Option<String>>(2))?
            .collect::<Result<_, _>>()?;
        if let [Some(col)] = members.as_slice() {
            columns.push(col.clone());
        }
    }
    Ok(columns)
}

/// The schemas of the gold metrics: `tables.json` files first, then, when given, the SQLite
/// catalogue (`<db_id>/<db_id>.sqlite`) for NOT NULL / UNIQUE facts and for databases missing
/// from `tables.json`.
pub fn load_catalog(
    tables_json: &[&Path],
    databases: Option<&Path>,
) -> Result<SchemaCatalog, SchemaError> {
    let mut catalog = SchemaCatalog::new();
    for p in tables_json {
        catalog.extend(load_tables_json(p)?);
    }
    if let Some(dir) = databases {
        introspect_sqlite_dir(&mut catalog, dir)?;
    }
    Ok(catalog)
}

/// Largest catalogue file read (a bigger one is refused, not read into memory).
pub const MAX_CATALOGUE_BYTES: u64 = 64 * 1024 * 1024;

/// Read one STEF catalogue file, by its extension: `.sqlite`, `.sqlite3`, `.db` — a SQLite file
/// introspected read-only, whose `db_id` is the file stem; `.toml` — the small catalogue form;
/// `.json` — a Spider/BIRD `tables.json` (a JSON array) or the small form (an object).
pub fn load_catalogue_file(path: &Path) -> Result<SchemaCatalog, SchemaError> {
    let io = |source: std::io::Error| SchemaError::Io {
        path: path.display().to_string(),
        source,
    };
    let refused = |reason: String| SchemaError::Refused {
        path: path.display().to_string(),
        reason,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > MAX_CATALOGUE_BYTES {
        return Err(refused(format!(
            "{size} bytes, more than the {MAX_CATALOGUE_BYTES}-byte limit for a catalogue"
        )));
    }
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let in_file = |e: SchemaError| e.in_file(&path.display().to_string());
    match extension.as_deref() {
        Some("sqlite" | "sqlite3" | "db") => {
            let db_id = path
                .file_stem()
                .and_then(|s| s.to_str())
                .ok_or_else(|| refused("the file name is not UTF-8".into()))?
                .to_string();
            let mut catalog = SchemaCatalog::new();
            introspect_sqlite(&mut catalog, &db_id, path)?;
            Ok(catalog)
        }
        Some("toml") => {
            let text = std::fs::read_to_string(path).map_err(io)?;
            SchemaCatalog::parse_simple(&text, false).map_err(in_file)
        }
        Some("json") => {
            let text = std::fs::read_to_string(path).map_err(io)?;
            if text.trim_start().starts_with('[') {
                SchemaCatalog::parse_tables_json(&text).map_err(in_file)
            } else {
                SchemaCatalog::parse_simple(&text, true).map_err(in_file)
            }
        }
        _ => Err(refused(
            "unknown catalogue format (expected .json, .toml, .sqlite, .sqlite3 or .db)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// Each way a catalogue file fails names the file and keeps the reader's own error as its
    /// source: the operating system's, the JSON or TOML parser's, SQLite's.
    #[test]
    fn a_catalogue_that_cannot_be_read_says_why_and_keeps_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let error = load_catalogue_file(&missing).unwrap_err();
        assert!(error.to_string().starts_with("cannot read "), "{error}");
        let io = error
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );

        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "[{\"db_id\": ").unwrap();
        let error = load_catalogue_file(&broken).unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("invalid tables.json: {}: ", broken.display())),
            "{text}"
        );
        assert!(
            error
                .source()
                .is_some_and(|s| s.downcast_ref::<serde_json::Error>().is_some()),
            "{error:?}"
        );
        let broken = dir.path().join("broken.toml");
        std::fs::write(&broken, "db_id = ").unwrap();
        let error = load_catalogue_file(&broken).unwrap_err();
        assert!(
            error
                .source()
                .is_some_and(|s| s.downcast_ref::<toml::de::Error>().is_some()),
            "{error:?}"
        );

        let not_sqlite = dir.path().join("shop.sqlite");
        std::fs::write(&not_sqlite, "not a database").unwrap();
        let error = load_catalogue_file(&not_sqlite).unwrap_err();
        assert!(
            error.to_string().starts_with("cannot introspect "),
            "{error}"
        );
        assert!(
            error
                .source()
                .is_some_and(|s| s.downcast_ref::<rusqlite::Error>().is_some()),
            "{error:?}"
        );

        let unknown = dir.path().join("shop.csv");
        std::fs::write(&unknown, "a,b").unwrap();
        let error = load_catalogue_file(&unknown).unwrap_err();
        assert!(
            error.to_string().contains("unknown catalogue format"),
            "{error}"
        );
        assert!(error.source().is_none());
    }
}
