//! Configuration: the sections assembled and loaded ([`sections`]: defaults, then a TOML file,
//! then the environment; the cross-section checks; redaction), and what every section uses
//! ([`settings`]: secrets, redaction of URLs and secret-looking keys, lists from the
//! environment). Each section is declared once, typed, next to the component that uses it; its
//! JSON Schema and the configuration reference are generated from those types ([`reference`]).

pub mod reference;
pub mod sections;
pub mod settings;

pub use sections::*;
