//! The system's settings from a TOML file whose keys mirror Akka's:
//! `[scheduler]` and `[coordinated-shutdown]`.

use std::path::Path;

use proscenium_scheduler::MIN_STACK_SIZE;
use proscenium_shutdown::de::{self, Scalar};
use proscenium_shutdown::{ConfigError, ShutdownConfig};
use serde::{Deserialize, Deserializer};

use crate::runtime::system::SystemBuilder;

/// The settings of `[scheduler]`, each optional: what is set replaces the
/// builder's (see [`SystemBuilder::scheduler_settings`]). `Deserialize`
/// refuses unknown keys and bad values, naming the key, so the section
/// can be a field of an application's own configuration struct:
///
/// ```
/// use proscenium::{ActorSystem, SchedulerSettings};
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct AppConfig {
///     scheduler: SchedulerSettings,
///     greeting: String,
/// }
///
/// let app: AppConfig = proscenium::de::from_toml_str(r#"
///     greeting = "hello"
///     [scheduler]
///     workers = 2
///     stack-size = "8 MiB"
/// "#)?;
/// assert_eq!(app.scheduler.workers, Some(2));
/// assert_eq!(app.greeting, "hello");
/// let builder = ActorSystem::builder().scheduler_settings(app.scheduler);
/// # let _ = builder;
/// # Ok::<(), proscenium::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[non_exhaustive]
pub struct SchedulerSettings {
    /// `workers`: how many worker threads (at least 1).
    #[serde(default, deserialize_with = "de::positive_integer")]
    pub workers: Option<usize>,
    /// `pin-workers`: pin each worker to its own core (`true` / `false` or
    /// Akka's `"on"` / `"off"`).
    #[serde(default, deserialize_with = "flag")]
    pub pin_workers: Option<bool>,
    /// `throughput`: messages an actor handles per run (1 to 2^32 - 1).
    #[serde(default, deserialize_with = "throughput")]
    pub throughput: Option<u32>,
    /// `stack-size`: each worker thread's stack, in bytes (at least
    /// [`MIN_STACK_SIZE`]; an integer or a string with a binary unit such
    /// as `"8 MiB"`).
    #[serde(default, deserialize_with = "stack_size")]
    pub stack_size: Option<usize>,
}

impl SystemBuilder {
    /// Applies the `[scheduler]` settings that are set over this
    /// builder's.
    pub fn scheduler_settings(mut self, settings: SchedulerSettings) -> SystemBuilder {
        if let Some(n) = settings.workers {
            self = self.workers(n);
        }
        if let Some(pin) = settings.pin_workers {
            self = self.pin_workers(pin);
        }
        if let Some(n) = settings.throughput {
            self = self.throughput(n);
        }
        if let Some(bytes) = settings.stack_size {
            self = self.worker_stack_size(bytes);
        }
        self
    }

    /// Applies the settings of a TOML document over this builder's:
    ///
    /// * `[scheduler]`: `workers` (at least 1), `pin-workers` (`true` /
    ///   `false` or Akka's `"on"` / `"off"`), `throughput` (at least 1),
    ///   `stack-size` (each worker thread's stack: an integer of bytes or a
    ///   string with a unit, `B`, `KiB`, `MiB` or `GiB`, such as
    ///   `"8 MiB"`; at least 64 KiB; see
    ///   [`worker_stack_size`](Self::worker_stack_size)): a
    ///   [`SchedulerSettings`];
    /// * `[coordinated-shutdown]`: the whole section, as
    ///   [`ShutdownConfig::from_toml_str`] reads it (phases, `depends-on`,
    ///   `timeout`, `recover`, `enabled`, `exit-process`, ...).
    ///
    /// Durations, here as in every section, are strings with a unit
    /// (`"5 s"`, `"500 ms"`; a bare number is refused, asking for a unit:
    /// [`de::duration_with`]). Other top-level tables are left to their
    /// owners; an unknown key or a bad value inside these two is an error
    /// that names the key and its line, and the phase graph is validated
    /// here, before anything starts.
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
    /// assert_eq!(
    ///     bad.unwrap_err().to_string(),
    ///     "unknown key `scheduler.workerz` (line 2, column 1)"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_toml_str(mut self, text: &str) -> Result<SystemBuilder, ConfigError> {
        /// The document: other tables belong to other layers.
        #[derive(Deserialize)]
        struct Document {
            scheduler: Option<SchedulerSettings>,
            #[serde(rename = "coordinated-shutdown")]
            shutdown: Option<serde::de::IgnoredAny>,
        }
        let doc: Document = de::from_toml_str(text)?;
        if let Some(settings) = doc.scheduler {
            self = self.scheduler_settings(settings);
        }
        if doc.shutdown.is_some() {
            // Read by its own reader, for its typed phase-graph errors.
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

fn throughput<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    de::scalar(d, "a positive integer below 2^32", |value| match value {
        Scalar::Integer(n) => u32::try_from(n).ok().filter(|&n| n > 0),
        _ => None,
    })
    .map(Some)
}

fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    de::flag(d).map(Some)
}

/// A size in bytes ([`de::read_byte_size`]); at least [`MIN_STACK_SIZE`].
fn stack_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    const EXPECTED: &str = "a size of at least 65536 bytes: an integer of bytes, or a string \
                            such as \"8 MiB\" (units B, KiB, MiB, GiB)";
    de::scalar(d, EXPECTED, |value| {
        de::read_byte_size(value).filter(|&n| n >= MIN_STACK_SIZE)
    })
    .map(Some)
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

    /// `[scheduler]` nested anywhere in an application's struct: its
    /// errors name the full key path.
    #[test]
    fn scheduler_settings_embed_and_name_the_full_key() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Actors {
            scheduler: SchedulerSettings,
        }
        #[derive(Debug, Deserialize)]
        struct App {
            actors: Actors,
        }
        let app: App = de::from_toml_str("[actors.scheduler]\nworkers = 3\npin-workers = \"off\"")
            .expect("valid");
        assert_eq!(app.actors.scheduler.workers, Some(3));
        assert_eq!(app.actors.scheduler.pin_workers, Some(false));
        assert_eq!(app.actors.scheduler.stack_size, None);
        let key = |text: &str| match de::from_toml_str::<App>(text).expect_err(text) {
            ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            key("[actors.scheduler]\nworkers = 0"),
            "actors.scheduler.workers"
        );
        assert_eq!(
            key("[actors.scheduler]\nstack-size = \"1 KiB\""),
            "actors.scheduler.stack-size"
        );
        assert_eq!(
            key("[actors.scheduler]\nworkerz = 1"),
            "actors.scheduler.workerz"
        );
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
