//! The ETM engine: preprocessing, the validity check's seam, and the rule passes to a
//! canonical tree (the module documentation of [`super`]).

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::catalogue::DbSchema;

use super::build;
use super::rules::{self, EtmSchema, EtmTable};
use super::tree;
use super::tree::{Abort, Node, Step, V, py_eq};

/// Plans a query against a database built from a schema (the edge implements it with an
/// in-memory SQLite database; nothing is executed).
pub trait PlanCheck: Send + Sync {
    /// `Ok` when `sql` plans on a database with `schema`, else the planner's error.
    fn plan(&self, schema: &DbSchema, sql: &str) -> Result<(), PlanError>;
}

/// Why a query does not plan: the planner's own error (SQLite's, or why no database could be
/// built for the schema).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PlanError(#[from] Box<dyn std::error::Error + Send + Sync>);

impl PlanError {
    /// The planner's error `error`.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> PlanError {
        PlanError(error.into())
    }
}

/// Why a pair did not match, when it is not simply that the trees differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EtmMiss {
    /// The trees differ after rewriting.
    TreesDiffer,
    /// The prediction does not plan on the schema.
    PredInvalid,
    /// The prediction could not be read.
    PredUnparsed,
    /// A rule stopped where the script raises (the script then counts the pair false).
    RuleAborted,
}

/// ETM's verdict on one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EtmOutcome {
    /// Whether the rewritten trees are equal.
    pub verdict: bool,
    /// Why not, when not.
    pub miss: Option<EtmMiss>,
    /// The message behind `miss` (parse error, planner error, aborted rule).
    pub reason: Option<String>,
}

/// Why a pair could not be judged at all: the gold query is unusable.
#[derive(Debug, thiserror::Error)]
pub enum EtmGoldError {
    /// The gold query does not plan on the schema (the script counts the pair false).
    #[error("the gold query does not plan on the schema: {0}")]
    Invalid(#[source] PlanError),
    /// The gold query could not be read.
    #[error("the gold query cannot be read: {0}")]
    Unparsed(String),
}

impl EtmSchema {
    /// The facts the script reads from a database (`get_schema`): columns, primary and foreign
    /// keys, NOT NULL and single-column UNIQUE — a single-column primary key counting as both.
    pub fn from_db(db: &DbSchema) -> EtmSchema {
        let mut schema = EtmSchema::default();
        for (t, name) in db.tables.iter().enumerate() {
            let lower = name.to_lowercase();
            let mut table = EtmTable::default();
            for (_, c) in db.columns_of(t) {
                table.columns.push(c.name.to_lowercase());
            }
            let key = db.primary_keys.iter().find(|k| {
                k.first()
                    .is_some_and(|c| db.columns.get(*c).is_some_and(|c| c.table == t))
            });
            if let Some(key) = key {
                for c in key {
                    if let Some(col) = db.columns.get(*c) {
                        table.primary_keys.push(col.name.to_lowercase());
                    }
                }
            }
            for col in &table.columns {
                let k = format!("{lower}.{col}");
                if db.not_null.contains(&k) {
                    table.non_null.push(col.clone());
                }
                if db.unique.contains(&k) {
                    table.unique.push(col.clone());
                }
            }
            if let [single] = table.primary_keys.as_slice() {
                let single = single.clone();
                if !table.non_null.contains(&single) {
                    table.non_null.push(single.clone());
                }
                if !table.unique.contains(&single) {
                    table.unique.push(single);
                }
            }
            schema.tables.insert(lower, table);
        }
        for (from, to) in &db.foreign_keys {
            let (Some(f), Some(t)) = (db.columns.get(*from), db.columns.get(*to)) else {
                continue;
            };
            let (Some(ft), Some(tt)) = (db.tables.get(f.table), db.tables.get(t.table)) else {
                continue;
            };
            if let Some(table) = schema.tables.get_mut(&ft.to_lowercase()) {
                // SQLite lists a table's foreign keys last-declared first; the script's dict keeps
                // the last row it reads, i.e. the first declared.
                table
                    .foreign_keys
                    .entry(f.name.to_lowercase())
                    .or_insert_with(|| format!("{}.{}", tt.to_lowercase(), t.name.to_lowercase()));
            }
        }
        schema
    }

    fn names(&self, word: &str) -> bool {
        let lower = word.to_lowercase();
        self.tables.contains_key(&lower) || self.tables.values().any(|t| t.columns.contains(&lower))
    }
}

static DOUBLE_QUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([^"]+)""#).expect("static regex"));
static DATETIME_NOW: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bdatetime\(\)").expect("static regex"));

/// The script's preprocessing of a query before validity check and parse.
pub fn preprocess(query: &str, schema: &EtmSchema) -> String {
    let mut query = query.replace('`', "\"");
    let words: Vec<String> = DOUBLE_QUOTED
        .captures_iter(&query)
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
        .collect();
    for word in words {
        if !schema.names(&word) {
            query = query.replace(&format!("\"{word}\""), &format!("'{word}'"));
        }
    }
    DATETIME_NOW
        .replace_all(&query, "datetime('now')")
        .into_owned()
}

/// ETM on one pair: preprocess, check that both plan, rewrite both, compare. `Err` when the
/// gold query is unusable (the pair cannot be judged).
pub fn etm(
    db: &DbSchema,
    schema: &EtmSchema,
    planner: &dyn PlanCheck,
    gold: &str,
    pred: &str,
) -> Result<EtmOutcome, EtmGoldError> {
    let gold = preprocess(gold, schema);
    let pred = preprocess(pred, schema);
    planner.plan(db, &gold).map_err(EtmGoldError::Invalid)?;
    if let Err(e) = planner.plan(db, &pred) {
        return Ok(miss(EtmMiss::PredInvalid, e.to_string()));
    }
    let gold_tree = build::parse(&gold).map_err(|e| EtmGoldError::Unparsed(e.0))?;
    let pred_tree = match build::parse(&pred) {
        Ok(t) => t,
        Err(e) => return Ok(miss(EtmMiss::PredUnparsed, e.0)),
    };
    // One copy of the schema per pair, shared by both queries: rule 19 widens its facts.
    let mut facts = schema.clone();
    let rewritten = apply_rules(&gold_tree, &mut facts, 0)
        .and_then(|g| apply_rules(&pred_tree, &mut facts, 0).map(|p| (g, p)));
    Ok(match rewritten {
        Ok((g, p)) if py_eq(&g, &p) => EtmOutcome {
            verdict: true,
            miss: None,
            reason: None,
        },
        Ok(_) => miss(EtmMiss::TreesDiffer, String::new()),
        Err(Abort(reason)) => miss(EtmMiss::RuleAborted, reason),
    })
}

fn miss(kind: EtmMiss, reason: String) -> EtmOutcome {
    EtmOutcome {
        verdict: false,
        miss: Some(kind),
        reason: (!reason.is_empty()).then_some(reason),
    }
}

/// Rewrites before giving up on a fixpoint (the script loops forever; no query needs many).
const MAX_PASSES: usize = 64;
/// Nesting depth before giving up.
const MAX_DEPTH: usize = 64;

/// The script's `applyRules`: CTEs inlined (rule 26), nested queries rewritten first, the
/// set-operation rules (21, 3, 5), then every rule in order until nothing changes.
fn apply_rules(tree: &V, schema: &mut EtmSchema, depth: usize) -> Step<V> {
    if depth > MAX_DEPTH {
        return Err(Abort("nesting too deep".into()));
    }
    let mut newtree = tree.clone();
    if let V::N(root) = &mut newtree
        && root.has("with")
    {
        inline_ctes(root)?;
    }
    if let V::N(root) = &mut newtree {
        rewrite_nested(root, schema, depth)?;
    }
    let mut newtree = set_operation_rules(newtree, schema)?;
    if newtree.is("Select") {
        let mut old: Option<V> = None;
        let mut passes = 0;
        while old.as_ref().is_none_or(|o| !py_eq(o, &newtree)) {
            passes += 1;
            if passes > MAX_PASSES {
                return Err(Abort("no fixpoint".into()));
            }
            old = Some(newtree.clone());
            let t = newtree.node_mut()?;
            one_pass(t, schema)?;
        }
    }
    Ok(newtree)
}

fn one_pass(t: &mut Node, schema: &mut EtmSchema) -> Step<()> {
    rules::rule100(t);
    rules::rule101(t, schema)?;
    rules::rule102(t)?;
    rules::rule103(t)?;
    rules::rule104(t)?;
    rules::rule105(t)?;
    rules::rule106(t)?;
    rules::rule107(t)?;
    rules::rule108(t)?;
    rules::rule1(t, schema)?;
    rules::rule2(t, schema)?;
    rules::rule4(t, schema)?;
    rules::rule6(t, schema)?;
    rules::rule7(t, schema)?;
    rules::rule8(t, schema)?;
    rules::rule9(t, schema)?;
    rules::rule10(t)?;
    rules::rule11(t, schema)?;
    rules::rule12(t)?;
    rules::rule13(t, schema)?;
    rules::rule14(t, schema)?;
    rules::rule15(t)?;
    rules::rule16(t)?;
    rules::rule17(t)?;
    rules::rule18(t)?;
    rules::rule19(t, schema)?;
    rules::rule20(t)?;
    rules::rule22(t)?;
    rules::rule23(t)?;
    rules::rule24(t)?;
    rules::rule25(t)?;
    rules::clean_trues(t)
}

/// Rule 26: every identifier naming a CTE becomes that CTE's query (as a subquery), then the
/// WITH is dropped.
fn inline_ctes(root: &mut Node) -> Step<()> {
    let with = root.get("with")?.clone();
    if with.has("expressions")?
        && let V::L(ctes) = with.get("expressions")?
    {
        for cte in ctes {
            if !cte.is("CTE") {
                continue;
            }
            let query = cte.get("this")?.clone();
            let alias = cte.get("alias")?.clone();
            let alias_id = alias.get("this")?.clone();
            replace_cte_name(root, &query, &alias, &alias_id)?;
        }
    }
    root.pop("with")?;
    Ok(())
}

fn replace_cte_name(node: &mut Node, query: &V, alias: &V, alias_id: &V) -> Step<()> {
    let in_alias = matches!(alias, V::N(a) if tree::node_eq(a, node));
    for (_, v) in node.args.iter_mut() {
        match v {
            V::L(items) => {
                for item in items.iter_mut() {
                    if item.is("Column") && item.has("table")? {
                        // The script compares a name with the alias node here: never equal, but
                        // it reads the table's arguments first.
                        item.get("table")?.has("this")?;
                    }
                    if let V::N(n) = item {
                        replace_cte_name(n, query, alias, alias_id)?;
                    }
                }
            }
            V::N(n) if n.is("Identifier") && !in_alias && py_eq(v, alias_id) => {
                *v = V::n("Subquery", vec![("this", query.clone())]);
            }
            V::N(n) if n.is("Identifier") => {}
            V::N(n) => replace_cte_name(n, query, alias, alias_id)?,
            _ => {}
        }
    }
    Ok(())
}

/// Every outermost nested SELECT (not the root) rewritten on its own first.
fn rewrite_nested(node: &mut Node, schema: &mut EtmSchema, depth: usize) -> Step<()> {
    for (_, v) in node.args.iter_mut() {
        match v {
            V::L(items) => {
                for item in items.iter_mut() {
                    if item.is("Select") {
                        *item = apply_rules(item, schema, depth + 1)?;
                    }
                    if let V::N(n) = item {
                        rewrite_nested(n, schema, depth + 1)?;
                    }
                }
            }
            V::N(n) if n.is("Select") => {
                *v = apply_rules(v, schema, depth + 1)?;
            }
            V::N(n) => rewrite_nested(n, schema, depth + 1)?,
            _ => {}
        }
    }
    Ok(())
}

/// Rules 21 (`q UNION/INTERSECT q` is `q`), 3 (INTERSECT/UNION of two filters on the same
/// unique column is AND/OR of the filters) and 5 (EXCEPT on a unique NOT NULL column is NOT
/// IN).
fn set_operation_rules(mut newtree: V, schema: &EtmSchema) -> Step<V> {
    if newtree.is("Intersect") || newtree.is("Union") {
        let this = newtree.get("this")?;
        let expression = newtree.get("expression")?;
        if py_eq(this, expression) {
            newtree = this.clone();
        }
    }
    for (class, combine) in [("Intersect", "And"), ("Union", "Or")] {
        if !newtree.is(class) {
            continue;
        }
        let sub1 = newtree.get("this")?.clone();
        let sub2 = newtree.get("expression")?;
        if !(sub1.has("expressions")? && sub2.has("expressions")?) {
            continue;
        }
        let (e1, e2) = (sub1.get("expressions")?, sub2.get("expressions")?);
        let (V::L(l1), V::L(l2)) = (e1, e2) else {
            continue;
        };
        if l1.len() != 1 || l2.len() != 1 || !py_eq(e1, e2) {
            continue;
        }
        let col = &l1[0];
        if !col.is("Column") || !col.has("table")? {
            continue;
        }
        let table = col.get("table")?.get("this")?;
        if col.get("this")?.is("Star") {
            continue;
        }
        let name = col.get("this")?.get("this")?;
        let unique = match table {
            V::S(t) => schema
                .tables
                .get(t)
                .ok_or_else(|| Abort(format!("table {t} is not in the schema")))?
                .unique
                .iter()
                .any(|u| Some(u.as_str()) == name.as_str()),
            _ => return Err(Abort("a table name that is not a name".into())),
        };
        if !unique || !py_eq(sub1.get("from")?, sub2.get("from")?) {
            continue;
        }
        if !(sub1.has("where")? && sub2.has("where")?) {
            continue;
        }
        let new_where = V::n(
            combine,
            vec![
                ("this", sub1.get("where")?.get("this")?.clone()),
                ("expression", sub2.get("where")?.get("this")?.clone()),
            ],
        );
        let mut merged = sub1.clone();
        let m = merged.node_mut()?;
        if class == "Intersect" {
            m.get_mut("where")?.node_mut()?.set("this", new_where);
        } else {
            // Quirk kept: the UNION case stores the bare OR as the WHERE.
            m.set("where", new_where);
        }
        newtree = merged;
    }
    except_as_not_in(newtree, schema)
}

/// Rule 5: `q EXCEPT q'` selecting one unique NOT NULL column is `q WHERE c NOT IN (q')`
/// (and the WHERE `q` had).
fn except_as_not_in(mut newtree: V, schema: &EtmSchema) -> Step<V> {
    if newtree.is("Except") {
        let outer = newtree.get("this")?.clone();
        let inner = newtree.get("expression")?.clone();
        if outer.has("expressions")?
            && let V::L(items) = outer.get("expressions")?
            && items.len() == 1
            && items[0].is("Column")
            && items[0].has("table")?
        {
            let column = items[0].clone();
            let table = column.get("table")?.get("this")?.clone();
            if !column.get("this")?.is("Star") {
                let name = column.get("this")?.get("this")?.clone();
                let info = match &table {
                    V::S(t) => schema
                        .tables
                        .get(t)
                        .ok_or_else(|| Abort(format!("table {t} is not in the schema")))?,
                    _ => return Err(Abort("a table name that is not a name".into())),
                };
                let has =
                    |list: &[String]| name.as_str().is_some_and(|n| list.iter().any(|x| x == n));
                if has(&info.unique) && has(&info.non_null) {
                    let not_in = V::n(
                        "Not",
                        vec![(
                            "this",
                            V::n(
                                "In",
                                vec![
                                    ("this", column.clone()),
                                    ("query", V::n("Subquery", vec![("this", inner)])),
                                ],
                            ),
                        )],
                    );
                    let mut t = outer.clone();
                    let tn = t.node_mut()?;
                    let condition = if tn.has("where") {
                        V::n(
                            "And",
                            vec![
                                ("this", not_in),
                                ("expression", tn.get("where")?.get("this")?.clone()),
                            ],
                        )
                    } else {
                        not_in
                    };
                    tn.set("where", V::n("Where", vec![("this", condition)]));
                    newtree = t;
                }
            }
        }
    }
    Ok(newtree)
}
