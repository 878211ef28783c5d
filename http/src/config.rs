//! [`ServerSettings`] from a TOML document whose keys mirror Akka HTTP's
//! `akka.http.server` (in a table `[http.server]`), through serde. Beside
//! `settings.rs`, at the bottom of the crate's layers (see `lib.rs`).

use crate::settings::ServerSettings;
use proscenium::de;
use proscenium::ConfigError;
use serde::{Deserialize, Deserializer};
use std::path::Path;
use std::time::Duration;

impl ServerSettings {
    /// The default settings with those of the table `[http.server]` of a
    /// TOML document applied (other tables are left to their owners):
    ///
    /// * `idle-timeout` (Akka's): a duration such as `"60 s"` or `"500 ms"`,
    ///   or `"infinite"`; see [`idle_timeout`](Self::idle_timeout);
    /// * `header-read-timeout` (not Akka's): a duration or `"infinite"`;
    ///   see [`header_read_timeout`](Self::header_read_timeout);
    /// * `max-connections` (Akka's): a positive integer;
    /// * `linger-timeout` (Akka's): a duration, `"infinite"`, or `"0 s"`
    ///   (no lingering); see [`linger_timeout`](Self::linger_timeout);
    /// * `request-timeout` (Akka's): a duration or `"infinite"`; see
    ///   [`request_timeout`](Self::request_timeout);
    /// * `body-read-timeout` (not Akka's): a duration or `"infinite"`; see
    ///   [`body_read_timeout`](Self::body_read_timeout);
    /// * `stream-request-bodies` (not Akka's, whose entities always
    ///   stream): `true` or `false`; see
    ///   [`stream_request_bodies`](Self::stream_request_bodies);
    /// * `parsing.max-content-length` (Akka's): the largest request body,
    ///   bytes as an integer or a string with a unit (`"8 MiB"`; `B`,
    ///   `KiB`, `MiB`, `GiB`); see [`max_body_bytes`](Self::max_body_bytes);
    /// * `parsing.max-content-length-per-connection` (not Akka's): the most
    ///   bytes of request bodies one connection holds at once, as above;
    ///   see [`max_body_bytes_per_connection`](Self::max_body_bytes_per_connection);
    /// * `parsing.max-head-size` (not Akka's, which limits each header
    ///   instead): the largest request head, in bytes as above; see
    ///   [`max_head_bytes`](Self::max_head_bytes).
    ///
    /// Durations are strings with a unit, as [`de::parse_duration`] reads
    /// them, in this section as in every other: a bare number
    /// (`idle-timeout = 60`) is refused with an error that asks for a unit
    /// ([`de::duration_with`]). An unknown key or a bad value is an error
    /// naming the key and its line.
    ///
    /// `ServerSettings` is also `Deserialize` (the keys of the
    /// `[http.server]` table over the defaults), to embed in an
    /// application's own configuration struct: see the `app_config`
    /// example.
    ///
    /// ```
    /// use proscenium_http::ServerSettings;
    ///
    /// let settings = ServerSettings::from_toml_str(r#"
    ///     [http.server]
    ///     idle-timeout = "30 s"
    ///     max-connections = 256
    ///     linger-timeout = "10 s"
    ///     [http.server.parsing]
    ///     max-content-length = "1 MiB"
    /// "#)?;
    /// # let _ = settings;
    ///
    /// let bad = ServerSettings::from_toml_str("[http.server]\nmax-connection = 2");
    /// assert_eq!(
    ///     bad.unwrap_err().to_string(),
    ///     "unknown key `http.server.max-connection` (line 2, column 1)"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<ServerSettings, ConfigError> {
        /// The document: other tables belong to other layers.
        #[derive(Deserialize)]
        struct Document {
            http: Option<HttpTable>,
        }
        /// `[http]`: other keys in it belong to others too.
        #[derive(Deserialize)]
        struct HttpTable {
            server: Option<ServerSettings>,
        }
        let doc: Document = de::from_toml_str(text)?;
        Ok(doc.http.and_then(|h| h.server).unwrap_or_default())
    }

    /// [`from_toml_str`](Self::from_toml_str) on a file's contents.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<ServerSettings, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        ServerSettings::from_toml_str(&text)
    }
}

/// The keys of `[http.server]` over the defaults; unknown keys refused.
impl<'de> Deserialize<'de> for ServerSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ServerSettings, D::Error> {
        ServerSection::deserialize(deserializer).map(|s| s.apply(ServerSettings::default()))
    }
}

/// The keys of `[http.server]`, each optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServerSection {
    #[serde(default, deserialize_with = "timeout")]
    idle_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "timeout")]
    header_read_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de::positive_integer")]
    max_connections: Option<usize>,
    #[serde(default, deserialize_with = "linger")]
    linger_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "timeout")]
    request_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "timeout")]
    body_read_timeout: Option<Duration>,
    stream_request_bodies: Option<bool>,
    parsing: Option<ParsingSection>,
}

/// The keys of `[http.server.parsing]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ParsingSection {
    #[serde(default, deserialize_with = "bytes")]
    max_content_length: Option<usize>,
    #[serde(default, deserialize_with = "bytes")]
    max_content_length_per_connection: Option<usize>,
    #[serde(default, deserialize_with = "bytes")]
    max_head_size: Option<usize>,
}

impl ServerSection {
    fn apply(self, mut settings: ServerSettings) -> ServerSettings {
        if let Some(d) = self.idle_timeout {
            settings = settings.idle_timeout(d);
        }
        if let Some(d) = self.header_read_timeout {
            settings = settings.header_read_timeout(d);
        }
        if let Some(n) = self.max_connections {
            settings = settings.max_connections(n);
        }
        if let Some(d) = self.linger_timeout {
            settings = settings.linger_timeout(d);
        }
        if let Some(d) = self.request_timeout {
            settings = settings.request_timeout(d);
        }
        if let Some(d) = self.body_read_timeout {
            settings = settings.body_read_timeout(d);
        }
        if let Some(on) = self.stream_request_bodies {
            settings = settings.stream_request_bodies(on);
        }
        if let Some(parsing) = self.parsing {
            if let Some(n) = parsing.max_content_length {
                settings = settings.max_body_bytes(n);
            }
            if let Some(n) = parsing.max_content_length_per_connection {
                settings = settings.max_body_bytes_per_connection(n);
            }
            if let Some(n) = parsing.max_head_size {
                settings = settings.max_head_bytes(n);
            }
        }
        settings
    }
}

/// A positive size in bytes ([`de::read_byte_size`]).
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    const EXPECTED: &str = "a positive size: an integer of bytes, or a string such as \
                            \"8 MiB\" (units B, KiB, MiB, GiB)";
    de::scalar(d, EXPECTED, |value| {
        de::read_byte_size(value).filter(|&n| n > 0)
    })
    .map(Some)
}

/// A duration ([`de::parse_duration`]), or `"infinite"` (`Duration::MAX`:
/// the timeout is off); not zero. A string, as every section's durations
/// ([`de::duration_with`]: a bare number is refused, asking for a unit).
fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    const EXPECTED: &str = "a duration such as \"10 s\" or \"500 ms\", or \"infinite\"";
    de::duration_with(d, EXPECTED, |text| {
        read_duration(text).filter(|d| !d.is_zero())
    })
    .map(Some)
}

/// A duration as [`timeout`] reads it, or zero (`"0 s"`: no lingering).
fn linger<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    const EXPECTED: &str = "a duration such as \"60 s\" or \"500 ms\", \"infinite\", or \"0 s\"";
    de::duration_with(d, EXPECTED, read_duration).map(Some)
}

fn read_duration(text: &str) -> Option<Duration> {
    match text.trim() {
        "infinite" | "inf" => Some(Duration::MAX),
        _ => de::parse_duration(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn settings(text: &str) -> Result<ServerSettings, ConfigError> {
        ServerSettings::from_toml_str(text)
    }

    #[test]
    fn keys_set_their_settings() {
        let s = settings(
            r#"
            [other]
            anything = 1
            [http.server]
            idle-timeout = "1.5 s"
            header-read-timeout = "infinite"
            max-connections = 7
            linger-timeout = "250 ms"
            request-timeout = "3 s"
            body-read-timeout = "infinite"
            [http.server.parsing]
            max-content-length = "2 KiB"
            max-content-length-per-connection = "5 KiB"
            max-head-size = 4096
            "#,
        )
        .expect("valid");
        assert_eq!(s.idle_timeout, Duration::from_millis(1500));
        assert_eq!(s.header_read_timeout, Duration::MAX);
        assert_eq!(s.max_connections, 7);
        assert_eq!(s.linger_timeout, Duration::from_millis(250));
        assert_eq!(s.request_timeout, Duration::from_secs(3));
        assert_eq!(s.body_read_timeout, Duration::MAX);
        assert_eq!(s.max_body_bytes, 2048);
        assert_eq!(s.max_body_bytes_per_connection, Some(5 * 1024));
        assert_eq!(s.body_budget(), 5 * 1024);
        assert_eq!(s.max_head_bytes, 4096);
        let no_linger = settings("[http.server]\nlinger-timeout = \"0 s\"").expect("zero");
        assert_eq!(no_linger.linger_timeout, Duration::ZERO);
        let forever = settings("[http.server]\nlinger-timeout = \"infinite\"").expect("infinite");
        assert_eq!(forever.linger_timeout, Duration::MAX);
        let d = settings("").expect("empty");
        assert_eq!(d.body_budget(), 2 * d.max_body_bytes);
        // The default follows `max-content-length`; a budget below it is
        // raised to it.
        let follows = settings("[http.server.parsing]\nmax-content-length = 100").expect("valid");
        assert_eq!(follows.body_budget(), 200);
        let below = settings(
            "[http.server.parsing]\nmax-content-length = 100\nmax-content-length-per-connection = 10",
        )
        .expect("valid");
        assert_eq!(below.body_budget(), 100);
        let default = ServerSettings::default();
        assert_eq!(d.linger_timeout, Duration::from_secs(60));
        assert_eq!(
            (d.idle_timeout, d.max_connections, d.max_body_bytes),
            (
                default.idle_timeout,
                default.max_connections,
                default.max_body_bytes
            )
        );
    }

    fn key_of(err: ConfigError) -> String {
        match err {
            ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                "[http.server]\nidle-timeout = 5",
                "http.server.idle-timeout",
            ),
            (
                "[http.server]\nidle-timeout = \"0 s\"",
                "http.server.idle-timeout",
            ),
            (
                "[http.server]\nidle-timeout = \"5 parsecs\"",
                "http.server.idle-timeout",
            ),
            (
                "[http.server]\nheader-read-timeout = \"-1 s\"",
                "http.server.header-read-timeout",
            ),
            (
                "[http.server]\nrequest-timeout = \"0 s\"",
                "http.server.request-timeout",
            ),
            (
                "[http.server]\nbody-read-timeout = 20",
                "http.server.body-read-timeout",
            ),
            (
                "[http.server]\nlinger-timeout = 60",
                "http.server.linger-timeout",
            ),
            (
                "[http.server]\nlinger-timeout = \"-1 s\"",
                "http.server.linger-timeout",
            ),
            (
                "[http.server]\nmax-connections = 0",
                "http.server.max-connections",
            ),
            (
                "[http.server]\nmax-connections = \"8\"",
                "http.server.max-connections",
            ),
            (
                "[http.server]\nmax-conections = 8",
                "http.server.max-conections",
            ),
            (
                "[http.server.parsing]\nmax-content-length = \"8 MB\"",
                "http.server.parsing.max-content-length",
            ),
            (
                "[http.server.parsing]\nmax-head-size = 0",
                "http.server.parsing.max-head-size",
            ),
            (
                "[http.server.parsing]\nmax-content-length-per-connection = \"1 TB\"",
                "http.server.parsing.max-content-length-per-connection",
            ),
            (
                "[http.server.parsing]\nmax-uri-length = 10",
                "http.server.parsing.max-uri-length",
            ),
            ("[http.server]\nparsing = 3", "http.server.parsing"),
            ("[http]\nserver = 3", "http.server"),
            ("http = 3", "http"),
        ];
        for (text, key) in cases {
            assert_eq!(key_of(settings(text).expect_err(text)), key, "{text}");
        }
        assert!(matches!(settings("[http"), Err(ConfigError::Parse(_))));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any value of any key: Ok or an error naming that key.
        #[test]
        fn any_value_is_ok_or_names_its_key(
            key in prop::sample::select(vec![
                "idle-timeout", "header-read-timeout", "max-connections", "linger-timeout",
                "request-timeout", "body-read-timeout",
                "parsing.max-content-length", "parsing.max-content-length-per-connection",
                "parsing.max-head-size",
            ]),
            value in prop_oneof![
                any::<i64>().prop_map(|n| n.to_string()),
                "[ -~]{0,12}".prop_map(|s| format!("{s:?}")),
                Just("true".to_string()),
            ],
        ) {
            let text = format!("[http.server]\n{key} = {value}");
            if let Err(err) = settings(&text) {
                prop_assert_eq!(key_of(err), format!("http.server.{key}"));
            }
        }
    }
}
