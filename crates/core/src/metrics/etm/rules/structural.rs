//! The structural rules 100–108 of the released script: case, qualification, SELECT order,
//! table aliases, join order, operand order, column aliases, parentheses, quoting.

use super::{EtmSchema, NO_SKIP, Walk, from_this, list_of, listed, tables_of, walk};
use crate::metrics::etm::tree::{Abort, Node, Step, V, py_eq, sort_values};

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
