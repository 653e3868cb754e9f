//! ESM+'s equivalences 13–20: keys and joins (IN-subqueries as joins, redundant joins, join
//! equalities carried through, …).

use super::{
    EtmSchema, EtmTable, Walk, eq_sides, from_this, list_of, listed, replace_everywhere,
    replace_values, tables_of, walk,
};
use crate::metrics::etm::tree::{Abort, Node, Step, V, py_eq, python_float_str};

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

/// Rule 15: the operands of a tree of `And`s (the non-`And` nodes below it).
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

/// Rule 15: a `Substring`'s column, start and length.
fn substr_parts(s: &V) -> Step<(V, V, V)> {
    Ok((
        s.get("this")?.clone(),
        s.get("start")?.clone(),
        s.get("length")?.clone(),
    ))
}

/// Rule 15: Python's `float()` of a literal's text.
fn float_of(v: &V) -> Step<f64> {
    let text = v.get("this")?;
    text.as_str()
        .and_then(python_float_str)
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or_else(|| Abort("float() of a non-number".into()))
}

/// Rule 15: a number's text without a trailing `.0`.
fn strip_point_zero(text: &str) -> String {
    text.strip_suffix(".0").unwrap_or(text).to_string()
}

/// Rule 15: `SUBSTR(c, 1, n) = x AND SUBSTR(c, n + 1, m) <op> y` is `c <op> 'xy'`.
pub fn rule15(tree: &mut Node) -> Step<()> {
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
        .any(|e| matches!(e, V::N(n) if crate::metrics::etm::tree::node_eq(n, node)));
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
