//! Sections whose `kind` key chooses the settings beside it (`[source]`, `[sink]`, `[judge]`,
//! `[gold.judge]`): written flat (`kind = "kafka"` next to `brokers = "…"`), read into a typed
//! enum of derived per-kind structs.
//!
//! serde's own `#[serde(tag = "kind")]` cannot read them: it buffers the section before it
//! knows the kind, and the buffer loses what `config` gives the environment's values (text that
//! is read as a number when a number is asked for), and it cannot tell a leftover of another
//! kind from a typo. So a section is first taken as it is written ([`WrittenSection`]:
//! `config::Value`s, still coercible), then each part reads its own keys through its derived
//! `Deserialize` — the chosen kind's struct ([`KindedSettings`]) and the keys every kind shares —
//! and what is left is sorted: a key of another kind is read too (a malformed value is refused
//! whatever the kind), then dropped with a warning naming it; any other key is refused as
//! serde refuses an unknown field, listing every key the section takes. Which keys a part
//! takes comes from its derive ([`keys_of`]), never from a list kept by hand.
//!
//! `Config::load` takes these sections straight from the loaded tree ([`take_section`]), so a
//! message names the key in full and where its value came from (``for key
//! `source.max_in_flight` in the environment``), as for every other section; their
//! `Deserialize` impls (a TOML string, a round trip) read the same way through serde, where the
//! values' origins are no longer known.
//! Writing back needs no help: the section's type derives `Serialize` with its kind enum
//! flattened (`#[serde(flatten)]` over `#[serde(tag = "kind")]`).

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};

/// One kind of a kinded section: its name, the keys it takes and how they are read. A table of
/// them is declared once per section by [`kinded_settings!`](crate::kinded_settings).
pub struct Kind<K> {
    /// The name, as written in `kind`.
    pub name: &'static str,
    /// The keys it takes (its settings struct's fields, by [`keys_of`]; none for a kind without
    /// settings).
    pub keys: fn() -> &'static [&'static str],
    /// Its settings read from `keys` (only keys of that kind are in it).
    pub read: fn(SectionKeys) -> Result<K, config::ConfigError>,
}

/// The typed settings of a kinded section: which kinds there are, the keys each takes and how
/// they are read. Implemented by [`kinded_settings!`](crate::kinded_settings), from one table.
pub trait KindedSettings: Sized + 'static {
    /// Every kind; the first is the default.
    const KINDS: &'static [Kind<Self>];
}

/// Declares a kinded section's kinds once: each variant of the enum, the settings struct it
/// holds (if any) and its name in `kind`. Implements [`KindedSettings`] (the table of names,
/// keys and readers the section reader looks kinds up in) and an exhaustive `kind_name` (a
/// variant left out of the table does not compile).
///
/// ```ignore
/// kinded_settings!(SinkKind {
///     Jsonl(JsonlSinkConfig) = "jsonl",
///     Clickhouse = "clickhouse",
/// });
/// ```
#[macro_export]
macro_rules! kinded_settings {
    ($kinds:ident { $($variant:ident $(($settings:ty))? = $name:literal),+ $(,)? }) => {
        impl $crate::settings::KindedSettings for $kinds {
            const KINDS: &'static [$crate::settings::Kind<Self>] = &[$(
                $crate::settings::Kind {
                    name: $name,
                    keys: $crate::kinded_settings!(@keys $($settings)?),
                    read: $crate::kinded_settings!(@read $kinds $variant $($settings)?),
                },
            )+];
        }

        impl $kinds {
            /// This kind's name, as written in `kind`.
            pub fn kind_name(&self) -> &'static str {
                match self {
                    $($crate::kinded_settings!(@pattern $kinds $variant $($settings)?) => $name,)+
                }
            }
        }
    };
    (@keys $settings:ty) => { $crate::settings::keys_of::<$settings> };
    (@keys) => { || &[] };
    (@read $kinds:ident $variant:ident $settings:ty) => {
        |keys| Ok($kinds::$variant(keys.read::<$settings>()?))
    };
    (@read $kinds:ident $variant:ident) => { |_| Ok($kinds::$variant) };
    (@pattern $kinds:ident $variant:ident $settings:ty) => { $kinds::$variant(_) };
    (@pattern $kinds:ident $variant:ident) => { $kinds::$variant };
}

/// A section read from what was written, however it was loaded.
pub trait ReadSection: Sized {
    /// The section's dotted name (`source`, `gold.judge`).
    const SECTION: &'static str;

    /// The section's parts read from `written` (which refuses what is left at the end).
    fn read_parts(written: &mut WrittenSection) -> Result<Self, SectionError>;

    /// Reads the section through serde (a `Deserialize` impl calls this).
    fn deserialize_section<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut written = WrittenSection::read(Self::SECTION, deserializer)?;
        Self::read_all(&mut written).map_err(|e| de::Error::custom(e.message()))
    }

    /// How the section's errors are worded: as they are, unless a section says otherwise (the
    /// judge sections put `[judge]: ` first).
    fn in_messages(error: SectionError) -> SectionError {
        error
    }

    /// The parts, then the refusal of any key no part took ([`read_all_parts`]).
    fn read_all(written: &mut WrittenSection) -> Result<Self, SectionError> {
        read_all_parts(written)
    }
}

/// `S`'s parts, then the refusal of any key no part took, worded by `S::in_messages`: what
/// [`ReadSection::read_all`] does, for an override that checks something first.
pub fn read_all_parts<S: ReadSection>(written: &mut WrittenSection) -> Result<S, SectionError> {
    S::read_parts(written)
        .and_then(|section| written.finish().map(|()| section))
        .map_err(S::in_messages)
}

/// Why a kinded section cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SectionError {
    /// A value could not be read as its key's type (the key and where it came from named).
    #[error(transparent)]
    Value(#[from] config::ConfigError),
    /// A key no kind takes, or a kind that does not exist (`key` is the dotted key).
    #[error("{message} for key `{key}`")]
    Key {
        /// What is wrong, as serde words it.
        message: String,
        /// The section, or its `kind`.
        key: String,
    },
    /// The error with `[section]: ` before it (the judge sections' messages say so).
    #[error("[{section}]: {error}")]
    In {
        /// The section.
        section: &'static str,
        /// What is wrong.
        #[source]
        error: Box<SectionError>,
    },
}

impl SectionError {
    /// The error with `[section]: ` before it.
    pub fn in_section(self, section: &'static str) -> SectionError {
        SectionError::In {
            section,
            error: Box::new(self),
        }
    }

    /// What a deserializer reports: the message without the section's key, which the
    /// deserializer adds itself.
    fn message(&self) -> String {
        match self {
            SectionError::Key { message, .. } => message.clone(),
            SectionError::In { section, error } => format!("[{section}]: {}", error.message()),
            other => other.to_string(),
        }
    }

    /// As `config` reports it: the key named after the message.
    pub fn into_config(self) -> config::ConfigError {
        match self {
            SectionError::Value(error) => error,
            SectionError::Key { message, key } => config::ConfigError::At {
                error: Box::new(config::ConfigError::Message(message)),
                origin: None,
                key: Some(key),
            },
            error @ SectionError::In { .. } => config::ConfigError::Foreign(Box::new(error)),
        }
    }
}

/// Some keys of a section, to be read as one part of it (a kind's settings, shared keys).
pub struct SectionKeys {
    section: &'static str,
    keys: Vec<(String, config::Value)>,
}

impl SectionKeys {
    /// The keys read as `T`; a message names the key in full (`source.max_in_flight`) and,
    /// when known, where its value came from.
    pub fn read<T: DeserializeOwned>(self) -> Result<T, config::ConfigError> {
        let table = config::Value::new(
            None,
            config::ValueKind::Table(self.keys.into_iter().collect()),
        );
        let wrapped = config::Value::new(
            None,
            config::ValueKind::Table([(self.section.to_string(), table)].into_iter().collect()),
        );
        let mut read: HashMap<String, T> = wrapped.try_deserialize()?;
        read.remove(self.section)
            .ok_or_else(|| config::ConfigError::NotFound(self.section.to_string()))
    }
}

/// A section as written: its keys and their values, not yet read.
pub struct WrittenSection {
    section: &'static str,
    keys: HashMap<String, config::Value>,
    /// Every key a part read so far takes (the kind's, every other kind's, the shared ones), in
    /// that order: what an unknown key's message lists.
    known: Vec<&'static str>,
}

impl WrittenSection {
    /// Takes section `section` (its dotted name, for messages) as written, through serde.
    pub fn read<'de, D: Deserializer<'de>>(
        section: &'static str,
        deserializer: D,
    ) -> Result<WrittenSection, D::Error> {
        Ok(WrittenSection {
            section,
            keys: HashMap::deserialize(deserializer)?,
            known: Vec::new(),
        })
    }

    /// Takes section `section` from a loaded `config` value (each value keeps its origin).
    pub fn from_value(
        section: &'static str,
        value: config::Value,
    ) -> Result<WrittenSection, config::ConfigError> {
        let keys = value.into_table().map_err(|e| at_key(e, section))?;
        Ok(WrittenSection {
            section,
            keys: keys.into_iter().collect(),
            known: Vec::new(),
        })
    }

    /// The kind named by `kind` (`K::KINDS[0]` when absent), unread.
    pub fn chosen_kind<K: KindedSettings>(&self) -> Result<&'static Kind<K>, SectionError> {
        let Some(value) = self.keys.get("kind") else {
            return K::KINDS.first().ok_or_else(|| SectionError::Key {
                message: "the section declares no kind".into(),
                key: format!("{}.kind", self.section),
            });
        };
        let key = format!("{}.kind", self.section);
        let name = value.clone().into_string().map_err(|e| at_key(e, &key))?;
        K::KINDS
            .iter()
            .find(|kind| kind.name == name)
            .ok_or_else(|| SectionError::Key {
                message: format!(
                    "unknown variant `{name}`, expected {}",
                    one_of(K::KINDS.iter().map(|kind| kind.name))
                ),
                key,
            })
    }

    /// The chosen kind's settings, read from its keys. Keys of every other kind are read as
    /// that kind's (so a malformed value is refused whatever the kind), then dropped with one
    /// warning per kind naming them.
    pub fn kind<K: KindedSettings>(&mut self) -> Result<K, SectionError> {
        let chosen = self.chosen_kind::<K>()?;
        self.keys.remove("kind");
        self.known.push("kind");
        let own = self.take((chosen.keys)());
        for kind in K::KINDS {
            let keys = (kind.keys)();
            self.known.extend(keys.iter().copied());
            if kind.name == chosen.name {
                continue;
            }
            let left_over = self.take(keys);
            if left_over.keys.is_empty() {
                continue;
            }
            let names: Vec<String> = left_over
                .keys
                .iter()
                .map(|(key, _)| format!("{}.{key}", self.section))
                .collect();
            (kind.read)(left_over)?;
            // A leftover of another kind (a file written for one kind, the kind switched from
            // the environment) costs nothing: say so, go on.
            let (is, a_key) = if names.len() == 1 {
                ("is", "a key")
            } else {
                ("are", "keys")
            };
            tracing::warn!(
                "{} {is} {a_key} of {section}.kind = \"{kind}\", not of {section}.kind = \
                 \"{chosen}\": ignored",
                names.join(", "),
                section = self.section,
                kind = kind.name,
                chosen = chosen.name,
            );
        }
        Ok((chosen.read)(own)?)
    }

    /// A part every kind shares (`T`'s keys, by [`keys_of`]), read from its keys.
    pub fn part<T: DeserializeOwned>(&mut self) -> Result<T, SectionError> {
        let keys = keys_of::<T>();
        self.known.extend(keys.iter().copied());
        Ok(self.take(keys).read()?)
    }

    /// Refuses a key no part took, as serde refuses an unknown field.
    pub fn finish(&self) -> Result<(), SectionError> {
        let mut left: Vec<&String> = self.keys.keys().collect();
        left.sort();
        match left.first() {
            None => Ok(()),
            Some(key) => Err(SectionError::Key {
                message: format!(
                    "unknown field `{key}`, expected {}",
                    one_of(self.known.iter().copied())
                ),
                key: self.section.to_string(),
            }),
        }
    }

    /// Removes and returns the keys named in `names` that were written, in `names`' order.
    fn take(&mut self, names: &[&str]) -> SectionKeys {
        SectionKeys {
            section: self.section,
            keys: names
                .iter()
                .filter_map(|name| self.keys.remove_entry(*name))
                .collect(),
        }
    }
}

/// Takes section `S` out of a loaded `config` tree and reads it (`None` when it is not
/// there): what `Config::load` does for the kinded sections before serde reads the rest, so
/// their messages name the key in full and the value's origin.
pub fn take_section<S: ReadSection>(
    tree: &mut config::Map<String, config::Value>,
) -> Result<Option<S>, config::ConfigError> {
    let mut table = tree;
    let mut path = S::SECTION.split('.').peekable();
    while let Some(name) = path.next() {
        if path.peek().is_none() {
            let Some(value) = table.remove(name) else {
                return Ok(None);
            };
            let mut written = WrittenSection::from_value(S::SECTION, value)?;
            return S::read_all(&mut written)
                .map(Some)
                .map_err(SectionError::into_config);
        }
        match table.get_mut(name).map(|value| &mut value.kind) {
            Some(config::ValueKind::Table(inner)) => table = inner,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// `error` naming `key` after its message.
fn at_key(error: config::ConfigError, key: &str) -> config::ConfigError {
    config::ConfigError::At {
        error: Box::new(error),
        origin: None,
        key: Some(key.to_string()),
    }
}

/// `one of `a`, `b`` as serde words its list of expected names.
fn one_of<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.into_iter().map(|name| format!("`{name}`")).collect();
    match quoted.as_slice() {
        [] => "nothing".to_string(),
        [one] => one.clone(),
        _ => format!("one of {}", quoted.join(", ")),
    }
}

/// The keys a derived `Deserialize` struct takes, in declaration order (what the derive hands a
/// deserializer in `deserialize_struct`; renames applied). Empty for a type that is not a
/// struct. (`serde-aux`'s `serde_introspect` does the same, with two more dependencies.)
pub fn keys_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields = KeysOf(&[]);
    // The derive names its fields, then the deserializer stops it: the error is expected.
    let _ = T::deserialize(&mut fields);
    fields.0
}

/// A deserializer that only records the fields a struct asks for.
struct KeysOf(&'static [&'static str]);

impl<'de> Deserializer<'de> for &mut KeysOf {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a struct's fields are asked for"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = fields;
        Err(de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

impl fmt::Debug for WrittenSection {
    /// The section and the names of its keys, never their values (some are secrets).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WrittenSection")
            .field("section", &self.section)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Debug, PartialEq, Default, Deserialize, Serialize)]
    #[serde(default, deny_unknown_fields)]
    struct Wide {
        width: u32,
        #[serde(rename = "deep")]
        depth: Option<u32>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Shared {
        label: String,
    }

    impl Default for Shared {
        fn default() -> Self {
            Shared {
                label: "none".into(),
            }
        }
    }

    #[derive(Debug, PartialEq)]
    enum Shape {
        Wide(Wide),
        Dot,
    }

    crate::kinded_settings!(Shape {
        Wide(Wide) = "wide",
        Dot = "dot",
    });

    /// `[shape]`: a kind and a shared key.
    #[derive(Debug, PartialEq)]
    struct Drawing {
        shape: Shape,
        shared: Shared,
    }

    impl ReadSection for Drawing {
        const SECTION: &'static str = "shape";

        fn read_parts(written: &mut WrittenSection) -> Result<Self, SectionError> {
            Ok(Drawing {
                shape: written.kind()?,
                shared: written.part()?,
            })
        }
    }

    impl<'de> Deserialize<'de> for Drawing {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            Drawing::deserialize_section(deserializer)
        }
    }

    fn read(text: &str) -> Result<Drawing, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// `[shape]` loaded as `Config::load` loads: a TOML file, then the environment.
    fn load(file: &str, env: &[(&str, &str)]) -> Result<Option<Drawing>, String> {
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let loaded = config::Config::builder()
            .add_source(config::File::from_str(file, config::FileFormat::Toml))
            .add_source(
                config::Environment::with_prefix("T")
                    .prefix_separator("__")
                    .separator("__")
                    .source(Some(env.collect())),
            )
            .build()
            .unwrap();
        let mut tree = config::Source::collect(&loaded).unwrap();
        take_section::<Drawing>(&mut tree).map_err(|e| e.to_string())
    }

    #[test]
    fn a_derived_struct_names_its_keys() {
        assert_eq!(keys_of::<Wide>(), ["width", "deep"]);
        assert_eq!(keys_of::<String>(), [] as [&str; 0]);
    }

    #[test]
    fn the_table_names_every_kind_in_order_and_each_value_its_own() {
        let names: Vec<&str> = Shape::KINDS.iter().map(|kind| kind.name).collect();
        assert_eq!(names, ["wide", "dot"]);
        assert_eq!(Shape::Wide(Wide::default()).kind_name(), "wide");
        assert_eq!(Shape::Dot.kind_name(), "dot");
        assert_eq!((Shape::KINDS[0].keys)(), keys_of::<Wide>());
        assert_eq!((Shape::KINDS[1].keys)(), [] as [&str; 0]);
    }

    #[test]
    fn each_kind_reads_its_own_keys_and_the_shared_ones() {
        let defaults = Drawing {
            shape: Shape::Wide(Wide::default()),
            shared: Shared::default(),
        };
        assert_eq!(read("").unwrap(), defaults);
        let wide = Drawing {
            shape: Shape::Wide(Wide {
                width: 3,
                depth: None,
            }),
            shared: Shared { label: "x".into() },
        };
        assert_eq!(
            read("kind = \"wide\"\nwidth = 3\nlabel = \"x\"").unwrap(),
            wide
        );
        assert_eq!(
            load("[shape]\nwidth = 3\nlabel = \"x\"", &[]).unwrap(),
            Some(wide)
        );
        assert_eq!(load("", &[]).unwrap(), None);
        // Another kind's keys are a leftover: read, then dropped.
        assert_eq!(
            read("kind = \"dot\"\nwidth = 3\ndeep = 1").unwrap().shape,
            Shape::Dot
        );
        let switched = load("[shape]\nwidth = 3", &[("T__SHAPE__KIND", "dot")]).unwrap();
        assert_eq!(switched.map(|d| d.shape), Some(Shape::Dot));
    }

    #[test]
    fn a_typo_a_bad_value_or_an_unknown_kind_is_refused_whatever_the_kind() {
        for kind in ["wide", "dot"] {
            let error = load(&format!("[shape]\nkind = \"{kind}\"\nwidht = 3"), &[]).unwrap_err();
            assert_eq!(
                error,
                "unknown field `widht`, expected one of `kind`, `width`, `deep`, `label` for key \
                 `shape`"
            );
            let error = read(&format!("kind = \"{kind}\"\nwidht = 3")).unwrap_err();
            assert!(error.contains("unknown field `widht`"), "{error}");
            let error = load(
                &format!("[shape]\nkind = \"{kind}\""),
                &[("T__SHAPE__WIDTH", "wide")],
            )
            .unwrap_err();
            assert!(
                error.ends_with("for key `shape.width` in the environment"),
                "{error}"
            );
        }
        let error = load("[shape]\nkind = \"cube\"", &[]).unwrap_err();
        assert_eq!(
            error,
            "unknown variant `cube`, expected one of `wide`, `dot` for key `shape.kind`"
        );
    }

    #[test]
    fn text_is_read_as_a_number_when_a_number_is_asked_for() {
        // What the environment gives: every value is text.
        let drawing = load("", &[("T__SHAPE__WIDTH", "7")]).unwrap().unwrap();
        assert_eq!(
            drawing.shape,
            Shape::Wide(Wide {
                width: 7,
                depth: None
            })
        );
    }
}
