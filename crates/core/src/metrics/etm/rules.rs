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

use std::collections::BTreeMap;

use super::tree::{Abort, Node, Step, V, py_eq, python_float_str, sort_values};

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

/// Rule 100: lowercase every string argument except inside literals.
pub fn rule100(tree: &mut Node) {
    fn lower(node: &mut Node) {
        for (_, v) in node.args.iter_mut() {
            match v {
                V::S(s) => *s = s.to_lowercase(),
                V::N(n) if !n.is("Literal") => lower(n),
                V::L(items) => {
                    for item in items {
                        if let V::N(n) = item
                            && !n.is("Literal")
                        {
                            lower(n);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    lower(tree);
}

/// Rule 101: qualify an unqualified column (and a bare `*`) with its table: the only table,
/// or the one joined table that has a column of that name.
pub fn rule101(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if !tree.has("from") {
        return Ok(());
    }
    // What the qualification reads of the query, taken once (not the whole tree).
    let has_joins = tree.has("joins");
    let from = from_this(tree)?.clone();
    let tables = if has_joins {
        tables_of(tree)?
    } else {
        Vec::new()
    };
    let get_table = |expr: &V| -> Step<V> {
        let mut expr = expr.clone();
        if expr.is("Star") {
            expr = V::n("Column", vec![("this", expr)]);
        }
        if !expr.has("table")? {
            if !has_joins {
                if from.is("Subquery") {
                    return Ok(expr);
                }
                let name = from.get("this")?.get("this")?.clone();
                let name = name
                    .as_str()
                    .ok_or_else(|| Abort("a table name that is not a name".into()))?
                    .to_string();
                expr.node_mut()?.set("table", V::ident(&name));
            } else {
                let mut tablename: Option<String> = None;
                for table in &tables {
                    if table.is("Subquery") {
                        continue;
                    }
                    let tname = table.get("this")?.get("this")?;
                    let info = schema.table(tname)?;
                    if expr.get("this")?.is("Star") {
                        tablename = None;
                        break;
                    }
                    if listed(&info.columns, expr.get("this")?.get("this")?) {
                        if tablename.is_none() {
                            tablename = tname.as_str().map(str::to_string);
                        } else {
                            tablename = None;
                            break;
                        }
                    }
                }
                if let Some(t) = tablename {
                    expr.node_mut()?.set("table", V::ident(&t));
                }
            }
        }
        Ok(expr)
    };
    walk(tree, &mut |v, slot| {
        let qualify = v.is("Column")
            || (v.is("Star") && (slot.in_list || !matches!(slot.parent, "Column" | "Count")));
        if qualify {
            *v = get_table(v)?;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Rule 102: the SELECT list as a sorted multiset.
pub fn rule102(tree: &mut Node) -> Step<()> {
    match tree.get_mut("expressions")? {
        V::L(items) => {
            sort_values(items);
            Ok(())
        }
        _ => Err(Abort("expressions is not a list".into())),
    }
}

/// Rule 103: table aliases resolve to their tables (every identifier equal to an alias,
/// anywhere in the tree, becomes the table — or the subquery, for a derived table).
pub fn rule103(tree: &mut Node) -> Step<()> {
    if !tree.has("from") {
        return Ok(());
    }
    let count = tables_of(tree)?.len();
    for index in 0..count {
        let table_slot = table_slot(tree, index)?;
        let Some(alias) = table_slot.node()?.opt("alias").cloned() else {
            continue;
        };
        if matches!(alias, V::Nil) {
            continue;
        }
        let table_id = table_slot.get("this")?.clone();
        let alias_id = alias.get("this")?.clone();
        table_slot.node_mut()?.pop("alias")?;
        Walk {
            skip: &|v| v.is("TableAlias"),
            enter_replaced: false,
        }
        .node(tree, &mut |v, slot| {
            if !slot.in_list && v.is("Identifier") && py_eq(v, &alias_id) {
                *v = table_id.clone();
                return Ok(true);
            }
            Ok(false)
        })?;
    }
    Ok(())
}

/// The FROM table (index 0) or the `index`th joined table, mutably.
fn table_slot(tree: &mut Node, index: usize) -> Step<&mut V> {
    if index == 0 {
        return tree.get_mut("from")?.node_mut()?.get_mut("this");
    }
    match tree.get_mut("joins")? {
        V::L(joins) => joins
            .get_mut(index - 1)
            .ok_or_else(|| Abort("no such join".into()))?
            .node_mut()?
            .get_mut("this"),
        _ => Err(Abort("joins is not a list".into())),
    }
}

/// Rule 104: inner joins in a canonical order — the tables sorted, every ON condition
/// conjoined onto the first join. Not applied when any join has a side (LEFT/RIGHT/FULL).
pub fn rule104(tree: &mut Node) -> Step<()> {
    if !tree.has("from") {
        return Ok(());
    }
    let mut tables = vec![from_this(tree)?.clone()];
    let mut ons = Vec::new();
    let Some(joins) = tree.opt("joins") else {
        return Ok(());
    };
    for join in list_of(joins, "joins")? {
        if join.has("side")? {
            return Ok(());
        }
        tables.push(join.get("this")?.clone());
        if join.has("on")? {
            ons.push(join.get("on")?.clone());
        }
    }
    sort_values(&mut tables);
    sort_values(&mut ons);
    let mut combined: Option<V> = None;
    for on in ons {
        combined = Some(match combined {
            None => on,
            Some(acc) => V::n("And", vec![("this", acc), ("expression", on)]),
        });
    }
    let mut tables = tables.into_iter();
    let first = tables.next().ok_or_else(|| Abort("no table".into()))?;
    tree.get_mut("from")?.node_mut()?.set("this", first);
    let mut new_joins = Vec::new();
    for (i, table) in tables.enumerate() {
        let on = if i == 0 { combined.take() } else { None };
        new_joins.push(match on {
            Some(on) => V::n("Join", vec![("this", table), ("on", on)]),
            None => V::n("Join", vec![("this", table)]),
        });
    }
    tree.set("joins", V::L(new_joins));
    Ok(())
}

/// Rule 105: the operands of `=`, AND and OR as sorted multisets (nested ANDs / ORs
/// flattened first), rebuilt left-deep.
pub fn rule105(tree: &mut Node) -> Step<()> {
    fn sort(v: &V) -> Option<V> {
        let class = match v {
            V::N(n) if matches!(n.class, "EQ" | "And" | "Or") => n.class,
            _ => return None,
        };
        let mut flat = Vec::new();
        let mut pending = vec![v.clone()];
        while let Some(item) = pending.pop() {
            match &item {
                V::N(n) if n.class == class && item.has("this").unwrap_or(false) => {
                    let this = n.opt("this").cloned().unwrap_or(V::Nil);
                    let expression = n.opt("expression").cloned().unwrap_or(V::Nil);
                    pending.push(expression);
                    pending.push(this);
                }
                _ => flat.push(item),
            }
        }
        // The top node itself is always split into its two operands.
        sort_values(&mut flat);
        let mut items = flat.into_iter();
        let mut result = items.next()?;
        for item in items {
            result = V::n(class, vec![("this", result), ("expression", item)]);
        }
        Some(result)
    }
    Walk {
        skip: NO_SKIP,
        enter_replaced: true,
    }
    .node(tree, &mut |v, _| {
        if let Some(sorted) = sort(v) {
            *v = sorted;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Rule 106: column aliases are removed; every identifier equal to an alias becomes the
/// aliased expression (quirk kept: also inside a column of the same name).
pub fn rule106(tree: &mut Node) -> Step<()> {
    loop {
        // The script removes aliases as it meets them in list elements of its walk.
        let Some((alias_id, expr)) = first_list_alias(tree) else {
            return Ok(());
        };
        remove_alias(tree, &alias_id, &expr)?;
    }
}

fn first_list_alias(node: &Node) -> Option<(V, V)> {
    for (_, v) in &node.args {
        match v {
            V::L(items) => {
                for item in items {
                    if let V::N(n) = item {
                        if n.is("Alias") {
                            return Some((
                                n.opt("alias").cloned().unwrap_or(V::Nil),
                                n.opt("this").cloned().unwrap_or(V::Nil),
                            ));
                        }
                        if let Some(found) = first_list_alias(n) {
                            return Some(found);
                        }
                    }
                }
            }
            V::N(n) => {
                if let Some(found) = first_list_alias(n) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

fn remove_alias(node: &mut Node, alias_id: &V, expr: &V) -> Step<()> {
    let mut removed_any = false;
    fn go(node: &mut Node, alias_id: &V, expr: &V, removed: &mut bool) {
        for (_, v) in node.args.iter_mut() {
            match v {
                V::N(n) if n.is("Alias") => {
                    // A single-valued alias is left in place (the script rebinds a local).
                }
                V::L(items) => {
                    for item in items.iter_mut() {
                        if item.is("Alias") {
                            let same = item
                                .node()
                                .ok()
                                .and_then(|n| n.opt("this"))
                                .is_some_and(|t| py_eq(t, expr));
                            if same {
                                *item = expr.clone();
                                *removed = true;
                            }
                        } else if let V::N(n) = item {
                            go(n, alias_id, expr, removed);
                        }
                    }
                }
                V::N(n) if n.is("Identifier") && py_eq(v, alias_id) => {
                    *v = expr.clone();
                }
                V::N(n) if n.is("Identifier") => {}
                V::N(n) => go(n, alias_id, expr, removed),
                _ => {}
            }
        }
    }
    go(node, alias_id, expr, &mut removed_any);
    if removed_any {
        Ok(())
    } else {
        // An alias whose expression differs from itself cannot happen; stop rather than loop.
        Err(Abort("alias could not be removed".into()))
    }
}

/// Rule 107: parentheses around one operand are dropped.
pub fn rule107(tree: &mut Node) -> Step<()> {
    Walk {
        skip: NO_SKIP,
        enter_replaced: true,
    }
    .node(tree, &mut |v, _| {
        if let V::N(n) = v
            && n.is("Paren")
            && n.args.len() == 1
        {
            let inner = n.get("this")?.clone();
            *v = inner;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Rule 108: quoted identifiers are unquoted.
pub fn rule108(tree: &mut Node) -> Step<()> {
    walk(tree, &mut |v, slot| {
        if let V::N(n) = v
            && !slot.in_list
            && n.is("Identifier")
            && matches!(n.opt("quoted"), Some(V::B(true)))
        {
            n.set("quoted", V::B(false));
        }
        Ok(false)
    })
}

fn eq_sides(eq: &Node) -> Step<(V, V)> {
    Ok((eq.get("this")?.clone(), eq.get("expression")?.clone()))
}

/// Rule 1: `WHERE c = (SELECT MIN/MAX(c) FROM t)` on a unique `c` is `ORDER BY c ASC/DESC
/// LIMIT 1`.
pub fn rule1(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if tree.has("order") || !tree.has("where") {
        return Ok(());
    }
    if let Some(limit) = tree.opt("limit")
        && !matches!(limit, V::Nil)
    {
        return Ok(());
    }
    let mut decided: Option<(bool, V)> = None;
    let where_node = tree.get_mut("where")?.node_mut()?;
    walk(where_node, &mut |v, slot| {
        if slot.in_list || !v.is("EQ") {
            return Ok(false);
        }
        let (this, expression) = eq_sides(v.node()?)?;
        let (subquery, col) = if expression.is("Subquery") {
            (expression, this)
        } else if this.is("Subquery") {
            (this, expression)
        } else {
            return Ok(false);
        };
        if !subquery.has("this")? {
            return Ok(false);
        }
        let select = subquery.get("this")?;
        if !select.has("expressions")? {
            return Ok(false);
        }
        let exprs = list_of(select.get("expressions")?, "expressions")?;
        if exprs.len() != 1 || !select.has("from")? || select.has("joins")? {
            return Ok(false);
        }
        let ex = &exprs[0];
        if !ex.is("Max") && !ex.is("Min") {
            return Ok(false);
        }
        if !ex.has("this")? || !col.has("table")? || !col.has("this")? {
            return Ok(false);
        }
        if !py_eq(ex.get("this")?, &col) {
            return Ok(false);
        }
        let col_table_name = col.get("table")?.get("this")?;
        let col_name = col.get("this")?.get("this")?;
        if col_table_name.is("Select") {
            return Ok(false);
        }
        if !listed(&schema.table(col_table_name)?.unique, col_name) {
            return Ok(false);
        }
        decided = Some((ex.is("Max"), col.clone()));
        *v = V::true_condition();
        Ok(true)
    })?;
    if let Some((desc, col)) = decided {
        tree.set(
            "order",
            V::n(
                "Order",
                vec![(
                    "expressions",
                    V::L(vec![V::n(
                        "Ordered",
                        vec![("this", col), ("desc", V::B(desc))],
                    )]),
                )],
            ),
        );
        tree.set(
            "limit",
            V::n("Limit", vec![("expression", V::literal("1.0", false))]),
        );
    }
    Ok(())
}

/// The `(table, column)` names of a column node, as the script reads them.
fn col_names(col: &V) -> Step<(V, V)> {
    Ok((
        col.get("table")?.get("this")?.clone(),
        col.get("this")?.get("this")?.clone(),
    ))
}

/// Rule 2: DISTINCT on a unique column (no joins) is dropped — the SELECT's, and an
/// aggregate's `DISTINCT c`.
pub fn rule2(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    let has_joins = tree.has("joins");
    if tree.has("distinct") && !has_joins && tree.has("expressions") {
        let exprs = list_of(tree.get("expressions")?, "expressions")?.clone();
        for ex in &exprs {
            if !ex.is("Column") || !ex.has("table")? {
                continue;
            }
            if ex.get("table")?.is("Select") {
                continue;
            }
            let table_this = ex.get("table")?.get("this")?;
            if table_this.is("Select") {
                continue;
            }
            if ex.get("this")?.is("Star") {
                continue;
            }
            let col_name = ex.get("this")?.get("this")?;
            if listed(&schema.table(table_this)?.unique, col_name) {
                tree.pop("distinct")?;
                break;
            }
        }
    }
    let process = |dist: &V| -> Step<Option<V>> {
        if !dist.has("expressions")? {
            return Ok(None);
        }
        let exprs = list_of(dist.get("expressions")?, "expressions")?;
        if exprs.len() != 1 {
            return Ok(None);
        }
        let col = &exprs[0];
        if !col.is("Column") {
            return Ok(None);
        }
        if !col.get("table")?.has("this")? {
            return Ok(None);
        }
        let (table, name) = col_names(col)?;
        if has_joins {
            return Ok(None);
        }
        if listed(&schema.table(&table)?.unique, &name) {
            return Ok(Some(col.clone()));
        }
        Ok(None)
    };
    replace_everywhere(tree, "Distinct", &mut |v| process(v))
}

/// Rule 4: GROUP BY a unique column makes the other grouping columns redundant (not with an
/// ORDER BY).
pub fn rule4(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if !tree.has("group") || tree.has("order") {
        return Ok(());
    }
    let exprs = list_of(tree.get("group")?.get("expressions")?, "group")?.clone();
    let mut new = Vec::new();
    for ex in &exprs {
        if ex.is("Column") && ex.has("table")? {
            let (table, name) = col_names(ex)?;
            if !table.is("Select") && listed(&schema.table(&table)?.unique, &name) {
                new = vec![ex.clone()];
                break;
            }
        }
        new.push(ex.clone());
    }
    tree.get_mut("group")?
        .node_mut()?
        .set("expressions", V::L(new));
    Ok(())
}

/// Rule 6: `COUNT(c)` on a NOT NULL column is `COUNT(*)`.
pub fn rule6(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    replace_everywhere(tree, "Count", &mut |count| {
        let col = count.get("this")?;
        if !col.is("Column") || !col.has("table")? || col.get("table")?.is("Select") {
            return Ok(None);
        }
        let (table, name) = col_names(col)?;
        if table.is("Select") {
            return Ok(None);
        }
        if listed(&schema.table(&table)?.non_null, &name) {
            return Ok(Some(V::n(
                "Count",
                vec![("this", V::n("Star", vec![])), ("big_int", V::B(true))],
            )));
        }
        Ok(None)
    })
}

/// Rule 7: `c IS NOT NULL` on a NOT NULL column is always true (WHERE only, not inside
/// subqueries).
pub fn rule7(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if !tree.has("where") {
        return Ok(());
    }
    let where_node = tree.get_mut("where")?.node_mut()?;
    Walk {
        skip: &|v| v.is("Subquery"),
        enter_replaced: false,
    }
    .node(where_node, &mut |v, slot| {
        if slot.in_list || !v.is("Not") {
            return Ok(false);
        }
        let is_clause = v.get("this")?;
        if !is_clause.is("Is") {
            return Ok(false);
        }
        let is_col = is_clause.get("this")?;
        if !is_col.is("Column") || !is_clause.has("expression")? {
            return Ok(false);
        }
        if !is_clause.get("expression")?.is("Null") {
            return Ok(false);
        }
        let (table, name) = col_names(is_col)?;
        if !listed(&schema.table(&table)?.non_null, &name) {
            return Ok(false);
        }
        *v = V::true_condition();
        Ok(true)
    })
}

/// Rule 8: `CAST(SUM(c) AS FLOAT) / COUNT(*)` on a NOT NULL `c` is `AVG(c)`.
pub fn rule8(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    replace_everywhere(tree, "Div", &mut |node| {
        if !node.has("this")? || !node.has("expression")? {
            return Ok(None);
        }
        let cast = node.get("this")?;
        if !cast.is("Cast") || !cast.has("this")? {
            return Ok(None);
        }
        let summer = cast.get("this")?;
        if !cast.has("to")? {
            return Ok(None);
        }
        let to = cast.get("to")?;
        if !to.is("DataType") || !summer.is("Sum") || !summer.has("this")? {
            return Ok(None);
        }
        let col = summer.get("this")?;
        if !col.is("Column") {
            return Ok(None);
        }
        match to.get("this")? {
            V::E(name) if *name == "FLOAT" => {}
            V::E(_) => return Ok(None),
            _ => return Err(Abort("a data type without a name".into())),
        }
        let exp = node.get("expression")?;
        if !exp.is("Count") || !exp.has("this")? || !exp.get("this")?.is("Star") {
            return Ok(None);
        }
        if !col.has("table")? || !col.has("this")? {
            return Ok(None);
        }
        let (table, name) = col_names(col)?;
        if !listed(&schema.table(&table)?.non_null, &name) {
            return Ok(None);
        }
        Ok(Some(V::n("Avg", vec![("this", col.clone())])))
    })
}

/// Rule 9: `COUNT(CASE WHEN p THEN 1 | c END)` (c NOT NULL) is `SUM(CASE WHEN p THEN 1 ELSE
/// 0 END)`.
pub fn rule9(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    replace_everywhere(tree, "Count", &mut |node| {
        if !node.has("this")? {
            return Ok(None);
        }
        let case = node.get("this")?;
        if !case.is("Case") {
            return Ok(None);
        }
        let default = case.get("default")?;
        if default.truthy() && !default.is("Null") {
            return Ok(None);
        }
        if !case.has("ifs")? {
            return Ok(None);
        }
        let ifs = list_of(case.get("ifs")?, "ifs")?;
        if ifs.len() != 1 {
            return Ok(None);
        }
        let ifexp = &ifs[0];
        if !ifexp.is("If") || !ifexp.has("true")? {
            return Ok(None);
        }
        let truth = ifexp.get("true")?;
        if !truth.is("Literal") && !truth.is("Column") {
            return Ok(None);
        }
        if truth.is("Literal") {
            if !truth.has("this")? {
                return Ok(None);
            }
            if truth.get("this")?.as_str() != Some("1.0") {
                return Ok(None);
            }
        }
        if truth.is("Column") {
            if !truth.has("table")? || !truth.has("this")? {
                return Ok(None);
            }
            if !truth.get("table")?.has("this")? || !truth.get("this")?.has("this")? {
                return Ok(None);
            }
            let (table, name) = col_names(truth)?;
            if table.is("Select") {
                return Ok(None);
            }
            if !listed(&schema.table(&table)?.non_null, &name) {
                return Ok(None);
            }
        }
        let condition = ifexp.get("this")?.clone();
        Ok(Some(V::n(
            "Sum",
            vec![(
                "this",
                V::n(
                    "Case",
                    vec![
                        (
                            "ifs",
                            V::L(vec![V::n(
                                "If",
                                vec![("this", condition), ("true", V::literal("1.0", false))],
                            )]),
                        ),
                        ("default", V::literal("0", false)),
                    ],
                ),
            )],
        )))
    })
}

/// Rule 10: `SELECT c … ORDER BY c ASC/DESC LIMIT 1` is `SELECT MIN/MAX(c) …`.
pub fn rule10(tree: &mut Node) -> Step<()> {
    if !tree.has("from") || !tree.has("order") {
        return Ok(());
    }
    let order = tree.get("order")?;
    if !order.has("expressions")? {
        return Ok(());
    }
    let items = list_of(order.get("expressions")?, "order")?;
    if items.len() != 1 {
        return Ok(());
    }
    let ordered = &items[0];
    let order_col = ordered.get("this")?.clone();
    let desc = ordered.get("desc")?.truthy();
    if !tree.has("limit") {
        return Ok(());
    }
    let limit = tree.get("limit")?;
    if matches!(limit, V::Nil) || !limit.has("expression")? {
        return Ok(());
    }
    if limit.get("expression")?.get("this")?.as_str() != Some("1.0") {
        return Ok(());
    }
    if !tree.has("expressions") {
        return Ok(());
    }
    let exprs = list_of(tree.get("expressions")?, "expressions")?.clone();
    let mut new = Vec::new();
    for ex in exprs {
        let ex = if py_eq(&ex, &order_col) {
            tree.pop("order")?;
            tree.pop("limit")?;
            V::n(if desc { "Max" } else { "Min" }, vec![("this", ex)])
        } else {
            ex
        };
        new.push(ex);
    }
    tree.set("expressions", V::L(new));
    Ok(())
}

/// Rule 11: `*` (or `t.*`) is the list of the table's columns.
pub fn rule11(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if !tree.has("expressions") {
        return Ok(());
    }
    let exprs = list_of(tree.get("expressions")?, "expressions")?.clone();
    let mut new = Vec::new();
    for ex in exprs {
        if ex.is("Column") && ex.get("this")?.is("Star") {
            if ex.has("table")? {
                let table = ex.get("table")?.clone();
                let name = table.get("this")?;
                for col in &schema.table(name)?.columns {
                    new.push(V::n(
                        "Column",
                        vec![("this", V::ident(col)), ("table", table.clone())],
                    ));
                }
            } else {
                let mut tables = vec![from_this(tree)?.clone()];
                for join in list_of(tree.get("joins")?, "joins")? {
                    tables.push(join.get("this")?.clone());
                }
                for table in tables {
                    let id = table.get("this")?.clone();
                    let name = id.get("this")?;
                    for col in &schema.table(name)?.columns {
                        new.push(V::n(
                            "Column",
                            vec![("this", V::ident(col)), ("table", id.clone())],
                        ));
                    }
                }
            }
        } else {
            new.push(ex);
        }
    }
    tree.set("expressions", V::L(new));
    Ok(())
}

/// Rule 12: numbers (and numeric strings) as floats — `150`, `150.0` and `'150'` agree; a
/// literal starting with `0` is left alone. Only single-valued literals (not IN lists).
pub fn rule12(tree: &mut Node) -> Step<()> {
    walk(tree, &mut |v, slot| {
        if let V::N(n) = v
            && !slot.in_list
            && n.is("Literal")
            && let Some(V::S(text)) = n.opt("this")
            && !text.is_empty()
            && !text.starts_with('0')
            && let Some(f) = python_float_str(text)
        {
            n.set("this", V::S(f));
            n.set("is_string", V::B(false));
        }
        Ok(false)
    })
}

/// Rule 13: `WHERE fk IN (SELECT pk FROM t [WHERE d])` is a join on the key (for `=`, only
/// with a WHERE on a unique column).
pub fn rule13(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if !tree.has("from") || tree.has("joins") || !tree.has("where") {
        return Ok(());
    }
    let condition = tree.get("where")?.get("this")?.clone();
    if !condition.is("In") && !condition.is("EQ") {
        return Ok(());
    }
    let eq = condition.is("EQ");
    let outer_table = from_this(tree)?.clone();
    if !condition.has("this")? {
        return Ok(());
    }
    let subquery = if eq {
        if !condition.has("expression")? {
            return Ok(());
        }
        let e = condition.get("expression")?;
        if !e.is("Subquery") {
            return Ok(());
        }
        e.clone()
    } else {
        if !condition.has("query")? {
            return Ok(());
        }
        let q = condition.get("query")?;
        if !q.is("Subquery") {
            return Ok(());
        }
        q.clone()
    };
    let outer_col = condition.get("this")?;
    if !outer_col.is("Column") || !subquery.has("this")? {
        return Ok(());
    }
    let select = subquery.get("this")?;
    if !outer_col.has("this")? || !outer_col.has("table")? {
        return Ok(());
    }
    if !outer_col.get("this")?.has("this")? || !outer_col.get("table")?.has("this")? {
        return Ok(());
    }
    if !select.has("expressions")? {
        return Ok(());
    }
    let inner_exp = list_of(select.get("expressions")?, "expressions")?;
    if inner_exp.len() != 1 {
        return Ok(());
    }
    let inner_col = &inner_exp[0];
    if !select.has("from")? {
        return Ok(());
    }
    let table = select.get("from")?.get("this")?.clone();
    if table.is("Subquery") {
        return Ok(());
    }
    let inner_table_name = table.get("this")?.get("this")?.clone();
    if !inner_col.has("this")? || !inner_col.get("this")?.has("this")? {
        return Ok(());
    }
    if !inner_col.has("table")? || !inner_col.get("table")?.has("this")? {
        return Ok(());
    }
    let inner_col_name = inner_col.get("this")?.get("this")?.clone();
    if !listed(
        &schema.table(&inner_table_name)?.primary_keys,
        &inner_col_name,
    ) {
        return Ok(());
    }
    let outer_table_name = outer_table.get("this")?.get("this")?.clone();
    let outer_col_name = outer_col.get("this")?.get("this")?.clone();
    let outer_info = schema.table(&outer_table_name)?;
    let Some(target) = outer_col_name
        .as_str()
        .and_then(|c| outer_info.foreign_keys.get(c))
    else {
        return Ok(());
    };
    let (Some(itn), Some(icn)) = (inner_table_name.as_str(), inner_col_name.as_str()) else {
        return Ok(());
    };
    if *target != format!("{itn}.{icn}") {
        return Ok(());
    }
    let new_where = if select.has("where")? {
        let w = select.get("where")?.get("this")?.clone();
        if eq {
            if !w.is("EQ") || !w.has("this")? || !w.has("expression")? {
                return Ok(());
            }
            let col = w.get("this")?;
            if !col.is("Column") || !col.has("table")? || !col.has("this")? {
                return Ok(());
            }
            let col_table_name = col.get("table")?.get("this")?;
            if !col.get("this")?.has("this")? {
                return Ok(());
            }
            let col_name = col.get("this")?.get("this")?;
            if !listed(&schema.table(col_table_name)?.unique, col_name) {
                return Ok(());
            }
        }
        w
    } else {
        if eq {
            return Ok(());
        }
        V::true_condition()
    };
    let (Some(otn), Some(ocn)) = (outer_table_name.as_str(), outer_col_name.as_str()) else {
        return Ok(());
    };
    let on = V::n(
        "EQ",
        vec![
            ("this", V::column(itn, icn)),
            ("expression", V::column(otn, ocn)),
        ],
    );
    tree.get_mut("where")?.node_mut()?.set("this", new_where);
    tree.set(
        "joins",
        V::L(vec![V::n("Join", vec![("this", table), ("on", on)])]),
    );
    Ok(())
}

/// Rule 14: a join to a table whose only use is its primary key, along a declared foreign
/// key, is dropped (the key's uses become the foreign-key column).
pub fn rule14(tree: &mut Node, schema: &EtmSchema) -> Step<()> {
    if !tree.has("from") || !tree.has("joins") || !tree.has("expressions") {
        return Ok(());
    }
    let mut eqs: Vec<V> = Vec::new();
    for join in list_of(tree.get("joins")?, "joins")? {
        if join.has("side")? {
            return Ok(());
        }
        if join.has("on")? {
            let on = join.get("on")?;
            if on.is("And") {
                eqs = Vec::new();
                let mut stack = vec![on.clone()];
                while let Some(current) = stack.pop() {
                    if current.is("EQ") {
                        eqs.push(current);
                    } else if current.is("And") {
                        stack.push(current.get("this")?.clone());
                        stack.push(current.get("expression")?.clone());
                    }
                }
            } else {
                eqs.push(on.clone());
            }
        }
    }
    struct Removal {
        table: V,
        eq: V,
        primary_table: String,
        foreign_table: String,
        primary_col: String,
        foreign_col: String,
    }
    let mut remove = Vec::new();
    for eq in &eqs {
        if !eq.has("this")? || !eq.has("expression")? {
            continue;
        }
        let (val1, val2) = eq_sides(eq.node()?)?;
        if !val1.is("Column") || !val2.is("Column") {
            continue;
        }
        if !val1.has("table")? || !val2.has("table")? {
            continue;
        }
        if !val1.get("table")?.has("this")? || !val2.get("table")?.has("this")? {
            continue;
        }
        let table1 = val1.get("table")?.get("this")?.clone();
        let table2 = val2.get("table")?.get("this")?.clone();
        if table1.is("Select") || table2.is("Select") {
            continue;
        }
        if !val1.has("this")? || !val2.has("this")? {
            continue;
        }
        let col1 = val1.get("this")?.get("this")?.clone();
        let col2 = val2.get("this")?.get("this")?.clone();
        let fk_of = |table: &V, col: &V| -> Step<Option<String>> {
            Ok(col
                .as_str()
                .and_then(|c| schema.table(table).ok()?.foreign_keys.get(c).cloned()))
        };
        let name = |v: &V| v.as_str().unwrap_or_default().to_string();
        let mut pair: Option<(String, String, String, String)> = None;
        if listed(&schema.table(&table1)?.primary_keys, &col1) {
            schema.table(&table2)?;
            if fk_of(&table2, &col2)? == Some(format!("{}.{}", name(&table1), name(&col1))) {
                pair = Some((name(&table1), name(&col1), name(&table2), name(&col2)));
            }
        }
        if pair.is_none() && listed(&schema.table(&table2)?.primary_keys, &col2) {
            schema.table(&table1)?;
            if fk_of(&table1, &col1)? == Some(format!("{}.{}", name(&table2), name(&col2))) {
                pair = Some((name(&table2), name(&col2), name(&table1), name(&col1)));
            }
        }
        let Some((primary_table, primary_col, foreign_table, foreign_col)) = pair else {
            continue;
        };
        if schema
            .table(&V::S(primary_table.clone()))?
            .primary_keys
            .len()
            > 1
        {
            continue;
        }
        if !only_key_used(tree, &primary_table, &primary_col)? {
            continue;
        }
        remove.push(Removal {
            table: V::n("Table", vec![("this", V::ident(&primary_table))]),
            eq: eq.clone(),
            primary_table,
            foreign_table,
            primary_col,
            foreign_col,
        });
    }
    for r in remove {
        let mut tables = tables_of(tree)?;
        let Some(pos) = tables.iter().position(|t| py_eq(t, &r.table)) else {
            continue;
        };
        tables.remove(pos);
        let Some(eq_pos) = eqs.iter().position(|e| py_eq(e, &r.eq)) else {
            return Err(Abort("list.remove(x): x not in list".into()));
        };
        eqs.remove(eq_pos);
        if tables.len() == 1 {
            tree.get_mut("from")?
                .node_mut()?
                .set("this", tables[0].clone());
            tree.set("joins", V::L(Vec::new()));
        } else {
            let on = match eqs.len() {
                0 => V::true_condition(),
                1 => eqs[0].clone(),
                _ => {
                    let mut it = eqs.iter().cloned();
                    let mut on = it.next().unwrap_or(V::Nil);
                    for e in it {
                        on = V::n("And", vec![("this", on), ("expression", e)]);
                    }
                    on
                }
            };
            tree.get_mut("from")?
                .node_mut()?
                .set("this", tables[0].clone());
            let mut joins = vec![V::n("Join", vec![("this", tables[1].clone()), ("on", on)])];
            for t in &tables[2..] {
                joins.push(V::n("Join", vec![("this", t.clone())]));
            }
            tree.set("joins", V::L(joins));
        }
        let replacement = V::column(&r.foreign_table, &r.foreign_col);
        replace_everywhere(tree, "Column", &mut |col| {
            if !col.has("table")? {
                return Ok(None);
            }
            let table = col.get("table")?;
            if !table.has("this")? {
                return Ok(None);
            }
            if table.get("this")?.as_str() != Some(r.primary_table.as_str()) {
                return Ok(None);
            }
            let this = col.get("this")?;
            if !this.has("this")? {
                return Ok(None);
            }
            if this.get("this")?.as_str() == Some(r.primary_col.as_str()) {
                return Ok(Some(replacement.clone()));
            }
            Ok(None)
        })?;
    }
    Ok(())
}

/// Rule 14's `isValid`: no column of `pk_table` other than its key (subqueries not entered).
fn only_key_used(tree: &Node, pk_table: &str, pk_col: &str) -> Step<bool> {
    fn check(col: &V, pk_table: &str, pk_col: &str) -> Step<bool> {
        if !col.is("Column") || !col.has("table")? {
            return Ok(true);
        }
        let table = col.get("table")?;
        if !table.has("this")? || table.get("this")?.as_str() != Some(pk_table) {
            return Ok(true);
        }
        let this = col.get("this")?;
        if this.has("this")? {
            Ok(this.get("this")?.as_str() == Some(pk_col))
        } else {
            Ok(false)
        }
    }
    fn go(node: &Node, pk_table: &str, pk_col: &str) -> Step<bool> {
        for (_, v) in &node.args {
            if v.is("Select") {
                continue;
            }
            if let V::L(items) = v {
                for item in items {
                    if !check(item, pk_table, pk_col)? {
                        return Ok(false);
                    }
                    if let V::N(n) = item
                        && !go(n, pk_table, pk_col)?
                    {
                        return Ok(false);
                    }
                }
            }
            if let V::N(n) = v {
                if !check(v, pk_table, pk_col)? {
                    return Ok(false);
                }
                if !go(n, pk_table, pk_col)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
    go(tree, pk_table, pk_col)
}

/// Rule 15: `SUBSTR(c, 1, n) = x AND SUBSTR(c, n + 1, m) <op> y` is `c <op> 'xy'`.
pub fn rule15(tree: &mut Node) -> Step<()> {
    fn extract_ands(node: &V) -> Vec<V> {
        let mut out = Vec::new();
        let mut stack = vec![node.clone()];
        while let Some(current) = stack.pop() {
            if let V::N(n) = &current {
                for (_, v) in &n.args {
                    if v.is("And") {
                        stack.push(v.clone());
                    } else if v.is_node() {
                        out.push(v.clone());
                    }
                }
            }
        }
        out
    }
    fn substr_parts(s: &V) -> Step<(V, V, V)> {
        Ok((
            s.get("this")?.clone(),
            s.get("start")?.clone(),
            s.get("length")?.clone(),
        ))
    }
    fn float_of(v: &V) -> Step<f64> {
        let text = v.get("this")?;
        text.as_str()
            .and_then(python_float_str)
            .and_then(|t| t.parse::<f64>().ok())
            .ok_or_else(|| Abort("float() of a non-number".into()))
    }
    fn strip_point_zero(text: &str) -> String {
        text.strip_suffix(".0").unwrap_or(text).to_string()
    }
    walk(tree, &mut |v, slot| {
        if slot.in_list || !v.is("And") {
            return Ok(false);
        }
        let ands = extract_ands(v);
        let comparison = |n: &V| ["EQ", "GTE", "LTE", "GT", "LT"].iter().any(|c| n.is(c));
        let mut with_substr = Vec::new();
        let mut newands = Vec::new();
        for node in &ands {
            if comparison(node) {
                let (a, b) = eq_sides(node.node()?)?;
                if a.is("Substring") || b.is("Substring") {
                    with_substr.push(node.clone());
                }
            }
            newands.push(node.clone());
        }
        if with_substr.len() < 2 {
            return Ok(false);
        }
        let eqs: Vec<V> = with_substr.iter().filter(|n| n.is("EQ")).cloned().collect();
        for eq in &eqs {
            let (e1, e2) = eq_sides(eq.node()?)?;
            let mut parts = None;
            if e1.is("Substring") {
                let (c, s, l) = substr_parts(&e1)?;
                parts = Some((c, s, l, e2.clone()));
            }
            if e2.is("Substring") {
                let (c, s, l) = substr_parts(&e2)?;
                parts = Some((c, s, l, e1.clone()));
            }
            let Some((eqcol, eqstart, eqlength, eqlit)) = parts else {
                continue;
            };
            for node in &with_substr {
                let class = match node.node()?.class {
                    c @ ("GTE" | "LTE" | "GT" | "LT") => c,
                    _ => continue,
                };
                let (v1, v2) = eq_sides(node.node()?)?;
                let (col, start, _length, lit) = if v1.is("Substring") {
                    let (c, s, l) = substr_parts(&v1)?;
                    (c, s, l, v2.clone())
                } else if v2.is("Substring") {
                    let (c, s, l) = substr_parts(&v2)?;
                    (c, s, l, v1.clone())
                } else {
                    continue;
                };
                if !py_eq(&col, &eqcol) || float_of(&eqstart)? != 1.0 {
                    continue;
                }
                if float_of(&eqstart)? + float_of(&eqlength)? != float_of(&start)? {
                    continue;
                }
                let text = |l: &V| -> Step<String> {
                    l.get("this")?
                        .as_str()
                        .map(strip_point_zero)
                        .ok_or_else(|| Abort("a literal without text".into()))
                };
                let joined = format!("{}{}", text(&eqlit)?, text(&lit)?);
                newands.push(V::n(
                    class,
                    vec![
                        ("this", col.clone()),
                        ("expression", V::literal(&joined, true)),
                    ],
                ));
                if let Some(p) = newands.iter().position(|x| py_eq(x, eq)) {
                    newands.remove(p);
                }
                if let Some(p) = newands.iter().position(|x| py_eq(x, node)) {
                    newands.remove(p);
                }
            }
        }
        let mut it = newands.into_iter();
        if let Some(mut new) = it.next() {
            for node in it {
                new = V::n("And", vec![("this", new), ("expression", node)]);
            }
            *v = new;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Rule 16: `c LIKE 'abc%'` is `SUBSTR(c, 1, 3) = 'abc'`.
pub fn rule16(tree: &mut Node) -> Step<()> {
    replace_values(tree, "Like", &mut |like| {
        let col = like.get("this")?.clone();
        let pattern = like.get("expression")?.get("this")?;
        let Some(pattern) = pattern.as_str() else {
            return Err(Abort("a LIKE pattern that is not a string".into()));
        };
        let chars: Vec<char> = pattern.chars().collect();
        match chars.iter().position(|c| *c == '%') {
            Some(i) if i == chars.len() - 1 => {
                let prefix: String = chars[..i].iter().collect();
                Ok(Some(V::n(
                    "EQ",
                    vec![
                        (
                            "this",
                            V::n(
                                "Substring",
                                vec![
                                    ("this", col),
                                    ("start", V::literal("1.0", true)),
                                    ("length", V::literal(&format!("{i}.0"), true)),
                                ],
                            ),
                        ),
                        ("expression", V::literal(&prefix, true)),
                    ],
                )))
            }
            _ => Ok(None),
        }
    })
}

/// Rule 17: `ORDER BY JULIANDAY(c)` is `ORDER BY c`.
pub fn rule17(tree: &mut Node) -> Step<()> {
    if !tree.has("order") {
        return Ok(());
    }
    let order = tree.get_mut("order")?.node_mut()?;
    if !order.has("expressions") {
        return Ok(());
    }
    let V::L(items) = order.get_mut("expressions")? else {
        return Err(Abort("order is not a list".into()));
    };
    if items.len() != 1 {
        return Ok(());
    }
    let exp = items[0].node_mut()?;
    if !exp.has("this") {
        return Ok(());
    }
    let val = exp.get("this")?;
    if !val.is("Anonymous") || !val.has("this")? {
        return Ok(());
    }
    if val.get("this")?.as_str() != Some("julianday") {
        return Ok(());
    }
    let col = list_of(val.get("expressions")?, "expressions")?
        .first()
        .cloned()
        .ok_or_else(|| Abort("list index out of range".into()))?;
    exp.set("this", col);
    Ok(())
}

/// Rule 18: `c IN (a, b)` is `c = a OR c = b`; `c NOT IN (a, b)` is `c != a AND c != b`.
pub fn rule18(tree: &mut Node) -> Step<()> {
    fn chain(class: &'static str, cmp: &'static str, col: &V, items: &[V]) -> Step<V> {
        let mut it = items.iter();
        let first = it
            .next()
            .ok_or_else(|| Abort("StopIteration: an empty IN list".into()))?;
        let mk = |i: &V| V::n(cmp, vec![("this", col.clone()), ("expression", i.clone())]);
        let mut result = mk(first);
        for i in it {
            result = V::n(class, vec![("this", result), ("expression", mk(i))]);
        }
        Ok(result)
    }
    walk(tree, &mut |v, slot| {
        if slot.in_list {
            return Ok(false);
        }
        if v.is("Not") {
            let inner = v.get("this")?;
            if inner.is("In") && inner.has("expressions")? {
                let col = inner.get("this")?.clone();
                let items = list_of(inner.get("expressions")?, "expressions")?.clone();
                *v = chain("And", "NEQ", &col, &items)?;
                return Ok(true);
            }
        }
        if v.is("In") && v.has("expressions")? {
            let col = v.get("this")?.clone();
            let items = list_of(v.get("expressions")?, "expressions")?.clone();
            *v = chain("Or", "EQ", &col, &items)?;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Rule 19: across an inner join's `a = b`, the right-hand column is replaced by the
/// left-hand one outside the join conditions (subqueries not entered), and uniqueness /
/// NOT NULL carry over between the two columns for the rest of the pair.
pub fn rule19(tree: &mut Node, schema: &mut EtmSchema) -> Step<()> {
    let mut ons = Vec::new();
    collect_join_ons(tree, &mut ons);
    for index in 0..ons.len() {
        // Re-read the condition: earlier replacements may have changed it.
        let mut current = Vec::new();
        collect_join_ons(tree, &mut current);
        let Some(on) = current.get(index).cloned() else {
            break;
        };
        if on.is("EQ") || on.is("And") {
            replace_join_equalities(tree, &on, schema)?;
        }
    }
    Ok(())
}

/// The ON conditions of inner joins that have one, in the script's visiting order: the
/// query's own joins first, then those of nested queries.
fn collect_join_ons(node: &Node, out: &mut Vec<V>) {
    let mut nested = Vec::new();
    for (_, v) in &node.args {
        if let V::L(items) = v {
            for item in items {
                if let V::N(j) = item
                    && j.is("Join")
                    && j.has("on")
                    && !j.has("side")
                    && let Some(on) = j.opt("on")
                {
                    out.push(on.clone());
                }
                if let V::N(n) = item {
                    nested.push(n.as_ref());
                }
            }
        } else if let V::N(n) = v {
            nested.push(n.as_ref());
        }
    }
    for n in nested {
        collect_join_ons(n, out);
    }
}

fn replace_join_equalities(tree: &mut Node, on: &V, schema: &mut EtmSchema) -> Step<()> {
    let eqs: Vec<V> = if on.is("And") {
        let mut eqs = Vec::new();
        let mut stack = vec![on.clone()];
        while let Some(current) = stack.pop() {
            if current.is("EQ") {
                eqs.push(current);
            } else if current.is("And") {
                stack.push(current.get("this")?.clone());
                stack.push(current.get("expression")?.clone());
            }
        }
        eqs
    } else {
        vec![on.clone()]
    };
    for eq in &eqs {
        let (val1, val2) = eq_sides(eq.node()?)?;
        if val1.is("Column")
            && val2.is("Column")
            && val1.has("table")?
            && val2.has("table")?
            && val1.get("table")?.has("this")?
            && val2.get("table")?.has("this")?
        {
            let t1 = val1.get("table")?.get("this")?.clone();
            let c1 = val1.get("this")?.get("this")?.clone();
            let t2 = val2.get("table")?.get("this")?.clone();
            let c2 = val2.get("this")?.get("this")?.clone();
            if !t1.is("Select") && !t2.is("Select") {
                carry(schema, &t1, &c1, &t2, &c2, |t| &mut t.unique)?;
                carry(schema, &t1, &c1, &t2, &c2, |t| &mut t.non_null)?;
            }
        }
        let from = val2.clone();
        let to = val1.clone();
        replace_column(tree, &from, &to, &eqs);
    }
    Ok(())
}

/// If either column has the property, the other gets it too (the script's order of checks).
fn carry(
    schema: &mut EtmSchema,
    t1: &V,
    c1: &V,
    t2: &V,
    c2: &V,
    facts: fn(&mut EtmTable) -> &mut Vec<String>,
) -> Step<()> {
    if listed(facts(schema.table_mut(t1)?), c1)
        && !listed(facts(schema.table_mut(t2)?), c2)
        && let Some(c) = c2.as_str()
    {
        facts(schema.table_mut(t2)?).push(c.to_string());
    }
    if listed(facts(schema.table_mut(t2)?), c2)
        && !listed(facts(schema.table_mut(t1)?), c1)
        && let Some(c) = c1.as_str()
    {
        facts(schema.table_mut(t1)?).push(c.to_string());
    }
    Ok(())
}

fn replace_column(node: &mut Node, from: &V, to: &V, eqs: &[V]) {
    let parent_is_eq = eqs
        .iter()
        .any(|e| matches!(e, V::N(n) if super::tree::node_eq(n, node)));
    for (_, v) in node.args.iter_mut() {
        match v {
            V::L(items) => {
                for item in items.iter_mut() {
                    if item.is("Column") && py_eq(item, from) {
                        *item = to.clone();
                    }
                    if let V::N(n) = item {
                        replace_column(n, from, to, eqs);
                    }
                }
            }
            V::N(n) if n.is("Select") => {}
            V::N(n) => {
                if n.is("Column") && !parent_is_eq && py_eq(v, from) {
                    *v = to.clone();
                } else if let V::N(n) = v {
                    replace_column(n, from, to, eqs);
                }
            }
            _ => {}
        }
    }
}

/// Rule 20: `WHERE t.c IN (SELECT t.c FROM t WHERE d)` is `WHERE d`.
pub fn rule20(tree: &mut Node) -> Step<()> {
    if !tree.has("where") {
        return Ok(());
    }
    let where_node = tree.get_mut("where")?.node_mut()?;
    Walk {
        skip: &|v| v.is("Subquery"),
        enter_replaced: false,
    }
    .node(where_node, &mut |v, slot| {
        if slot.in_list || !v.is("In") || !v.has("query")? {
            return Ok(false);
        }
        let in_col = v.get("this")?;
        let in_sub = v.get("query")?.get("this")?;
        if !in_sub.is("Select") || !in_sub.has("expressions")? {
            return Ok(false);
        }
        let exprs = list_of(in_sub.get("expressions")?, "expressions")?;
        if exprs.len() != 1 || !py_eq(&exprs[0], in_col) || !in_sub.has("from")? {
            return Ok(false);
        }
        if !py_eq(
            in_sub.get("from")?.get("this")?.get("this")?,
            in_col.get("table")?,
        ) {
            return Ok(false);
        }
        if in_sub.has("where")? {
            let inner = in_sub.get("where")?.get("this")?.clone();
            *v = inner;
            return Ok(true);
        }
        Ok(false)
    })
}

/// Rule 22: `a BETWEEN x AND y` is `a >= x AND a <= y`.
pub fn rule22(tree: &mut Node) -> Step<()> {
    replace_values(tree, "Between", &mut |b| {
        let col = b.get("this")?.clone();
        let low = b.get("low")?.clone();
        let high = b.get("high")?.clone();
        Ok(Some(V::n(
            "And",
            vec![
                (
                    "this",
                    V::n("GTE", vec![("this", col.clone()), ("expression", low)]),
                ),
                (
                    "expression",
                    V::n("LTE", vec![("this", col), ("expression", high)]),
                ),
            ],
        )))
    })
}

/// Rule 23: a negated comparison is the opposite comparison.
pub fn rule23(tree: &mut Node) -> Step<()> {
    replace_values(tree, "Not", &mut |not| {
        let inner = not.get("this")?;
        let class = match inner.as_node().map(|n| n.class) {
            Some("EQ") => "NEQ",
            Some("NEQ") => "EQ",
            Some("GT") => "LTE",
            Some("GTE") => "LT",
            Some("LT") => "GTE",
            Some("LTE") => "GT",
            _ => return Ok(None),
        };
        Ok(Some(V::n(
            class,
            vec![
                ("this", inner.get("this")?.clone()),
                ("expression", inner.get("expression")?.clone()),
            ],
        )))
    })
}

/// Rule 24: `IIF(p, a, b)` is `CASE WHEN p THEN a ELSE b END`.
pub fn rule24(tree: &mut Node) -> Step<()> {
    replace_values(tree, "If", &mut |i| {
        if !i.has("this")? || !i.has("true")? || !i.has("false")? {
            return Ok(None);
        }
        let (this, truth, falsity) = (
            i.get("this")?.clone(),
            i.get("true")?.clone(),
            i.get("false")?.clone(),
        );
        Ok(Some(V::n(
            "Case",
            vec![
                (
                    "ifs",
                    V::L(vec![V::n("If", vec![("this", this), ("true", truth)])]),
                ),
                ("default", falsity),
            ],
        )))
    })
}

/// Rule 25: `a LEFT JOIN b ON a.x = b.y WHERE b.z IS NULL` is `a WHERE a.x NOT IN (SELECT
/// b.y FROM b)`.
pub fn rule25(tree: &mut Node) -> Step<()> {
    if !tree.has("where") || !tree.has("joins") {
        return Ok(());
    }
    let joins = list_of(tree.get("joins")?, "joins")?;
    if joins.len() != 1 {
        return Ok(());
    }
    let join = &joins[0];
    if !join.has("side")? || join.get("side")?.as_str() != Some("left") {
        return Ok(());
    }
    let cond = tree.get("where")?.get("this")?;
    if !cond.is("Is") {
        return Ok(());
    }
    let col = cond.get("this")?;
    if !cond.get("expression")?.is("Null") || !join.has("on")? {
        return Ok(());
    }
    let on = join.get("on")?;
    if !on.is("EQ") || !on.has("this")? || !on.has("expression")? || !tree.has("from") {
        return Ok(());
    }
    let fromtable = from_this(tree)?;
    let (v1, v2) = eq_sides(on.node()?)?;
    let fromtablename = fromtable.get("this")?.get("this")?;
    let condtablename = col.get("table")?.get("this")?.clone();
    let table_of = |v: &V| -> Step<V> { Ok(v.get("table")?.get("this")?.clone()) };
    let (c1, c2) = if py_eq(&table_of(&v1)?, fromtablename) {
        if !py_eq(&table_of(&v2)?, &condtablename) {
            return Ok(());
        }
        (v1, v2)
    } else {
        if !py_eq(&table_of(&v1)?, &condtablename) {
            return Ok(());
        }
        (v2, v1)
    };
    let Some(cond_table) = condtablename.as_str() else {
        return Err(Abort("a table name that is not a name".into()));
    };
    let select = V::n(
        "Select",
        vec![
            ("expressions", V::L(vec![c2])),
            (
                "from",
                V::n(
                    "From",
                    vec![("this", V::n("Table", vec![("this", V::ident(cond_table))]))],
                ),
            ),
        ],
    );
    let new = V::n(
        "Not",
        vec![(
            "this",
            V::n(
                "In",
                vec![
                    ("this", c1),
                    ("query", V::n("Subquery", vec![("this", select)])),
                ],
            ),
        )],
    );
    tree.set("where", V::n("Where", vec![("this", new)]));
    tree.pop("joins")?;
    Ok(())
}

/// The script's `cleanTrues`: `x AND/OR <a = a>` is `x`; a WHERE of `a = a` is removed (and,
/// quirk kept, the query's own WHERE is popped when a subquery's is).
pub fn clean_trues(tree: &mut Node) -> Step<()> {
    fn is_true(v: &V) -> bool {
        match v.as_node() {
            Some(n) if n.is("EQ") => match (n.opt("this"), n.opt("expression")) {
                (Some(a), Some(b)) => py_eq(a, b),
                _ => false,
            },
            _ => false,
        }
    }
    let mut pop_where = false;
    Walk {
        skip: NO_SKIP,
        enter_replaced: true,
    }
    .node(tree, &mut |v, slot| {
        if slot.in_list {
            return Ok(false);
        }
        if v.is("And") || v.is("Or") {
            let (a, b) = eq_sides(v.node()?)?;
            if is_true(&a) {
                *v = b;
                return Ok(true);
            } else if is_true(&b) {
                *v = a;
                return Ok(true);
            }
        }
        if v.is("Where") && is_true(v.get("this")?) {
            *v = V::Nil;
            pop_where = true;
            return Ok(true);
        }
        Ok(false)
    })?;
    if pop_where {
        tree.pop("where")?;
    }
    Ok(())
}
