//! Database schemas, by `db_id`: table and column names with their types, primary and foreign
//! keys, and the constraint facts (NOT NULL, UNIQUE) that `tables.json` lacks and that are
//! introspected from a SQLite file when one is available.
//!
//! Two readers share them: the gold metrics ESM and ESM+, and the STEF catalogue checks (unknown
//! tables and columns, joins off the declared keys, aggregates over text, …). Sources: Spider/BIRD
//! `tables.json` ([`SchemaCatalog::parse_tables_json`]), a SQLite file
//! ([`SchemaCatalog::merge_introspected`]), and the small documented form of `docs/reference/output.md`
//! ([`SchemaCatalog::parse_simple`], JSON or TOML).
//!
//! Reading files happens at the edge (the daemon reads files and introspects SQLite databases
//! into [`IntrospectedDb`]); this module parses and merges, and its readers only look up.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::words::{identifier_words, text_words};

/// Why a schema could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// Path.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file was not read: too large, of an unknown kind, a name that is not UTF-8.
    #[error("cannot read {path}: {reason}")]
    Refused {
        /// Path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The text is not JSON or TOML (of the expected shape).
    #[error("invalid tables.json: {}{source}", file_prefix(file.as_deref()))]
    Parse {
        /// The file, when the reader knows it.
        file: Option<String>,
        /// The JSON or TOML reader's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The file is not a valid `tables.json` (or catalogue): what is wrong in it.
    #[error("invalid tables.json: {0}")]
    Format(String),
    /// The SQLite file could not be introspected.
    #[error("cannot introspect {path}: {source}")]
    Sqlite {
        /// Path.
        path: String,
        /// SQLite's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SchemaError {
    /// [`SchemaError::Parse`] of a text whose file is not known here.
    fn parse(source: impl std::error::Error + Send + Sync + 'static) -> SchemaError {
        SchemaError::Parse {
            file: None,
            source: Box::new(source),
        }
    }

    /// The same error, naming `path` as the file it is in (format errors only).
    pub fn in_file(self, path: &str) -> SchemaError {
        match self {
            SchemaError::Format(message) => SchemaError::Format(format!("{path}: {message}")),
            SchemaError::Parse { file: None, source } => SchemaError::Parse {
                file: Some(path.to_string()),
                source,
            },
            other => other,
        }
    }
}

/// `"<file>: "` when the file is known.
fn file_prefix(file: Option<&str>) -> String {
    file.map(|f| format!("{f}: ")).unwrap_or_default()
}

/// One column, by (table index, column name) as written in the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Index of the table in [`DbSchema::tables`].
    pub table: usize,
    /// Original column name.
    pub name: String,
    /// Declared type, in classes ([`ColumnType::Unknown`] when the source does not say).
    pub ty: ColumnType,
    /// The column's natural-language name when the catalogue gives one that says more than the
    /// name (`tables.json`'s `column_names`: "average scores in Reading" for `AvgScrRead`);
    /// `None` when it only repeats the name.
    pub natural: Option<String>,
}

/// A column's declared type, as classes that the checks can reason about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ColumnType {
    /// Text (`text`, `varchar(…)`, `char`, `clob`).
    Text,
    /// Numbers (`number`, `integer`, `real`, `numeric(…)`, `decimal`, `float`, `double`).
    Number,
    /// Dates and times (`date`, `datetime`, `time`, `timestamp`).
    Date,
    /// Booleans (`boolean`, `bool`).
    Boolean,
    /// Binary (`blob`).
    Blob,
    /// Not declared, or a type name that says nothing (`others`).
    #[default]
    Unknown,
}

impl ColumnType {
    /// Classify a declared type name: `tables.json`'s (`text`, `number`, `time`, `boolean`,
    /// `others`; BIRD's `integer`, `real`, `date`, `datetime`) or a SQL one, by SQLite's
    /// affinity rules with dates and booleans told apart first.
    pub fn from_declared(declared: &str) -> ColumnType {
        let t = declared.trim().to_ascii_lowercase();
        if t.is_empty() || t == "others" {
            ColumnType::Unknown
        } else if t.contains("date") || t.contains("time") {
            ColumnType::Date
        } else if t.starts_with("bool") {
            ColumnType::Boolean
        } else if t.contains("int") {
            ColumnType::Number
        } else if t.contains("char") || t.contains("clob") || t.contains("text") {
            ColumnType::Text
        } else if t.contains("blob") {
            ColumnType::Blob
        } else if ["real", "floa", "doub", "num", "dec"]
            .iter()
            .any(|p| t.contains(p))
        {
            ColumnType::Number
        } else {
            ColumnType::Unknown
        }
    }

    /// Stored name (findings' evidence).
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::Text => "text",
            ColumnType::Number => "number",
            ColumnType::Date => "date",
            ColumnType::Boolean => "boolean",
            ColumnType::Blob => "blob",
            ColumnType::Unknown => "unknown",
        }
    }
}

/// Where the constraint facts (NOT NULL / UNIQUE) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintSource {
    /// Only `tables.json`: PK/FK known, NOT NULL and UNIQUE unknown beyond single-column PKs.
    TablesJson,
    /// Introspected from the SQLite file (`PRAGMA table_info`, `index_list`, `foreign_key_list`).
    Sqlite,
}

/// Schema of one database.
#[derive(Debug, Clone)]
pub struct DbSchema {
    /// Database id.
    pub db_id: String,
    /// Original table names.
    pub tables: Vec<String>,
    /// Columns in `tables.json` order (index 0 is `*`, stored with `table = usize::MAX`).
    pub columns: Vec<Column>,
    /// Foreign keys as column-index pairs `(from, to)`, in file order.
    pub foreign_keys: Vec<(usize, usize)>,
    /// Primary keys: each entry is the column indices of one table's key (len > 1 = composite).
    pub primary_keys: Vec<Vec<usize>>,
    /// Lowercased `table.column` keys known NOT NULL.
    pub not_null: BTreeSet<String>,
    /// Lowercased `table.column` keys with a single-column UNIQUE index or single-column PK.
    pub unique: BTreeSet<String>,
    /// Where NOT NULL/UNIQUE facts came from.
    pub constraints: ConstraintSource,
    /// The names split into comparable words ([`SchemaWords`]), built on first use and kept
    /// with the schema: once per catalogue load, not once per event.
    pub words: OnceLock<SchemaWords>,
    /// Per table, the indices of its columns in [`DbSchema::columns`] order, built on first
    /// use ([`DbSchema::table_columns`]): a column lookup reads one table's columns, not the
    /// database's.
    pub columns_by_table: OnceLock<Vec<Vec<usize>>>,
}

/// Every table and column name of one database as comparable words ([`crate::words`]): what
/// question grounding (`stef::grounding`) matches a question's phrases with.
#[derive(Debug, Clone, Default)]
pub struct SchemaWords {
    /// Per table (as [`DbSchema::tables`]): the words of its name.
    pub tables: Vec<Vec<String>>,
    /// Per column (as [`DbSchema::columns`]; empty for `*`): the words of its name as written.
    pub written: Vec<Vec<String>>,
    /// Per column: the words of its natural-language name (empty when it has none).
    pub natural: Vec<Vec<String>>,
    /// Every phrase of two words or more (a column's natural or written name), by its first
    /// word: `(column, natural)` — so a question is matched with one lookup per word instead of
    /// one scan of every column.
    pub phrases: FxHashMap<String, Vec<(usize, bool)>>,
    /// Columns by their written name, lowercased.
    pub by_name: FxHashMap<String, Vec<usize>>,
}

impl SchemaWords {
    fn of(schema: &DbSchema) -> SchemaWords {
        let mut words = SchemaWords {
            tables: schema.tables.iter().map(|t| identifier_words(t)).collect(),
            written: schema
                .columns
                .iter()
                .map(|c| {
                    if c.table == usize::MAX {
                        Vec::new()
                    } else {
                        identifier_words(&c.name)
                    }
                })
                .collect(),
            natural: schema
                .columns
                .iter()
                .map(|c| c.natural.as_deref().map(text_words).unwrap_or_default())
                .collect(),
            phrases: FxHashMap::default(),
            by_name: FxHashMap::default(),
        };
        for (i, c) in schema.columns.iter().enumerate() {
            if c.table == usize::MAX {
                continue;
            }
            words
                .by_name
                .entry(c.name.to_lowercase())
                .or_default()
                .push(i);
            for (natural, phrase) in [(true, words.natural.get(i)), (false, words.written.get(i))] {
                if let Some(first) = phrase.filter(|p| p.len() >= 2).and_then(|p| p.first()) {
                    words
                        .phrases
                        .entry(first.clone())
                        .or_default()
                        .push((i, natural));
                }
            }
        }
        words
    }

    /// Heap bytes held (for the memory figure per 100 tables in `CHANGELOG.md`).
    pub fn heap_bytes(&self) -> usize {
        let list = |l: &Vec<Vec<String>>| {
            l.capacity() * std::mem::size_of::<Vec<String>>()
                + l.iter()
                    .map(|w| {
                        w.capacity() * std::mem::size_of::<String>()
                            + w.iter().map(String::capacity).sum::<usize>()
                    })
                    .sum::<usize>()
        };
        let map = |m: &FxHashMap<String, Vec<usize>>| {
            m.capacity() * (std::mem::size_of::<String>() + std::mem::size_of::<Vec<usize>>() + 8)
                + m.iter()
                    .map(|(k, v)| k.capacity() + v.capacity() * std::mem::size_of::<usize>())
                    .sum::<usize>()
        };
        let phrases = self.phrases.capacity()
            * (std::mem::size_of::<String>() + std::mem::size_of::<Vec<(usize, bool)>>() + 8)
            + self
                .phrases
                .iter()
                .map(|(k, v)| k.capacity() + v.capacity() * std::mem::size_of::<(usize, bool)>())
                .sum::<usize>();
        list(&self.tables)
            + list(&self.written)
            + list(&self.natural)
            + map(&self.by_name)
            + phrases
    }
}

impl DbSchema {
    /// The names as comparable words, built on first use ([`SchemaWords`]).
    pub fn words(&self) -> &SchemaWords {
        self.words.get_or_init(|| SchemaWords::of(self))
    }

    /// Lowercased table name → lowercased column names, in order (process_sql's `schema`).
    pub fn lower_columns(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in &self.tables {
            out.entry(t.to_lowercase()).or_default();
        }
        for c in &self.columns {
            if let Some(t) = self.tables.get(c.table) {
                out.entry(t.to_lowercase())
                    .or_default()
                    .push(c.name.to_lowercase());
            }
        }
        out
    }

    /// Lowercased `table.column` of a column index (`None` for `*`).
    pub fn column_key(&self, idx: usize) -> Option<String> {
        let c = self.columns.get(idx)?;
        let t = self.tables.get(c.table)?;
        Some(format!("{}.{}", t.to_lowercase(), c.name.to_lowercase()))
    }

    /// Whether the lowercased `table.column` is a single-column primary key.
    pub fn is_single_pk(&self, key: &str) -> bool {
        self.primary_keys.iter().any(|pk| {
            pk.len() == 1 && pk.first().and_then(|&i| self.column_key(i)).as_deref() == Some(key)
        })
    }

    /// Whether the lowercased `table.column` is part of some primary key.
    pub fn in_any_pk(&self, key: &str) -> bool {
        self.primary_keys.iter().any(|pk| {
            pk.iter()
                .any(|&i| self.column_key(i).as_deref() == Some(key))
        })
    }

    /// UNIQUE fact (single-column UNIQUE index or single-column PK).
    pub fn is_unique(&self, key: &str) -> bool {
        self.unique.contains(key) || self.is_single_pk(key)
    }

    /// NOT NULL fact (declared NOT NULL or single-column PK; see esm_plus.md A19).
    pub fn is_not_null(&self, key: &str) -> bool {
        self.not_null.contains(key) || self.is_single_pk(key)
    }

    /// Foreign keys as lowercased `(fk table.column, referenced table.column)` pairs.
    pub fn fk_pairs(&self) -> Vec<(String, String)> {
        self.foreign_keys
            .iter()
            .filter_map(|&(a, b)| Some((self.column_key(a)?, self.column_key(b)?)))
            .collect()
    }

    /// Index of a table by name (case-insensitive).
    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.tables
            .iter()
            .position(|t| t.eq_ignore_ascii_case(name))
    }

    /// The column `name` of table `table` (case-insensitive): its index in [`DbSchema::columns`].
    pub fn column_index(&self, table: usize, name: &str) -> Option<usize> {
        self.table_columns(table).iter().copied().find(|&i| {
            self.columns
                .get(i)
                .is_some_and(|c| c.name.eq_ignore_ascii_case(name))
        })
    }

    /// The indices of table `table`'s columns, in [`DbSchema::columns`] order (empty for an
    /// unknown table, and for `usize::MAX`, the `*` entry's).
    pub fn table_columns(&self, table: usize) -> &[usize] {
        let by_table = self.columns_by_table.get_or_init(|| {
            let mut by_table = vec![Vec::new(); self.tables.len()];
            for (i, c) in self.columns.iter().enumerate() {
                if let Some(columns) = by_table.get_mut(c.table) {
                    columns.push(i);
                }
            }
            by_table
        });
        by_table.get(table).map_or(&[], Vec::as_slice)
    }

    /// Columns of table `table`, with their indices.
    pub fn columns_of(&self, table: usize) -> impl Iterator<Item = (usize, &Column)> {
        self.table_columns(table)
            .iter()
            .filter_map(|&i| Some((i, self.columns.get(i)?)))
    }

    /// Whether columns `a` and `b` (indices) are joined by a declared foreign key, either way.
    pub fn is_foreign_key_pair(&self, a: usize, b: usize) -> bool {
        self.foreign_keys
            .iter()
            .any(|&(x, y)| (x, y) == (a, b) || (x, y) == (b, a))
    }

    /// Whether column `idx` is (part of) a primary key.
    pub fn is_primary_key_column(&self, idx: usize) -> bool {
        self.primary_keys.iter().any(|pk| pk.contains(&idx))
    }

    fn from_json(entry: &Value) -> Result<DbSchema, SchemaError> {
        let fmt = |m: &str| SchemaError::Format(m.to_string());
        let db_id = entry["db_id"]
            .as_str()
            .ok_or_else(|| fmt("db_id"))?
            .to_string();
        let tables: Vec<String> = entry["table_names_original"]
            .as_array()
            .ok_or_else(|| fmt("table_names_original"))?
            .iter()
            .map(|t| t.as_str().unwrap_or_default().to_string())
            .collect();
        let types = entry["column_types"].as_array();
        let natural = entry["column_names"].as_array();
        let columns: Vec<Column> = entry["column_names_original"]
            .as_array()
            .ok_or_else(|| fmt("column_names_original"))?
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let t = c.get(0).and_then(Value::as_i64).unwrap_or(-1);
                let name = c
                    .get(1)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let natural = natural
                    .and_then(|n| n.get(i))
                    .and_then(|n| n.get(1))
                    .and_then(Value::as_str)
                    .and_then(|n| natural_name(&name, n));
                Column {
                    table: usize::try_from(t).unwrap_or(usize::MAX),
                    name,
                    ty: types
                        .and_then(|ts| ts.get(i))
                        .and_then(Value::as_str)
                        .map(ColumnType::from_declared)
                        .unwrap_or_default(),
                    natural,
                }
            })
            .collect();
        let as_idx = |v: &Value| v.as_u64().and_then(|n| usize::try_from(n).ok());
        let foreign_keys = entry["foreign_keys"]
            .as_array()
            .map(|fks| {
                fks.iter()
                    .filter_map(|p| Some((as_idx(p.get(0)?)?, as_idx(p.get(1)?)?)))
                    .collect()
            })
            .unwrap_or_default();
        let primary_keys = entry["primary_keys"]
            .as_array()
            .map(|pks| {
                pks.iter()
                    .map(|p| match p {
                        Value::Array(items) => items.iter().filter_map(as_idx).collect(),
                        other => as_idx(other).into_iter().collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(DbSchema {
            db_id,
            tables,
            columns,
            foreign_keys,
            primary_keys,
            not_null: BTreeSet::new(),
            unique: BTreeSet::new(),
            constraints: ConstraintSource::TablesJson,
            words: OnceLock::new(),
            columns_by_table: OnceLock::new(),
        })
    }
}

/// Facts read from a database file, in the file's own spelling (see
/// [`SchemaCatalog::merge_introspected`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntrospectedDb {
    /// Tables in file order, each with its columns in order and whether each is in the
    /// primary key.
    pub tables: Vec<(String, Vec<(String, bool)>)>,
    /// Declared column types by lowercased `table.column` (as written in `CREATE TABLE`).
    pub column_types: BTreeMap<String, String>,
    /// Foreign keys `(table, column, referenced table, referenced column)`.
    pub foreign_keys: Vec<(String, String, String, String)>,
    /// `table.column` (lowercased) declared NOT NULL.
    pub not_null: BTreeSet<String>,
    /// `table.column` (lowercased) unique on its own (single-column PK or UNIQUE index).
    pub unique: BTreeSet<String>,
}

/// Schemas of every known database, by `db_id`.
#[derive(Debug, Clone, Default)]
pub struct SchemaCatalog {
    dbs: FxHashMap<String, DbSchema>,
}

impl SchemaCatalog {
    /// An empty catalogue.
    pub fn new() -> SchemaCatalog {
        SchemaCatalog::default()
    }

    /// Parse a Spider/BIRD `tables.json` document.
    pub fn parse_tables_json(text: &str) -> Result<SchemaCatalog, SchemaError> {
        let v: Value = serde_json::from_str(text).map_err(SchemaError::parse)?;
        let arr = v
            .as_array()
            .ok_or_else(|| SchemaError::Format("expected a JSON array".into()))?;
        let mut dbs = FxHashMap::default();
        for entry in arr {
            let s = DbSchema::from_json(entry)?;
            dbs.insert(s.db_id.clone(), s);
        }
        Ok(SchemaCatalog { dbs })
    }

    /// Parse the small catalogue form (`docs/reference/output.md`, "Schema catalogues"), as JSON (`json = true`) or
    /// TOML: one database (`db_id`, `tables`) or several (`databases = [...]`), each table with
    /// `name`, `columns` (`name`, optional `type`, `references = "table.column"`, `not_null`,
    /// `unique`) and an optional `primary_key` list. Unknown keys, duplicate names and
    /// references to columns that do not exist are errors.
    pub fn parse_simple(text: &str, json: bool) -> Result<SchemaCatalog, SchemaError> {
        let file: SimpleFile = if json {
            serde_json::from_str(text).map_err(SchemaError::parse)?
        } else {
            toml::from_str(text).map_err(SchemaError::parse)?
        };
        let mut dbs = file.databases;
        match (file.db_id, file.tables) {
            (Some(db_id), tables) => dbs.push(SimpleDb { db_id, tables }),
            (None, tables) if !tables.is_empty() => {
                return Err(SchemaError::Format(
                    "`tables` without `db_id` (name the database)".into(),
                ));
            }
            (None, _) => {}
        }
        if dbs.is_empty() {
            return Err(SchemaError::Format("no database in the catalogue".into()));
        }
        let mut catalog = SchemaCatalog::new();
        for db in dbs {
            if catalog.get(&db.db_id).is_some() {
                return Err(SchemaError::Format(format!("database {} twice", db.db_id)));
            }
            catalog.insert(db.into_schema()?);
        }
        Ok(catalog)
    }

    /// Database ids, sorted.
    pub fn db_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.dbs.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// The database id when the catalogue holds exactly one.
    pub fn only_db_id(&self) -> Option<&str> {
        match self.dbs.len() {
            1 => self.dbs.keys().next().map(String::as_str),
            _ => None,
        }
    }

    /// Add (or replace) one database schema.
    pub fn insert(&mut self, schema: DbSchema) {
        self.dbs.insert(schema.db_id.clone(), schema);
    }

    /// Merge another catalogue into this one.
    pub fn extend(&mut self, other: SchemaCatalog) {
        self.dbs.extend(other.dbs);
    }

    /// The schema of `db_id`.
    pub fn get(&self, db_id: &str) -> Option<&DbSchema> {
        self.dbs.get(db_id)
    }

    /// Number of databases.
    pub fn len(&self) -> usize {
        self.dbs.len()
    }

    /// Whether the catalogue is empty.
    pub fn is_empty(&self) -> bool {
        self.dbs.is_empty()
    }

    /// Merge what was read from a database file (the daemon introspects SQLite files): NOT NULL
    /// and single-column UNIQUE facts for a database `tables.json` already describes, or the
    /// whole schema for one it does not.
    pub fn merge_introspected(&mut self, db_id: &str, facts: IntrospectedDb) {
        let IntrospectedDb {
            tables: cols_of,
            column_types,
            foreign_keys: fks,
            not_null,
            unique,
        } = facts;
        let declared = |t: &str, c: &str| {
            column_types
                .get(&format!("{}.{}", t.to_lowercase(), c.to_lowercase()))
                .map(|d| ColumnType::from_declared(d))
                .unwrap_or_default()
        };
        let schema = match self.dbs.get_mut(db_id) {
            Some(s) => s,
            None => {
                // Build the whole schema from the file.
                let mut tables = Vec::new();
                let mut columns = vec![Column {
                    table: usize::MAX,
                    name: "*".into(),
                    ty: ColumnType::Unknown,
                    natural: None,
                }];
                let mut primary_keys = Vec::new();
                for (ti, (t, cols)) in cols_of.iter().enumerate() {
                    tables.push(t.clone());
                    let mut pk = Vec::new();
                    for (c, is_pk) in cols {
                        if *is_pk {
                            pk.push(columns.len());
                        }
                        columns.push(Column {
                            table: ti,
                            name: c.clone(),
                            ty: declared(t, c),
                            natural: None,
                        });
                    }
                    if !pk.is_empty() {
                        primary_keys.push(pk);
                    }
                }
                let find = |t: &str, c: &str| {
                    let ti = tables.iter().position(|x| x.eq_ignore_ascii_case(t))?;
                    columns
                        .iter()
                        .position(|col| col.table == ti && col.name.eq_ignore_ascii_case(c))
                };
                let foreign_keys = fks
                    .iter()
                    .filter_map(|(t, f, rt, to)| Some((find(t, f)?, find(rt, to)?)))
                    .collect();
                self.dbs.insert(
                    db_id.to_string(),
                    DbSchema {
                        db_id: db_id.to_string(),
                        tables,
                        columns,
                        foreign_keys,
                        primary_keys,
                        not_null: BTreeSet::new(),
                        unique: BTreeSet::new(),
                        constraints: ConstraintSource::Sqlite,
                        words: OnceLock::new(),
                        columns_by_table: OnceLock::new(),
                    },
                );
                match self.dbs.get_mut(db_id) {
                    Some(s) => s,
                    None => return,
                }
            }
        };
        // Types the schema file left open come from the database's declarations.
        for i in 0..schema.columns.len() {
            let (table, name, ty) = {
                let c = &schema.columns[i];
                (c.table, c.name.clone(), c.ty)
            };
            if ty == ColumnType::Unknown
                && let Some(t) = schema.tables.get(table)
            {
                let found = declared(t, &name);
                if let Some(c) = schema.columns.get_mut(i) {
                    c.ty = found;
                }
            }
        }
        schema.not_null = not_null;
        schema.unique = unique;
        schema.constraints = ConstraintSource::Sqlite;
        // Names did not change, but keep the index honest should a merge ever add columns.
        schema.words = OnceLock::new();
        schema.columns_by_table = OnceLock::new();
    }
}

/// The small catalogue form: one database or several.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SimpleFile {
    #[serde(default)]
    databases: Vec<SimpleDb>,
    #[serde(default)]
    db_id: Option<String>,
    #[serde(default)]
    tables: Vec<SimpleTable>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SimpleDb {
    db_id: String,
    tables: Vec<SimpleTable>,
}

/// A natural-language name worth keeping: one that is not the written name again (case,
/// spacing and underscores aside).
fn natural_name(name: &str, natural: &str) -> Option<String> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let natural = natural.trim();
    (!natural.is_empty() && squash(name) != squash(natural)).then(|| natural.to_string())
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SimpleTable {
    name: String,
    columns: Vec<SimpleColumn>,
    #[serde(default)]
    primary_key: Vec<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SimpleColumn {
    name: String,
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    references: Option<String>,
    #[serde(default)]
    not_null: bool,
    #[serde(default)]
    unique: bool,
    /// What the column holds, in words ("mailing street address, abbreviated"): matched with
    /// the question's phrases like `tables.json`'s natural column names.
    #[serde(default)]
    description: Option<String>,
}

impl SimpleDb {
    fn into_schema(self) -> Result<DbSchema, SchemaError> {
        let fmt = |m: String| SchemaError::Format(format!("database {}: {m}", self.db_id));
        let mut tables: Vec<String> = Vec::with_capacity(self.tables.len());
        let mut columns = vec![Column {
            table: usize::MAX,
            name: "*".into(),
            ty: ColumnType::Unknown,
            natural: None,
        }];
        let mut primary_keys = Vec::new();
        let mut not_null = BTreeSet::new();
        let mut unique = BTreeSet::new();
        let mut pending_fks: Vec<(usize, &str)> = Vec::new();
        for (ti, table) in self.tables.iter().enumerate() {
            if tables.iter().any(|t| t.eq_ignore_ascii_case(&table.name)) {
                return Err(fmt(format!("table {} twice", table.name)));
            }
            tables.push(table.name.clone());
            let first = columns.len();
            for c in &table.columns {
                if columns[first..]
                    .iter()
                    .any(|x| x.name.eq_ignore_ascii_case(&c.name))
                {
                    return Err(fmt(format!("column {}.{} twice", table.name, c.name)));
                }
                let key = format!("{}.{}", table.name.to_lowercase(), c.name.to_lowercase());
                if c.not_null {
                    not_null.insert(key.clone());
                }
                if c.unique {
                    unique.insert(key);
                }
                if let Some(target) = &c.references {
                    pending_fks.push((columns.len(), target.as_str()));
                }
                columns.push(Column {
                    table: ti,
                    name: c.name.clone(),
                    ty: c
                        .ty
                        .as_deref()
                        .map(ColumnType::from_declared)
                        .unwrap_or_default(),
                    natural: c
                        .description
                        .as_deref()
                        .and_then(|d| natural_name(&c.name, d)),
                });
            }
            let mut pk = Vec::new();
            for k in &table.primary_key {
                let idx = columns[first..]
                    .iter()
                    .position(|x| x.name.eq_ignore_ascii_case(k))
                    .ok_or_else(|| {
                        fmt(format!("primary key {}.{k} is not a column", table.name))
                    })?;
                pk.push(first + idx);
            }
            if !pk.is_empty() {
                primary_keys.push(pk);
            }
        }
        let mut foreign_keys = Vec::new();
        for (from, target) in pending_fks {
            let (t, c) = target
                .split_once('.')
                .ok_or_else(|| fmt(format!("reference {target} is not table.column")))?;
            let ti = tables
                .iter()
                .position(|x| x.eq_ignore_ascii_case(t))
                .ok_or_else(|| fmt(format!("reference {target}: no table {t}")))?;
            let to = columns
                .iter()
                .position(|x| x.table == ti && x.name.eq_ignore_ascii_case(c))
                .ok_or_else(|| fmt(format!("reference {target}: no column {c}")))?;
            foreign_keys.push((from, to));
        }
        Ok(DbSchema {
            db_id: self.db_id.clone(),
            tables,
            columns,
            foreign_keys,
            primary_keys,
            not_null,
            unique,
            constraints: ConstraintSource::TablesJson,
            words: OnceLock::new(),
            columns_by_table: OnceLock::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOP: &str = r#"
db_id = "shop"

[[tables]]
name = "customers"
primary_key = ["id"]
columns = [{ name = "id", type = "integer" }, { name = "name", type = "text", not_null = true }]

[[tables]]
name = "orders"
primary_key = ["id"]
columns = [
  { name = "id", type = "integer" },
  { name = "customer_id", type = "integer", references = "customers.id" },
  { name = "placed_at", type = "date" },
]
"#;

    #[test]
    fn the_small_form_reads_tables_types_and_keys() {
        let catalog = SchemaCatalog::parse_simple(SHOP, false).unwrap();
        let shop = catalog.get("shop").unwrap();
        assert_eq!(shop.tables, vec!["customers", "orders"]);
        let orders = shop.table_index("ORDERS").unwrap();
        let customer_id = shop.column_index(orders, "customer_id").unwrap();
        let customers_id = shop
            .column_index(shop.table_index("customers").unwrap(), "id")
            .unwrap();
        assert!(shop.is_foreign_key_pair(customers_id, customer_id));
        assert!(shop.is_primary_key_column(customers_id));
        assert_eq!(shop.columns[customer_id].ty, ColumnType::Number);
        assert_eq!(
            shop.columns[shop.column_index(orders, "placed_at").unwrap()].ty,
            ColumnType::Date
        );
        assert!(shop.is_not_null("customers.name"));
        // The same in JSON, several databases.
        let json = r#"{"databases": [{"db_id": "a", "tables": [{"name": "t", "columns": [{"name": "x"}]}]},
                                     {"db_id": "b", "tables": []}]}"#;
        let catalog = SchemaCatalog::parse_simple(json, true).unwrap();
        assert_eq!(catalog.db_ids(), vec!["a", "b"]);
    }

    #[test]
    fn the_small_form_refuses_what_it_cannot_mean() {
        for (text, why) in [
            ("tables = []", "no database"),
            (
                "db_id = \"x\"\n[[tables]]\nname = \"t\"\ncolumns = [{ name = \"a\", references = \"u.b\" }]",
                "no table u",
            ),
            (
                "db_id = \"x\"\n[[tables]]\nname = \"t\"\ncolumns = [{ name = \"a\" }, { name = \"A\" }]",
                "twice",
            ),
            (
                "db_id = \"x\"\n[[tables]]\nname = \"t\"\ncolumns = []\nprimary_key = [\"id\"]",
                "not a column",
            ),
            ("db_id = \"x\"\ncolour = 1", "unknown field"),
        ] {
            let err = SchemaCatalog::parse_simple(text, false)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
        assert!(SchemaCatalog::parse_simple("{", true).is_err());
    }

    #[test]
    fn declared_types_are_classified() {
        for (declared, ty) in [
            ("INTEGER", ColumnType::Number),
            ("varchar(20)", ColumnType::Text),
            ("DATETIME", ColumnType::Date),
            ("real", ColumnType::Number),
            ("number", ColumnType::Number),
            ("time", ColumnType::Date),
            ("boolean", ColumnType::Boolean),
            ("others", ColumnType::Unknown),
            ("", ColumnType::Unknown),
        ] {
            assert_eq!(ColumnType::from_declared(declared), ty, "{declared}");
        }
    }
}
