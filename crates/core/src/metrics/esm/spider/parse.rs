//! process_sql.py's parser (`get_sql` and the `parse_*` functions it calls), quirks kept.

use std::collections::HashMap;

use super::{
    AGG_OPS, CLAUSE_KEYWORDS, ColUnit, CondItem, CondUnit, JOIN_KEYWORDS, PResult, ParseError,
    SQL_OPS, SelectList, SpiderSchema, Sql, TableUnit, UNIT_OPS, Val, ValUnit, WHERE_OPS, perr,
    tokenize,
};

struct Parser<'a> {
    toks: Vec<String>,
    aliases: HashMap<String, String>,
    schema: &'a SpiderSchema,
    depth: std::cell::Cell<usize>,
}

/// Deepest subquery nesting accepted (guards the recursive parser against hostile input).
const MAX_DEPTH: usize = 64;

fn is_clause(t: &str) -> bool {
    CLAUSE_KEYWORDS.contains(&t)
}

fn is_join_kw(t: &str) -> bool {
    JOIN_KEYWORDS.contains(&t)
}

/// Python's `float(str)`: decimal literals with optional sign, underscores between digits,
/// exponent, `inf`/`infinity`/`nan`.
pub fn python_float(tok: &str) -> Option<f64> {
    let t = tok.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if lower.len() - body.len() > 1 {
        return None;
    }
    if matches!(body, "inf" | "infinity" | "nan") {
        return lower.parse::<f64>().ok().or(Some(if body == "nan" {
            f64::NAN
        } else if lower.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }));
    }
    // Underscores only between digits.
    let bytes: Vec<char> = t.chars().collect();
    for (i, &c) in bytes.iter().enumerate() {
        if c == '_' {
            let prev = i.checked_sub(1).and_then(|p| bytes.get(p));
            let next = bytes.get(i + 1);
            if !(prev.is_some_and(|p| p.is_ascii_digit())
                && next.is_some_and(|n| n.is_ascii_digit()))
            {
                return None;
            }
        }
    }
    let cleaned: String = t.chars().filter(|&c| c != '_').collect();
    if cleaned.is_empty()
        || !cleaned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        || !cleaned.chars().any(|c| c.is_ascii_digit())
    {
        return None;
    }
    cleaned.parse::<f64>().ok()
}

/// Python's `int(str)`.
fn python_int(tok: &str) -> Option<i64> {
    let t = tok.trim();
    let cleaned: String = t.chars().filter(|&c| c != '_').collect();
    if t.contains("__") || t.starts_with('_') || t.ends_with('_') {
        return None;
    }
    cleaned.parse::<i64>().ok()
}

impl<'a> Parser<'a> {
    fn tok(&self, idx: usize) -> PResult<&str> {
        match self.toks.get(idx) {
            Some(t) => Ok(t.as_str()),
            None => perr("list index out of range"),
        }
    }

    fn at(&self, idx: usize) -> Option<&str> {
        self.toks.get(idx).map(String::as_str)
    }

    fn alias(&self, name: &str) -> PResult<&str> {
        match self.aliases.get(name) {
            Some(t) => Ok(t.as_str()),
            None => perr(format!("KeyError: {name}")),
        }
    }

    fn parse_col(
        &self,
        toks: &[String],
        idx: usize,
        default_tables: &[String],
    ) -> PResult<(usize, String)> {
        let tok = match toks.get(idx) {
            Some(t) => t.as_str(),
            None => return perr("list index out of range"),
        };
        if tok == "*" {
            return Ok((idx + 1, "__all__".into()));
        }
        if tok.contains('.') {
            let parts: Vec<&str> = tok.split('.').collect();
            let [alias, col] = parts.as_slice() else {
                return perr("too many values to unpack");
            };
            let table = self.alias(alias)?;
            return match self.schema.id_col(table, col) {
                Some(id) => Ok((idx + 1, id)),
                None => perr(format!("KeyError: {table}.{col}")),
            };
        }
        if default_tables.is_empty() {
            return perr("Default tables should not be None or empty");
        }
        for alias in default_tables {
            let table = self.alias(alias)?;
            let has = self
                .schema
                .tables
                .get(table)
                .is_some_and(|cols| cols.iter().any(|c| c == tok));
            if has && let Some(id) = self.schema.id_col(table, tok) {
                return Ok((idx + 1, id));
            }
        }
        perr(format!("Error col: {tok}"))
    }

    fn parse_col_unit(
        &self,
        toks: &[String],
        start: usize,
        default_tables: &[String],
    ) -> PResult<(usize, ColUnit)> {
        let get = |i: usize| -> PResult<&str> {
            toks.get(i)
                .map(String::as_str)
                .ok_or_else(|| ParseError("list index out of range".into()))
        };
        let mut idx = start;
        let len = toks.len();
        let mut is_block = false;
        let mut distinct = false;
        if get(idx)? == "(" {
            is_block = true;
            idx += 1;
        }
        if let Some(agg) = AGG_OPS.iter().position(|a| *a == get(idx).unwrap_or("")) {
            idx += 1;
            if !(idx < len && get(idx)? == "(") {
                return perr("assert (");
            }
            idx += 1;
            if get(idx)? == "distinct" {
                idx += 1;
                distinct = true;
            }
            let (i, col) = self.parse_col(toks, idx, default_tables)?;
            idx = i;
            if !(idx < len && get(idx)? == ")") {
                return perr("assert )");
            }
            idx += 1;
            return Ok((
                idx,
                ColUnit {
                    agg,
                    col,
                    distinct: Some(distinct),
                },
            ));
        }
        if get(idx)? == "distinct" {
            idx += 1;
            distinct = true;
        }
        let (i, col) = self.parse_col(toks, idx, default_tables)?;
        idx = i;
        if is_block {
            if get(idx)? != ")" {
                return perr("assert )");
            }
            idx += 1;
        }
        Ok((
            idx,
            ColUnit {
                agg: 0,
                col,
                distinct: Some(distinct),
            },
        ))
    }

    fn parse_val_unit(&self, start: usize, default_tables: &[String]) -> PResult<(usize, ValUnit)> {
        let mut idx = start;
        let len = self.toks.len();
        let mut is_block = false;
        if self.tok(idx)? == "(" {
            is_block = true;
            idx += 1;
        }
        let (i, c1) = self.parse_col_unit(&self.toks, idx, default_tables)?;
        idx = i;
        let mut op = 0;
        let mut c2 = None;
        if idx < len
            && let Some(o) = UNIT_OPS
                .iter()
                .position(|u| *u == self.tok(idx).unwrap_or(""))
        {
            op = o;
            idx += 1;
            let (i, c) = self.parse_col_unit(&self.toks, idx, default_tables)?;
            idx = i;
            c2 = Some(c);
        }
        if is_block {
            if self.tok(idx)? != ")" {
                return perr("assert )");
            }
            idx += 1;
        }
        Ok((idx, ValUnit { op, c1, c2 }))
    }

    fn parse_table_unit(&self, start: usize) -> PResult<(usize, String, String)> {
        let mut idx = start;
        let key = self.alias(self.tok(idx)?)?.to_string();
        if self.at(idx + 1) == Some("as") {
            idx += 3;
        } else {
            idx += 1;
        }
        match self.schema.id_table(&key) {
            Some(id) => Ok((idx, id, key)),
            None => perr(format!("KeyError: {key}")),
        }
    }

    fn parse_value(&self, start: usize, default_tables: &[String]) -> PResult<(usize, Val)> {
        let mut idx = start;
        let len = self.toks.len();
        let mut is_block = false;
        if self.tok(idx)? == "(" {
            is_block = true;
            idx += 1;
        }
        let val;
        let t = self.tok(idx)?;
        if t == "select" {
            let (i, sql) = self.parse_sql(idx)?;
            idx = i;
            val = Val::Sql(Box::new(sql));
        } else if t.contains('"') {
            val = Val::Str(t.to_string());
            idx += 1;
        } else if let Some(f) = python_float(t) {
            val = Val::Num(f);
            idx += 1;
        } else {
            let mut end = idx;
            while end < len {
                let e = self.toks[end].as_str();
                if e == "," || e == ")" || e == "and" || is_clause(e) || is_join_kw(e) {
                    break;
                }
                end += 1;
            }
            let slice = self.toks.get(start..end).unwrap_or_default();
            let (_, cu) = self.parse_col_unit(slice, 0, default_tables)?;
            val = Val::Col(cu);
            idx = end;
        }
        if is_block {
            if self.tok(idx)? != ")" {
                return perr("assert )");
            }
            idx += 1;
        }
        Ok((idx, val))
    }

    fn parse_condition(
        &self,
        start: usize,
        default_tables: &[String],
    ) -> PResult<(usize, Vec<CondItem>)> {
        let mut idx = start;
        let len = self.toks.len();
        let mut conds = Vec::new();
        while idx < len {
            let (i, val_unit) = self.parse_val_unit(idx, default_tables)?;
            idx = i;
            let mut not = false;
            if self.tok(idx)? == "not" {
                not = true;
                idx += 1;
            }
            let op = match self
                .at(idx)
                .and_then(|t| WHERE_OPS.iter().position(|o| *o == t))
            {
                Some(op) => op,
                None => return perr(format!("Error condition: idx: {idx}")),
            };
            idx += 1;
            let (v1, v2);
            if op == 1 {
                let (i, a) = self.parse_value(idx, default_tables)?;
                idx = i;
                if self.tok(idx)? != "and" {
                    return perr("assert and");
                }
                idx += 1;
                let (i, b) = self.parse_value(idx, default_tables)?;
                idx = i;
                v1 = Some(a);
                v2 = Some(b);
            } else {
                let (i, a) = self.parse_value(idx, default_tables)?;
                idx = i;
                v1 = Some(a);
                v2 = None;
            }
            if conds.len() % 2 == 1 {
                // Python would append a unit at a connector position; the evaluator then
                // crashes on it. Treat as unparseable.
                return perr("condition without connector");
            }
            conds.push(CondItem::Unit(CondUnit {
                not,
                op,
                val_unit,
                v1,
                v2,
            }));
            if let Some(t) = self.at(idx)
                && (is_clause(t) || t == ")" || t == ";" || is_join_kw(t))
            {
                break;
            }
            if let Some(t) = self.at(idx)
                && (t == "and" || t == "or")
            {
                conds.push(CondItem::Conn(t.to_string()));
                idx += 1;
            }
        }
        Ok((idx, conds))
    }

    fn parse_select(
        &self,
        start: usize,
        default_tables: &[String],
    ) -> PResult<(usize, bool, SelectList)> {
        let mut idx = start;
        let len = self.toks.len();
        if self.tok(idx)? != "select" {
            return perr("'select' not found");
        }
        idx += 1;
        let mut distinct = false;
        if self.at(idx) == Some("distinct") {
            idx += 1;
            distinct = true;
        }
        let mut units = Vec::new();
        while idx < len && !is_clause(&self.toks[idx]) {
            let mut agg = 0;
            if let Some(a) = AGG_OPS.iter().position(|a| *a == self.toks[idx]) {
                agg = a;
                idx += 1;
            }
            let (i, vu) = self.parse_val_unit(idx, default_tables)?;
            idx = i;
            units.push((agg, vu));
            if self.at(idx) == Some(",") {
                idx += 1;
            }
        }
        Ok((idx, distinct, units))
    }

    #[allow(clippy::type_complexity)]
    fn parse_from(
        &self,
        start: usize,
    ) -> PResult<(usize, Vec<TableUnit>, Vec<CondItem>, Vec<String>)> {
        let len = self.toks.len();
        let Some(pos) = self
            .toks
            .get(start..)
            .and_then(|s| s.iter().position(|t| t == "from"))
        else {
            return perr("'from' not found");
        };
        let mut idx = start + pos + 1;
        let mut default_tables = Vec::new();
        let mut units = Vec::new();
        let mut conds: Vec<CondItem> = Vec::new();
        while idx < len {
            let mut is_block = false;
            if self.tok(idx)? == "(" {
                is_block = true;
                idx += 1;
            }
            if self.tok(idx)? == "select" {
                let (i, sql) = self.parse_sql(idx)?;
                idx = i;
                units.push(TableUnit::Sql(Box::new(sql)));
            } else {
                if self.at(idx) == Some("join") {
                    idx += 1;
                }
                let (i, id, name) = self.parse_table_unit(idx)?;
                idx = i;
                units.push(TableUnit::Table(id));
                default_tables.push(name);
            }
            if self.at(idx) == Some("on") {
                idx += 1;
                let (i, this) = self.parse_condition(idx, &default_tables)?;
                idx = i;
                if !conds.is_empty() {
                    conds.push(CondItem::Conn("and".into()));
                }
                conds.extend(this);
            }
            if is_block {
                if self.tok(idx)? != ")" {
                    return perr("assert )");
                }
                idx += 1;
            }
            if let Some(t) = self.at(idx)
                && (is_clause(t) || t == ")" || t == ";")
            {
                break;
            }
        }
        Ok((idx, units, conds, default_tables))
    }

    fn parse_group_by(
        &self,
        start: usize,
        default_tables: &[String],
    ) -> PResult<(usize, Vec<ColUnit>)> {
        let mut idx = start;
        let len = self.toks.len();
        let mut out = Vec::new();
        if self.at(idx) != Some("group") {
            return Ok((idx, out));
        }
        idx += 1;
        if self.tok(idx)? != "by" {
            return perr("assert by");
        }
        idx += 1;
        while idx < len
            && !(is_clause(&self.toks[idx]) || self.toks[idx] == ")" || self.toks[idx] == ";")
        {
            let (i, cu) = self.parse_col_unit(&self.toks, idx, default_tables)?;
            idx = i;
            out.push(cu);
            if self.at(idx) == Some(",") {
                idx += 1;
            } else {
                break;
            }
        }
        Ok((idx, out))
    }

    #[allow(clippy::type_complexity)]
    fn parse_order_by(
        &self,
        start: usize,
        default_tables: &[String],
    ) -> PResult<(usize, Option<(String, Vec<ValUnit>)>)> {
        let mut idx = start;
        let len = self.toks.len();
        if self.at(idx) != Some("order") {
            return Ok((idx, None));
        }
        idx += 1;
        if self.tok(idx)? != "by" {
            return perr("assert by");
        }
        idx += 1;
        let mut dir = "asc".to_string();
        let mut units = Vec::new();
        while idx < len
            && !(is_clause(&self.toks[idx]) || self.toks[idx] == ")" || self.toks[idx] == ";")
        {
            let (i, vu) = self.parse_val_unit(idx, default_tables)?;
            idx = i;
            units.push(vu);
            if let Some(t) = self.at(idx)
                && (t == "asc" || t == "desc")
            {
                dir = t.to_string();
                idx += 1;
            }
            if self.at(idx) == Some(",") {
                idx += 1;
            } else {
                break;
            }
        }
        Ok((idx, Some((dir, units))))
    }

    fn parse_sql(&self, start: usize) -> PResult<(usize, Sql)> {
        let depth = self.depth.get() + 1;
        if depth > MAX_DEPTH {
            return perr("query nested too deeply");
        }
        self.depth.set(depth);
        let out = self.parse_sql_inner(start);
        self.depth.set(depth - 1);
        out
    }

    fn parse_sql_inner(&self, start: usize) -> PResult<(usize, Sql)> {
        let len = self.toks.len();
        let mut idx = start;
        let mut is_block = false;
        if self.tok(idx)? == "(" {
            is_block = true;
            idx += 1;
        }
        let (from_end, from_units, from_conds, default_tables) = self.parse_from(start)?;
        let (_, distinct, select) = self.parse_select(idx, &default_tables)?;
        idx = from_end;
        let mut where_ = Vec::new();
        if self.at(idx) == Some("where") {
            let (i, c) = self.parse_condition(idx + 1, &default_tables)?;
            idx = i;
            where_ = c;
        }
        let (i, group_by) = self.parse_group_by(idx, &default_tables)?;
        idx = i;
        let mut having = Vec::new();
        if self.at(idx) == Some("having") {
            let (i, c) = self.parse_condition(idx + 1, &default_tables)?;
            idx = i;
            having = c;
        }
        let (i, order_by) = self.parse_order_by(idx, &default_tables)?;
        idx = i;
        let mut limit = None;
        if self.at(idx) == Some("limit") {
            idx += 2;
            let t = self.tok(idx - 1)?;
            match python_int(t) {
                Some(v) => limit = Some(v),
                None => return perr(format!("invalid literal for int(): {t}")),
            }
        }
        while self.at(idx) == Some(";") {
            idx += 1;
        }
        if is_block {
            if self.tok(idx)? != ")" {
                return perr("assert )");
            }
            idx += 1;
        }
        while self.at(idx) == Some(";") {
            idx += 1;
        }
        let mut sql = Sql {
            select_distinct: Some(distinct),
            select,
            from_units,
            from_conds,
            where_,
            group_by,
            having,
            order_by,
            limit,
            intersect: None,
            except: None,
            union: None,
        };
        if idx < len
            && let Some(op) = self
                .at(idx)
                .filter(|t| SQL_OPS.contains(t))
                .map(str::to_string)
        {
            idx += 1;
            let (i, rhs) = self.parse_sql(idx)?;
            idx = i;
            let rhs = Some(Box::new(rhs));
            match op.as_str() {
                "intersect" => sql.intersect = rhs,
                "union" => sql.union = rhs,
                _ => sql.except = rhs,
            }
        }
        Ok((idx, sql))
    }
}

/// process_sql.get_sql: tokenize, build the global alias map, parse.
pub fn get_sql(schema: &SpiderSchema, query: &str) -> PResult<Sql> {
    let toks = tokenize(query)?;
    let mut aliases: HashMap<String, String> = HashMap::new();
    for (i, t) in toks.iter().enumerate() {
        if t == "as" {
            let Some(next) = toks.get(i + 1) else {
                return perr("list index out of range");
            };
            let prev = if i == 0 { toks.last() } else { toks.get(i - 1) };
            aliases.insert(next.clone(), prev.cloned().unwrap_or_default());
        }
    }
    for key in schema.tables.keys() {
        if aliases.contains_key(key) {
            return perr(format!("Alias {key} has the same name in table"));
        }
        aliases.insert(key.clone(), key.clone());
    }
    let p = Parser {
        depth: std::cell::Cell::new(0),
        toks,
        aliases,
        schema,
    };
    let (_, sql) = p.parse_sql(0)?;
    Ok(sql)
}
