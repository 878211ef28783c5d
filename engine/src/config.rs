//! The system's settings from a TOML file whose keys mirror Akka's:
//! `[scheduler]` and `[coordinated-shutdown]`.

use std::path::Path;

use proscenium_shutdown::{ConfigError, ShutdownConfig};

use crate::system::SystemBuilder;

impl SystemBuilder {
    /// Applies the settings of a TOML document over this builder's:
    ///
    /// * `[scheduler]`: `workers` (at least 1), `pin-workers` (`true` /
    ///   `false` or Akka's `"on"` / `"off"`), `throughput` (at least 1);
    /// * `[coordinated-shutdown]`: the whole section, as
    ///   [`ShutdownConfig::from_toml_str`] reads it (phases, `depends-on`,
    ///   `timeout`, `recover`, `enabled`, `exit-process`, ...).
    ///
    /// Other top-level tables are left to their owners; an unknown key or a
    /// bad value inside these two is an error that names the key, and the
    /// phase graph is validated here, before anything starts.
    ///
    /// ```
    /// use proscenium::ActorSystem;
    ///
    /// let system = ActorSystem::builder()
    ///     .from_toml_str(r#"
    ///         [scheduler]
    ///         workers = 2
    ///         pin-workers = "off"
    ///         throughput = 32
    ///
    ///         [coordinated-shutdown]
    ///         run-by-signals = "off"
    ///         [coordinated-shutdown.phases.drain-queues]
    ///         depends-on = ["service-requests-done"]
    ///     "#)?
    ///     .build()?;
    /// assert!(system.coordinated_shutdown().phases().iter().any(|p| p == "drain-queues"));
    /// system.terminate().wait();
    ///
    /// let bad = ActorSystem::builder().from_toml_str("[scheduler]\nworkerz = 2");
    /// assert_eq!(bad.unwrap_err().to_string(), "unknown key `scheduler.workerz`");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_toml_str(mut self, text: &str) -> Result<SystemBuilder, ConfigError> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.message().to_owned()))?;
        if let Some(section) = doc.get("scheduler") {
            let section = section
                .as_table()
                .ok_or_else(|| ConfigError::InvalidValue {
                    key: "scheduler".to_owned(),
                    message: "expected a table".to_owned(),
                })?;
            for (key, value) in section {
                let full = format!("scheduler.{key}");
                self = match key.as_str() {
                    "workers" => self.workers(positive(value, &full)?),
                    "pin-workers" => self.pin_workers(flag(value, &full)?),
                    "throughput" => self.throughput(
                        u32::try_from(positive(value, &full)?)
                            .map_err(|_| invalid(&full, "a positive integer below 2^32"))?,
                    ),
                    _ => return Err(ConfigError::UnknownKey { key: full }),
                };
            }
        }
        if doc.contains_key("coordinated-shutdown") {
            self = self.coordinated_shutdown(ShutdownConfig::from_toml_str(text)?);
        }
        Ok(self)
    }

    /// [`from_toml_str`](Self::from_toml_str) on a file's contents.
    pub fn from_toml_file(self, path: impl AsRef<Path>) -> Result<SystemBuilder, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        self.from_toml_str(&text)
    }
}

fn invalid(key: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        message: format!("expected {expected}"),
    }
}

fn positive(value: &toml::Value, key: &str) -> Result<usize, ConfigError> {
    value
        .as_integer()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(key, "a positive integer"))
}

fn flag(value: &toml::Value, key: &str) -> Result<bool, ConfigError> {
    match value {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) if s == "on" || s == "true" => Ok(true),
        toml::Value::String(s) if s == "off" || s == "false" => Ok(false),
        _ => Err(invalid(key, "true, false, \"on\" or \"off\"")),
    }
}
