//! ETM's rewrite rules, in the released script's order and with its preconditions: the
//! structural rules 100–108 (case, qualification, SELECT order, table aliases, join order,
//! operand order, column aliases, parentheses, quoting), the schema-checked equivalences
//! 1–20 of ESM+, and 21–26 (self set operations, BETWEEN, negated comparisons, IIF, anti
//! joins, CTEs). Each query is rewritten to a fixpoint, subqueries first; two queries match
//! when their rewritten trees are equal.
//!
//! Faithfulness over tidiness: where the script reads a key that may be missing or a table
//! the schema does not have, the port aborts at the same point (see [`Abort`]), and its
//! quirks are kept (e.g. a column alias used elsewhere is replaced inside the column that
//! names it; `x OR 1 = 1` simplifies to `x`; rule 19 widens the schema facts for the rest of
//! the pair). A rule's docs name the quirk where it matters to a reader of a verdict.
//!
//! One file per family, in the script's order: [`structural`] (100–108), [`equivalences`]
//! (1–12), [`joins`] (13–20), [`extended`] (21–26); this file holds the schema facts and the
//! tree walks they share.

mod equivalences;
mod extended;
mod joins;
mod structural;

pub use equivalences::{rule1, rule2, rule4, rule6, rule7, rule8, rule9, rule10, rule11, rule12};
pub use extended::{clean_trues, rule22, rule23, rule24, rule25};
pub use joins::{rule13, rule14, rule15, rule16, rule17, rule18, rule19, rule20};
pub use structural::{
    rule100, rule101, rule102, rule103, rule104, rule105, rule106, rule107, rule108,
};

use std::collections::BTreeMap;

use super::tree::{Abort, Node, Step, V};

/// What the rules know of one table (the script's `get_schema`, all names lowercased).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EtmTable {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Primary-key columns.
    pub primary_keys: Vec<String>,
    /// Foreign keys: column → `table.column` it references.
    pub foreign_keys: BTreeMap<String, String>,
    /// Columns known NOT NULL (a single-column primary key included).
    pub non_null: Vec<String>,
    /// Columns unique on their own (a single-column primary key included).
    pub unique: Vec<String>,
}

/// The schema the rules read, by lowercased table name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EtmSchema {
    /// Tables by lowercased name.
    pub tables: BTreeMap<String, EtmTable>,
}

impl EtmSchema {
    /// `schema[name]`, aborting like a `KeyError` (also for a name that is not a string).
    fn table(&self, name: &V) -> Step<&EtmTable> {
        match name {
            V::S(s) => self
                .tables
                .get(s)
                .ok_or_else(|| Abort(format!("table {s} is not in the schema"))),
            _ => Err(Abort("a table name that is not a name".into())),
        }
    }

    fn table_mut(&mut self, name: &V) -> Step<&mut EtmTable> {
        match name {
            V::S(s) => self
                .tables
                .get_mut(s)
                .ok_or_else(|| Abort(format!("table {s} is not in the schema"))),
            _ => Err(Abort("a table name that is not a name".into())),
        }
    }
}

/// `value in list_of_names`.
fn listed(list: &[String], value: &V) -> bool {
    value.as_str().is_some_and(|s| list.iter().any(|x| x == s))
}

/// Where a visited value sits: its parent's class, and whether it is a list element.
#[derive(Debug, Clone, Copy)]
struct Slot {
    parent: &'static str,
    in_list: bool,
}

type Visit<'f> = dyn FnMut(&mut V, Slot) -> Step<bool> + 'f;

/// Most rewrites: visit every argument slot under `node`, pre-order. `f` may replace the
/// slot's value and says whether it did; `skip` single values are neither offered nor
/// entered. A replaced single value is entered only with `enter_replaced` (the script walks
/// on into the detached original, which matters only when the two share children); list
/// elements are entered after replacement (the script mutates lists in place).
struct Walk<'a> {
    skip: &'a dyn Fn(&V) -> bool,
    enter_replaced: bool,
}

const NO_SKIP: &dyn Fn(&V) -> bool = &|_| false;

impl Walk<'_> {
    fn node(&self, node: &mut Node, f: &mut Visit<'_>) -> Step<()> {
        let parent = node.class;
        for (_, value) in node.args.iter_mut() {
            if let V::L(items) = value {
                for item in items.iter_mut() {
                    f(
                        item,
                        Slot {
                            parent,
                            in_list: true,
                        },
                    )?;
                    if let V::N(n) = item {
                        self.node(n, f)?;
                    }
                }
                continue;
            }
            if (self.skip)(value) {
                continue;
            }
            let replaced = f(
                value,
                Slot {
                    parent,
                    in_list: false,
                },
            )?;
            if (!replaced || self.enter_replaced)
                && let V::N(n) = value
            {
                self.node(n, f)?;
            }
        }
        Ok(())
    }
}

fn walk(node: &mut Node, f: &mut Visit<'_>) -> Step<()> {
    Walk {
        skip: NO_SKIP,
        enter_replaced: false,
    }
    .node(node, f)
}

/// Replace every single-valued (not list element) node of `class` under `node` with `f(node)`.
fn replace_values(
    node: &mut Node,
    class: &str,
    f: &mut dyn FnMut(&V) -> Step<Option<V>>,
) -> Step<()> {
    walk(node, &mut |v, slot| {
        if !slot.in_list
            && v.is(class)
            && let Some(new) = f(v)?
        {
            *v = new;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Replace every node of `class` under `node`, list elements included.
fn replace_everywhere(
    node: &mut Node,
    class: &str,
    f: &mut dyn FnMut(&V) -> Step<Option<V>>,
) -> Step<()> {
    walk(node, &mut |v, _| {
        if v.is(class)
            && let Some(new) = f(v)?
        {
            *v = new;
            return Ok(true);
        }
        Ok(false)
    })
}

fn from_this(tree: &Node) -> Step<&V> {
    tree.get("from")?.get("this")
}

/// The FROM table and the joined tables, in order.
fn tables_of(tree: &Node) -> Step<Vec<V>> {
    let mut tables = vec![from_this(tree)?.clone()];
    if let Some(joins) = tree.opt("joins") {
        let V::L(joins) = joins else {
            return Err(Abort("joins is not a list".into()));
        };
        for j in joins {
            tables.push(j.get("this")?.clone());
        }
    }
    Ok(tables)
}

fn list_of<'a>(v: &'a V, what: &str) -> Step<&'a Vec<V>> {
    match v {
        V::L(l) => Ok(l),
        _ => Err(Abort(format!("{what} is not a list"))),
    }
}

/// The two sides of an equality node.
fn eq_sides(eq: &Node) -> Step<(V, V)> {
    Ok((eq.get("this")?.clone(), eq.get("expression")?.clone()))
}
