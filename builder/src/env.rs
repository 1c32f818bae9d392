//! Every environment variable the builder reads goes through [`BuildEnv::var`], which also tells
//! cargo to rerun the build script when that variable changes.

use std::collections::BTreeMap;

/// The environment as the builder sees it.
#[derive(Debug, Clone)]
pub struct BuildEnv {
    overrides: Option<BTreeMap<String, String>>,
    emit_rerun: bool,
}

impl BuildEnv {
    /// The process environment; prints `cargo:rerun-if-env-changed` for each variable read
    /// when running inside a build script (`OUT_DIR` set).
    pub fn process() -> Self {
        Self { overrides: None, emit_rerun: std::env::var_os("OUT_DIR").is_some() }
    }

    /// A fixed set of variables (for tests): nothing else is visible and nothing is printed.
    pub fn fixed<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let vars = vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        Self { overrides: Some(vars), emit_rerun: false }
    }

    /// Reads `name` (an empty value counts as unset).
    pub fn var(&self, name: &str) -> Option<String> {
        if self.emit_rerun {
            println!("cargo:rerun-if-env-changed={name}");
        }
        let value = match &self.overrides {
            Some(vars) => vars.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        value.filter(|v| !v.is_empty())
    }
}
