//! The configuration reference (`docs/reference/configuration.md`), generated from the JSON
//! Schema of [`Config`](super::Config) ([`super::json_schema`]) — so from the configuration
//! types and their doc comments, the one place each key is declared: every section, every key
//! with its type, its default and what it does; a kinded section (`[source]`, `[sink]`,
//! `[judge]`) lists the keys every kind shares, then each kind's own. A unit test fails when the
//! checked-in page differs (and rewrites it with `SQLGRADE_WRITE_DOCS=1`), and checks that the
//! shipped configurations validate against the schema.

use serde_json::{Map, Value};

/// The page, in Markdown.
pub fn markdown(schema: &Value) -> String {
    let defs = schema.get("$defs").and_then(Value::as_object);
    let resolve = |node: &Value| -> Value { resolve(node, defs) };
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- generated from the configuration types (src/config/reference.rs): do not edit -->\n\n\
         `sqlgrade.toml`, every key. Configuration is layered: built-in defaults, then the file \
         given with `--config`, then environment variables `SQLGRADE__<SECTION>__<KEY>` (double \
         underscores: `SQLGRADE__SINK__DIR=/tmp/out`). No file is needed; unknown keys are \
         errors. `sqlgrade check-config [--config FILE]` validates a file and prints the \
         effective configuration with secrets redacted; `sqlgrade check-config --schema` prints \
         the JSON Schema this page is generated from (for editors: Taplo / Even Better TOML). \
         How the sections fit together: [configuration](../guides/configuration.md).\n",
    );
    let Some(sections) = schema.get("properties").and_then(Value::as_object) else {
        return out;
    };
    for (name, node) in sections {
        let section = resolve(node);
        write_section(&mut out, name, &section, defs, 2);
    }
    out
}

/// A `$ref` replaced by its definition (other keys of the node, e.g. its `default`, kept).
fn resolve(node: &Value, defs: Option<&Map<String, Value>>) -> Value {
    let Some(name) = node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    else {
        return node.clone();
    };
    let mut resolved = defs
        .and_then(|d| d.get(name))
        .cloned()
        .unwrap_or(Value::Null);
    if let (Some(target), Some(extra)) = (resolved.as_object_mut(), node.as_object()) {
        for (k, v) in extra {
            if k != "$ref" {
                target.insert(k.clone(), v.clone());
            }
        }
    }
    resolved
}

/// One section (`[name]`): its doc, its keys, its kinds and its nested tables.
fn write_section(
    out: &mut String,
    name: &str,
    section: &Value,
    defs: Option<&Map<String, Value>>,
    depth: usize,
) {
    let hashes = "#".repeat(depth.min(6));
    out.push_str(&format!("\n{hashes} `[{name}]`\n\n"));
    if let Some(doc) = description(section) {
        out.push_str(&format!("{doc}\n\n"));
    }
    let defaults = section.get("default");
    let mut nested: Vec<(String, Value)> = Vec::new();
    let properties = section.get("properties").and_then(Value::as_object);
    if let Some(properties) = properties {
        let kinded = section.get("oneOf").is_some();
        if kinded {
            out.push_str("Keys every kind takes:\n\n");
        }
        key_table(out, properties, defaults, defs, &mut nested);
    }
    if let Some(kinds) = section.get("oneOf").and_then(Value::as_array) {
        for kind in kinds {
            let Some(props) = kind.get("properties").and_then(Value::as_object) else {
                continue;
            };
            let Some(kind_name) = props
                .get("kind")
                .and_then(|k| k.get("const"))
                .and_then(Value::as_str)
            else {
                continue;
            };
            out.push_str(&format!("\n**`kind = \"{kind_name}\"`**"));
            match description(kind) {
                Some(doc) => out.push_str(&format!(" — {doc}\n\n")),
                None => out.push_str("\n\n"),
            }
            let own: Map<String, Value> = props
                .iter()
                .filter(|(k, _)| k.as_str() != "kind")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if own.is_empty() {
                out.push_str("No keys of its own.\n");
            } else {
                key_table(out, &own, defaults, defs, &mut nested);
            }
        }
    }
    for (key, node) in nested {
        write_section(out, &format!("{name}.{key}"), &node, defs, depth + 1);
    }
}

/// The keys of one table, as a Markdown table; object-valued keys with keys of their own are
/// kept for a section of their own.
fn key_table(
    out: &mut String,
    properties: &Map<String, Value>,
    defaults: Option<&Value>,
    defs: Option<&Map<String, Value>>,
    nested: &mut Vec<(String, Value)>,
) {
    let mut rows = Vec::new();
    for (key, node) in properties {
        let node = resolve(node, defs);
        let mut node = node;
        // A key's default is its own, else the section's default object's.
        if node.get("default").is_none()
            && let Some(default) = defaults.and_then(|d| d.get(key))
            && let Some(object) = node.as_object_mut()
        {
            object.insert("default".into(), default.clone());
        }
        let kinded = node
            .get("oneOf")
            .and_then(Value::as_array)
            .is_some_and(|branches| branches.iter().any(|b| b.get("properties").is_some()));
        if node.get("properties").is_some() || kinded {
            nested.push((key.clone(), node));
            continue;
        }
        rows.push(format!(
            "| `{key}` | {} | {} | {} |",
            type_of(&node, defs),
            default_of(&node),
            description(&node).unwrap_or_default().replace('\n', " ")
        ));
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
}

/// A node's doc comment as one paragraph, rustdoc links as code.
fn description(node: &Value) -> Option<String> {
    let text = node.get("description").and_then(Value::as_str)?;
    let joined = text
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(" ");
    // `[`Name`]` and `[`Name`](path)` (rustdoc links) become `Name`.
    let mut out = String::with_capacity(joined.len());
    let mut rest = joined.as_str();
    while let Some(at) = rest.find("[`") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.find("`]") {
            Some(end) => {
                out.push_str(&after[..end + 1]);
                let mut tail = &after[end + 2..];
                if tail.starts_with('(')
                    && let Some(close) = tail.find(')')
                {
                    tail = &tail[close + 1..];
                }
                rest = tail;
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out.replace('|', "\\|"))
}

/// The type, as a reader of a TOML file thinks of it.
fn type_of(node: &Value, defs: Option<&Map<String, Value>>) -> String {
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| format!("`{}`", v.as_str().map_or(v.to_string(), str::to_string)))
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    if let Some(c) = node.get("const") {
        return format!("`{c}`");
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = node.get(key).and_then(Value::as_array) {
            let types: Vec<String> = options
                .iter()
                .map(|o| type_of(&resolve(o, defs), defs))
                .filter(|t| t != "null")
                .collect();
            return types.join(" \\| ");
        }
    }
    if node.get("$ref").is_some() {
        return type_of(&resolve(node, defs), defs);
    }
    let types: Vec<&str> = match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let named: Vec<String> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| match *t {
            "array" => {
                let item = node
                    .get("items")
                    .map(|i| type_of(&resolve(i, defs), defs))
                    .unwrap_or_else(|| "value".into());
                format!("list of {item}")
            }
            "object" => "table".to_string(),
            // A count that cannot be 0 (`NonZeroUsize`) says so; unsigned integers' own
            // minimum of 0 goes without saying.
            "integer" => match node.get("minimum").and_then(Value::as_u64) {
                Some(least) if least > 0 => format!("integer ≥ {least}"),
                _ => "integer".to_string(),
            },
            "number" => "number".to_string(),
            other => other.to_string(),
        })
        .collect();
    let mut text = if named.is_empty() {
        "value".to_string()
    } else {
        named.join(" or ")
    };
    if types.contains(&"null") {
        text.push_str(" (optional)");
    }
    text
}

fn default_of(node: &Value) -> String {
    match node.get("default") {
        None | Some(Value::Null) => "—".to_string(),
        Some(Value::String(s)) if s.is_empty() => "`\"\"`".to_string(),
        Some(Value::String(s)) => format!("`{s}`"),
        Some(Value::Array(a)) if a.is_empty() => "`[]`".to_string(),
        Some(Value::Object(o)) if o.is_empty() => "`{}`".to_string(),
        Some(other) => format!("`{other}`").replace('|', "\\|"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn repo() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    /// `docs/reference/configuration.md` is the configuration types' (rewritten with
    /// `SQLGRADE_WRITE_DOCS=1`).
    #[test]
    fn the_configuration_reference_is_the_configuration_types() {
        let path = repo().join("docs/reference/configuration.md");
        let generated = super::markdown(&crate::config::json_schema());
        let page = std::fs::read_to_string(&path).unwrap_or_default();
        if page != generated && std::env::var_os("SQLGRADE_WRITE_DOCS").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        assert!(
            page == generated,
            "docs/reference/configuration.md is not the configuration types'; run \
             `SQLGRADE_WRITE_DOCS=1 cargo test --lib configuration_reference` to rewrite it"
        );
    }

    /// The shipped configurations, the README's quickstart and the default configuration
    /// validate against the schema `check-config --schema` prints; a typo does not.
    #[test]
    fn shipped_configurations_validate_against_the_schema() {
        let schema = crate::config::json_schema();
        let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
        let as_json = |text: &str| -> serde_json::Value {
            let table: toml::Table = toml::from_str(text).expect("TOML");
            serde_json::to_value(table).expect("JSON")
        };
        let mut configs: Vec<(String, String)> = Vec::new();
        for entry in std::fs::read_dir(repo().join("deploy/config")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                configs.push((
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
        assert!(!configs.is_empty(), "deploy/config holds TOML files");
        let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
        let quickstart = readme
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("the README's quickstart TOML");
        configs.push(("README.md".into(), quickstart.to_string()));
        let defaults = toml::to_string(&crate::config::Config::default()).unwrap();
        configs.push(("the defaults".into(), defaults));
        for (name, text) in &configs {
            let errors: Vec<String> = validator
                .iter_errors(&as_json(text))
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{name}: {errors:#?}");
        }
        let typo = as_json("[sink]\nkind = \"jsonl\"\ndirr = \"out\"\n");
        assert!(!validator.is_valid(&typo), "an unknown key is refused");
        let wrong = as_json("[pipeline]\nworkers = \"many\"\n");
        assert!(
            !validator.is_valid(&wrong),
            "a value of the wrong type is refused"
        );
    }
}
