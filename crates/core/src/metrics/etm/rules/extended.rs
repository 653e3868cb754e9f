//! ETM's own rules 21–26 (BETWEEN, negated comparisons, IIF, anti joins, CTEs) and the final
//! clean-up of `TRUE` conditions.

use super::{NO_SKIP, Walk, eq_sides, from_this, list_of, replace_values};
use crate::metrics::etm::tree::{Abort, Node, Step, V, py_eq};

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
