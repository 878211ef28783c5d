//! [`ServerSettings`] from a TOML document whose keys mirror Akka HTTP's
//! `akka.http.server` (in a table `[http.server]`).

use crate::binding::ServerSettings;
use proscenium::ConfigError;
use proscenium_shutdown::toml_values::{self, invalid, positive, table};
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
    /// * `parsing.max-content-length` (Akka's): the largest request body,
    ///   bytes as an integer or a string with a unit (`"8 MiB"`; `B`,
    ///   `KiB`, `MiB`, `GiB`); see [`max_body_bytes`](Self::max_body_bytes);
    /// * `parsing.max-head-size` (not Akka's, which limits each header
    ///   instead): the largest request head, in bytes as above; see
    ///   [`max_head_bytes`](Self::max_head_bytes).
    ///
    /// An unknown key or a bad value is an error naming the key.
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
    /// assert_eq!(bad.unwrap_err().to_string(), "unknown key `http.server.max-connection`");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<ServerSettings, ConfigError> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.message().to_owned()))?;
        let mut settings = ServerSettings::default();
        let Some(http) = doc.get("http") else {
            return Ok(settings);
        };
        let Some(server) = table(http, "http")?.get("server") else {
            return Ok(settings);
        };
        for (key, value) in table(server, "http.server")? {
            let full = format!("http.server.{key}");
            settings = match key.as_str() {
                "idle-timeout" => settings.idle_timeout(duration(value, &full)?),
                "header-read-timeout" => settings.header_read_timeout(duration(value, &full)?),
                "max-connections" => settings.max_connections(positive(value, &full)?),
                "linger-timeout" => settings.linger_timeout(linger(value, &full)?),
                "parsing" => {
                    for (key, value) in table(value, &full)? {
                        let full = format!("http.server.parsing.{key}");
                        settings = match key.as_str() {
                            "max-content-length" => settings.max_body_bytes(bytes(value, &full)?),
                            "max-head-size" => settings.max_head_bytes(bytes(value, &full)?),
                            _ => return Err(ConfigError::UnknownKey { key: full }),
                        };
                    }
                    settings
                }
                _ => return Err(ConfigError::UnknownKey { key: full }),
            };
        }
        Ok(settings)
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

/// A positive size in bytes (see [`toml_values::byte_size`]).
fn bytes(value: &toml::Value, key: &str) -> Result<usize, ConfigError> {
    const EXPECTED: &str = "a positive size: an integer of bytes, or a string such as \
                            \"8 MiB\" (units B, KiB, MiB, GiB)";
    toml_values::byte_size(value)
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(key, EXPECTED))
}

/// A duration (see [`toml_values::parse_duration`]), or `"infinite"`
/// (`Duration::MAX`: the timeout is off); not zero.
fn duration(value: &toml::Value, key: &str) -> Result<Duration, ConfigError> {
    const EXPECTED: &str = "a duration such as \"10 s\" or \"500 ms\", or \"infinite\"";
    let text = value.as_str().ok_or_else(|| invalid(key, EXPECTED))?.trim();
    if text == "infinite" || text == "inf" {
        return Ok(Duration::MAX);
    }
    toml_values::parse_duration(text)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| invalid(key, EXPECTED))
}

/// A duration as [`duration`] reads it, or zero (`"0 s"`: no lingering).
fn linger(value: &toml::Value, key: &str) -> Result<Duration, ConfigError> {
    const EXPECTED: &str = "a duration such as \"60 s\" or \"500 ms\", \"infinite\", or \"0 s\"";
    let zero = value
        .as_str()
        .and_then(|text| toml_values::parse_duration(text.trim()))
        .is_some_and(|d| d.is_zero());
    if zero {
        return Ok(Duration::ZERO);
    }
    duration(value, key).map_err(|_| invalid(key, EXPECTED))
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
            [http.server.parsing]
            max-content-length = "2 KiB"
            max-head-size = 4096
            "#,
        )
        .expect("valid");
        assert_eq!(s.idle_timeout, Duration::from_millis(1500));
        assert_eq!(s.header_read_timeout, Duration::MAX);
        assert_eq!(s.max_connections, 7);
        assert_eq!(s.linger_timeout, Duration::from_millis(250));
        assert_eq!(s.max_body_bytes, 2048);
        assert_eq!(s.max_head_bytes, 4096);
        let no_linger = settings("[http.server]\nlinger-timeout = \"0 s\"").expect("zero");
        assert_eq!(no_linger.linger_timeout, Duration::ZERO);
        let forever = settings("[http.server]\nlinger-timeout = \"infinite\"").expect("infinite");
        assert_eq!(forever.linger_timeout, Duration::MAX);
        let d = settings("").expect("empty");
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
            ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key } => key,
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
                "parsing.max-content-length", "parsing.max-head-size",
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
