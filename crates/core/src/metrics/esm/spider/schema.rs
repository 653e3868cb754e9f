//! process_sql.py's `Schema` (lowercased table → columns, the id map) and the foreign-key
//! map of evaluation.py, from a `tables.json` schema.

use std::collections::{BTreeMap, HashMap};

use crate::catalogue::DbSchema;

/// process_sql's `Schema`: lowercased table → columns, and the id map.
#[derive(Debug, Clone)]
pub struct SpiderSchema {
    /// table → columns (lowercase).
    pub tables: BTreeMap<String, Vec<String>>,
    /// Lowercased FK canonicalisation map `__t.c__ → __t'.c'__` (evaluation.py's kmap).
    pub kmap: HashMap<String, String>,
}

impl SpiderSchema {
    /// Build from a loaded database schema.
    pub fn new(db: &DbSchema) -> SpiderSchema {
        SpiderSchema {
            tables: db.lower_columns(),
            kmap: build_foreign_key_map(db),
        }
    }

    pub(super) fn id_col(&self, table: &str, col: &str) -> Option<String> {
        let cols = self.tables.get(table)?;
        cols.iter()
            .any(|c| c == col)
            .then(|| format!("__{table}.{col}__"))
    }

    pub(super) fn id_table(&self, table: &str) -> Option<String> {
        self.tables
            .contains_key(table)
            .then(|| format!("__{table}__"))
    }
}

/// evaluation.py `build_foreign_key_map`: first-match grouping of FK pairs, each member mapped
/// to the member with the lowest column index.
fn build_foreign_key_map(db: &DbSchema) -> HashMap<String, String> {
    let cols: Vec<String> = db
        .columns
        .iter()
        .map(|c| match db.tables.get(c.table) {
            Some(t) => format!("__{}.{}__", t.to_lowercase(), c.name.to_lowercase()),
            None => "__all__".to_string(),
        })
        .collect();
    let mut sets: Vec<Vec<usize>> = Vec::new();
    for &(k1, k2) in &db.foreign_keys {
        let pos = sets.iter().position(|s| s.contains(&k1) || s.contains(&k2));
        let set = match pos {
            Some(p) => p,
            None => {
                sets.push(Vec::new());
                sets.len() - 1
            }
        };
        if let Some(s) = sets.get_mut(set) {
            for k in [k1, k2] {
                if !s.contains(&k) {
                    s.push(k);
                }
            }
        }
    }
    let mut map = HashMap::new();
    for mut s in sets {
        s.sort_unstable();
        let Some(&min) = s.first() else { continue };
        let Some(target) = cols.get(min) else {
            continue;
        };
        for idx in s {
            if let Some(c) = cols.get(idx) {
                map.insert(c.clone(), target.clone());
            }
        }
    }
    map
}
