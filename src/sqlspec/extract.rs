//! The sqlparser walk behind [`extract`]. (Skeleton: to be implemented.)

use super::{SpecError, SqlSpec};

/// Default maximum SQL size accepted for parsing, in bytes.
pub const DEFAULT_MAX_SQL_BYTES: usize = 256 * 1024;

/// Knobs for extraction.
#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// Dialect fallback chain, tried in order (`generic` is always tried last).
    pub dialects: Vec<String>,
    /// Larger SQL is rejected with [`SpecError::TooLarge`].
    pub max_sql_bytes: usize,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions {
            dialects: vec!["generic".into()],
            max_sql_bytes: DEFAULT_MAX_SQL_BYTES,
        }
    }
}

/// Extract the spec of `sql`, parsing with `dialect` (if any) then the generic fallbacks.
pub fn extract(sql: &str, dialect: Option<&str>) -> Result<SqlSpec, SpecError> {
    let mut opts = ExtractOptions::default();
    if let Some(d) = dialect {
        opts.dialects.insert(0, d.to_string());
    }
    extract_with(sql, &opts)
}

/// Extract with explicit options.
pub fn extract_with(sql: &str, opts: &ExtractOptions) -> Result<SqlSpec, SpecError> {
    if sql.trim().is_empty() {
        return Err(SpecError::Empty);
    }
    if sql.len() > opts.max_sql_bytes {
        return Err(SpecError::TooLarge {
            size: sql.len(),
            limit: opts.max_sql_bytes,
        });
    }
    todo!("sqlspec extraction")
}
