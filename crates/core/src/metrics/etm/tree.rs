//! The tree ETM's rules rewrite: a plain-data model of the expression trees of the SQL library
//! the official script uses (sqlglot 26.6), down to what its rules can observe — node classes,
//! each node's argument map *with* its absent/`None` distinction, and the library's equality.
//!
//! Why a dynamic map and not typed structs: the released rules test `'limit' in node.args`,
//! index keys that may be missing, and replace nodes with nodes of other classes (a column's
//! table becomes a subquery). A faithful port has to be able to express exactly those states,
//! including the ones in which the original raises — [`Abort`] is that raise, and a pair whose
//! rewriting aborts is not a match, as in the script.
//!
//! Equality follows the library: same class, and the same arguments ignoring `None`, `False`
//! and empty lists, with plain string arguments compared case-insensitively — except that
//! identifiers compare `(name, quoted)` and literals `(text, is_string)` exactly.

use std::fmt::Write as _;

/// Why a rewrite stopped where the original script raises (a missing key, an attribute of a
/// non-node, an unknown table). The pair then does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abort(pub String);

/// `Result` of a step that may abort.
pub type Step<T> = Result<T, Abort>;

/// One argument value.
#[derive(Debug, Clone)]
pub enum V {
    /// A node.
    N(Box<Node>),
    /// A list of values.
    L(Vec<V>),
    /// A plain string (lowercased by rule 100, compared case-insensitively).
    S(String),
    /// A flag.
    B(bool),
    /// An enumeration value (a data type): neither lowercased nor case-folded.
    E(&'static str),
    /// Present but `None`.
    Nil,
}

/// A node: its class and its arguments in insertion order.
#[derive(Debug, Clone)]
pub struct Node {
    /// Class name, e.g. `Select`, `Column`, `EQ`.
    pub class: &'static str,
    /// Arguments, in insertion order (a key appears once).
    pub args: Vec<(&'static str, V)>,
}

impl Node {
    /// A node of `class` with `args`.
    pub fn new(class: &'static str, args: Vec<(&'static str, V)>) -> Node {
        Node { class, args }
    }

    /// Whether this node is of `class`.
    pub fn is(&self, class: &str) -> bool {
        self.class == class
    }

    /// `key in node.args` (true for a key present with `None`).
    pub fn has(&self, key: &str) -> bool {
        self.args.iter().any(|(k, _)| *k == key)
    }

    /// `node.args[key]`, aborting like a `KeyError`.
    pub fn get(&self, key: &str) -> Step<&V> {
        self.args
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| Abort(format!("{} has no {key}", self.class)))
    }

    /// Mutable `node.args[key]`.
    pub fn get_mut(&mut self, key: &str) -> Step<&mut V> {
        let class = self.class;
        self.args
            .iter_mut()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| Abort(format!("{class} has no {key}")))
    }

    /// `node.args.get(key)`: the value, `None` when absent.
    pub fn opt(&self, key: &str) -> Option<&V> {
        self.args.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// `node.args[key] = value` (keeps the key's position when it exists).
    pub fn set(&mut self, key: &'static str, value: V) {
        match self.args.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.args.push((key, value)),
        }
    }

    /// `node.args.pop(key)`, aborting when absent.
    pub fn pop(&mut self, key: &str) -> Step<V> {
        match self.args.iter().position(|(k, _)| *k == key) {
            Some(i) => Ok(self.args.remove(i).1),
            None => Err(Abort(format!("{} has no {key} to pop", self.class))),
        }
    }
}

impl V {
    /// A node value.
    pub fn n(class: &'static str, args: Vec<(&'static str, V)>) -> V {
        V::N(Box::new(Node::new(class, args)))
    }

    /// An unquoted identifier.
    pub fn ident(name: &str) -> V {
        V::n(
            "Identifier",
            vec![("this", V::S(name.to_string())), ("quoted", V::B(false))],
        )
    }

    /// A literal.
    pub fn literal(text: &str, is_string: bool) -> V {
        V::n(
            "Literal",
            vec![
                ("this", V::S(text.to_string())),
                ("is_string", V::B(is_string)),
            ],
        )
    }

    /// `1.0 = 1.0`, the script's placeholder for a removed condition.
    pub fn true_condition() -> V {
        V::n(
            "EQ",
            vec![
                ("this", V::literal("1.0", false)),
                ("expression", V::literal("1.0", false)),
            ],
        )
    }

    /// `Column(this=Identifier(col), table=Identifier(table))`.
    pub fn column(table: &str, col: &str) -> V {
        V::n(
            "Column",
            vec![("this", V::ident(col)), ("table", V::ident(table))],
        )
    }

    /// The node, or an abort like an attribute access on a non-node.
    pub fn node(&self) -> Step<&Node> {
        match self {
            V::N(n) => Ok(n),
            other => Err(Abort(format!("not a node: {}", other.kind_name()))),
        }
    }

    /// Mutable node.
    pub fn node_mut(&mut self) -> Step<&mut Node> {
        match self {
            V::N(n) => Ok(n),
            other => Err(Abort(format!("not a node: {}", other.kind_name()))),
        }
    }

    /// The node when this is one.
    pub fn as_node(&self) -> Option<&Node> {
        match self {
            V::N(n) => Some(n),
            _ => None,
        }
    }

    /// Whether this is a node of `class`.
    pub fn is(&self, class: &str) -> bool {
        matches!(self, V::N(n) if n.class == class)
    }

    /// Whether this is a node (an `Expression`).
    pub fn is_node(&self) -> bool {
        matches!(self, V::N(_))
    }

    /// `value.args[key]`.
    pub fn get(&self, key: &str) -> Step<&V> {
        self.node()?.get(key)
    }

    /// `key in value.args` (aborts on a non-node, like the original).
    pub fn has(&self, key: &str) -> Step<bool> {
        Ok(self.node()?.has(key))
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            V::S(s) => Some(s),
            _ => None,
        }
    }

    /// Python truthiness of the value.
    pub fn truthy(&self) -> bool {
        match self {
            V::N(_) | V::E(_) => true,
            V::L(l) => !l.is_empty(),
            V::S(s) => !s.is_empty(),
            V::B(b) => *b,
            V::Nil => false,
        }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            V::N(n) => n.class,
            V::L(_) => "list",
            V::S(_) => "str",
            V::B(_) => "bool",
            V::E(_) => "enum",
            V::Nil => "None",
        }
    }

    /// Whether the library leaves this argument out of equality.
    fn ignored(&self) -> bool {
        matches!(self, V::Nil | V::B(false)) || matches!(self, V::L(l) if l.is_empty())
    }
}

/// Python `==` between two values, with the library's node equality.
pub fn py_eq(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::N(x), V::N(y)) => node_eq(x, y),
        (V::L(x), V::L(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q)),
        (V::S(x), V::S(y)) => x == y,
        (V::B(x), V::B(y)) => x == y,
        (V::E(x), V::E(y)) => x == y,
        (V::Nil, V::Nil) => true,
        _ => false,
    }
}

/// The library's node equality.
pub fn node_eq(x: &Node, y: &Node) -> bool {
    if x.class != y.class {
        return false;
    }
    match x.class {
        "Identifier" => {
            let quoted = |n: &Node| n.opt("quoted").is_some_and(V::truthy);
            opt_eq_exact(x.opt("this"), y.opt("this")) && quoted(x) == quoted(y)
        }
        "Literal" => {
            opt_eq_exact(x.opt("this"), y.opt("this"))
                && opt_eq_exact(x.opt("is_string"), y.opt("is_string"))
        }
        _ => {
            let kept = |n: &Node| n.args.iter().filter(|(_, v)| !v.ignored()).count();
            if kept(x) != kept(y) {
                return false;
            }
            x.args
                .iter()
                .filter(|(_, v)| !v.ignored())
                .all(|(k, v)| match y.opt(k) {
                    Some(w) if !w.ignored() => norm_eq(v, w),
                    _ => false,
                })
        }
    }
}

fn opt_eq_exact(a: Option<&V>, b: Option<&V>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(p), Some(q)) => py_eq(p, q),
        (None, Some(V::Nil)) | (Some(V::Nil), None) => true,
        _ => false,
    }
}

/// Equality of normalised arguments: plain strings case-insensitively.
fn norm_eq(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::S(x), V::S(y)) => x.to_lowercase() == y.to_lowercase(),
        (V::L(x), V::L(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| norm_eq(p, q)),
        _ => py_eq(a, b),
    }
}

/// The sort key the rules use (`(str(type(x)), str(x))`): the class, then a rendering that
/// is equal exactly when the library's equality is (the original renders SQL; any key with
/// that property puts equal multisets in the same order, which is all the rules rely on).
pub fn sort_key(v: &V) -> String {
    let mut out = String::new();
    if let V::N(n) = v {
        out.push_str(n.class);
        out.push('\u{1}');
    }
    render(v, &mut out);
    out
}

/// Sort values by [`sort_key`] (stable, like Python's `sort`).
pub fn sort_values(values: &mut [V]) {
    values.sort_by_cached_key(sort_key);
}

fn render(v: &V, out: &mut String) {
    match v {
        V::N(n) => {
            out.push_str(n.class);
            out.push('(');
            match n.class {
                "Identifier" | "Literal" => {
                    for key in ["this", "quoted", "is_string"] {
                        if let Some(value) = n.opt(key) {
                            let _ = write!(out, "{key}=");
                            match value {
                                V::S(s) => out.push_str(&escape(s)),
                                V::B(b) if key != "this" => out.push_str(if *b { "1" } else { "" }),
                                other => render(other, out),
                            }
                            out.push(',');
                        }
                    }
                }
                _ => {
                    let mut kept: Vec<&(&'static str, V)> =
                        n.args.iter().filter(|(_, v)| !v.ignored()).collect();
                    kept.sort_by(|a, b| a.0.cmp(b.0));
                    for (k, value) in kept {
                        let _ = write!(out, "{k}=");
                        render_norm(value, out);
                        out.push(',');
                    }
                }
            }
            out.push(')');
        }
        V::L(items) => {
            out.push('[');
            for item in items {
                render(item, out);
                out.push(',');
            }
            out.push(']');
        }
        V::S(s) => out.push_str(&escape(s)),
        V::B(b) => out.push_str(if *b { "True" } else { "False" }),
        V::E(e) => out.push_str(e),
        V::Nil => out.push_str("None"),
    }
}

fn render_norm(v: &V, out: &mut String) {
    match v {
        V::S(s) => out.push_str(&escape(&s.to_lowercase())),
        V::L(items) => {
            out.push('[');
            for item in items {
                render_norm(item, out);
                out.push(',');
            }
            out.push(']');
        }
        other => render(other, out),
    }
}

fn escape(s: &str) -> String {
    format!("{s:?}")
}

/// `str(float(text))` in Python, or `None` where `float()` raises.
pub fn python_float_str(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'-' => ("-", &t[1..]),
        b'+' => ("", &t[1..]),
        _ => ("", t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(format!("{sign}inf"));
    }
    if lower == "nan" {
        return Some("nan".to_string());
    }
    // Underscores are allowed only between digits.
    let bytes = body.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'_' {
            let digit = |j: Option<&u8>| j.is_some_and(u8::is_ascii_digit);
            if !digit(i.checked_sub(1).and_then(|j| bytes.get(j))) || !digit(bytes.get(i + 1)) {
                return None;
            }
        }
    }
    let cleaned: String = body.chars().filter(|c| *c != '_').collect();
    let valid = !cleaned.is_empty()
        && cleaned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && cleaned
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.');
    if !valid {
        return None;
    }
    let value: f64 = cleaned.parse().ok()?;
    let value = if sign == "-" { -value } else { value };
    Some(python_repr(value))
}

/// Python's `repr` of a float: the shortest round-tripping digits, fixed notation for
/// exponents in `-4..16`, scientific (`1e+16`) otherwise, and a trailing `.0` for integers.
pub fn python_repr(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if value.is_nan() {
        return "nan".to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_string();
    }
    let sci = format!("{value:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp >= 0 {
            let int_len = exp + 1;
            if n <= int_len {
                format!("{digits}{}.0", "0".repeat((int_len - n) as usize))
            } else {
                format!(
                    "{}.{}",
                    &digits[..int_len as usize],
                    &digits[int_len as usize..]
                )
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        for (text, want) in [
            ("1", Some("1.0")),
            ("150", Some("150.0")),
            ("2.50", Some("2.5")),
            ("1e5", Some("100000.0")),
            ("1e16", Some("1e+16")),
            ("0.00001", Some("1e-05")),
            ("0.0001", Some("0.0001")),
            ("1_000", Some("1000.0")),
            ("-3", Some("-3.0")),
            (" 7 ", Some("7.0")),
            ("abc", None),
            ("1__0", None),
            ("", None),
            ("1990-01-01", None),
            ("123456789012345678", Some("1.2345678901234568e+17")),
        ] {
            assert_eq!(python_float_str(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn equality_follows_the_library() {
        let col = |t: &str, c: &str| V::column(t, c);
        assert!(py_eq(&col("t", "a"), &col("t", "a")));
        // Identifiers compare exactly; literals too.
        assert!(!py_eq(&col("t", "A"), &col("t", "a")));
        assert!(!py_eq(&V::literal("X", true), &V::literal("x", true)));
        // Plain string arguments fold case; None, False and [] are ignored.
        let join = |side: &str| {
            V::n(
                "Join",
                vec![
                    ("this", V::ident("t")),
                    ("side", V::S(side.into())),
                    ("on", V::Nil),
                ],
            )
        };
        assert!(py_eq(&join("LEFT"), &join("left")));
        let bare = V::n(
            "Join",
            vec![
                ("this", V::ident("t")),
                ("kind", V::Nil),
                ("x", V::L(vec![])),
            ],
        );
        let plain = V::n("Join", vec![("this", V::ident("t"))]);
        assert!(py_eq(&bare, &plain));
        assert!(!py_eq(&join("left"), &plain));
        // Equal values sort the same way.
        assert_eq!(sort_key(&join("LEFT")), sort_key(&join("left")));
    }
}
