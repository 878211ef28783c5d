//! The system's settings from a TOML file whose keys mirror Akka's:
//! `[scheduler]` and `[coordinated-shutdown]`.

use std::path::Path;

use proscenium_scheduler::MIN_STACK_SIZE;
use proscenium_shutdown::toml_values::{self, flag, invalid, positive};
use proscenium_shutdown::{ConfigError, ShutdownConfig};

use crate::runtime::system::SystemBuilder;

impl SystemBuilder {
    /// Applies the settings of a TOML document over this builder's:
    ///
    /// * `[scheduler]`: `workers` (at least 1), `pin-workers` (`true` /
    ///   `false` or Akka's `"on"` / `"off"`), `throughput` (at least 1),
    ///   `stack-size` (each worker thread's stack: an integer of bytes or a
    ///   string with a unit, `B`, `KiB`, `MiB` or `GiB`, such as
    ///   `"8 MiB"`; at least 64 KiB; see
    ///   [`worker_stack_size`](Self::worker_stack_size));
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
    ///         stack-size = "8 MiB"
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
                    "stack-size" => self.worker_stack_size(byte_size(value, &full)?),
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

/// A size in bytes (see [`toml_values::byte_size`]); at least
/// [`MIN_STACK_SIZE`].
fn byte_size(value: &toml::Value, key: &str) -> Result<usize, ConfigError> {
    const EXPECTED: &str = "a size of at least 65536 bytes: an integer of bytes, or a string \
                            such as \"8 MiB\" (units B, KiB, MiB, GiB)";
    toml_values::byte_size(value)
        .filter(|&n| n >= MIN_STACK_SIZE)
        .ok_or_else(|| invalid(key, EXPECTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack_size_of(text: &str) -> Result<SystemBuilder, ConfigError> {
        crate::ActorSystem::builder().from_toml_str(&format!("[scheduler]\nstack-size = {text}"))
    }

    fn rejected(text: &str) -> String {
        let err = stack_size_of(text).expect_err(text);
        assert!(
            matches!(&err, ConfigError::InvalidValue { key, .. } if key == "scheduler.stack-size"),
            "{text}: {err:?}"
        );
        err.to_string()
    }

    #[test]
    fn stack_size_accepts_bytes_and_binary_units() {
        let cases = [
            ("8388608", 8 << 20),
            ("\"8 MiB\"", 8 << 20),
            ("\"8MiB\"", 8 << 20),
            ("\"512 KiB\"", 512 << 10),
            ("\"1 GiB\"", 1 << 30),
            ("\"65536 B\"", 65536),
            ("\"65536\"", 65536),
        ];
        for (text, bytes) in cases {
            // The same builder as the method makes (the builders have no
            // getters; their Debug shows every setting).
            let from_toml = format!("{:?}", stack_size_of(text).expect(text));
            let direct = format!(
                "{:?}",
                crate::ActorSystem::builder().worker_stack_size(bytes)
            );
            assert_eq!(from_toml, direct, "{text}");
        }
    }

    #[test]
    fn stack_size_errors_name_the_key() {
        for text in [
            "\"8 MB\"",
            "\"8 mib\"",
            "\"MiB\"",
            "\"1.5 MiB\"",
            "\"-1 MiB\"",
            "-1",
            "0",
            "true",
            "\"99999999999999 GiB\"",
        ] {
            rejected(text);
        }
        let small = rejected("\"1 KiB\"");
        assert!(small.contains("65536"), "{small}");
    }
}
