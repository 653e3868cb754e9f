//! Layered configuration (TOML file + SQLGRADE__… env) via the config crate. (Skeleton.)
