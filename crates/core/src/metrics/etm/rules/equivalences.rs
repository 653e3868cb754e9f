//! ESM+'s schema-checked equivalences 1–12 (the script's rules 1–12).

use super::{EtmSchema, Walk, eq_sides, from_this, list_of, listed, replace_everywhere, walk};
use crate::metrics::etm::tree::{Abort, Node, Step, V, py_eq, python_float_str};

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
