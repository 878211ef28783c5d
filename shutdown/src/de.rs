//! Configuration through serde: the reader every proscenium section uses
//! ([`from_toml_str`]: errors as [`ConfigError`]s naming the key path and
//! the line), and the value formats they share, as `deserialize_with`
//! functions an application can use for its own settings too:
//!
//! * [`duration`]: `"5 s"`, `"500ms"`, `"1.5 s"`, `"2 minutes"`,
//!   `"1m 30s"` ([`parse_duration`]); always a string with a unit: a bare
//!   number (`timeout = 5`) is refused in every section, with an error
//!   that says to add one (seconds or milliseconds? the file should say);
//!   [`duration_with`] is the same rule with a section's own bounds;
//! * [`byte_size`]: `4096`, `"8 MiB"`, `"512KiB"` ([`parse_byte_size`]);
//! * [`flag`]: `true` / `false`, or Akka's `"on"` / `"off"`.
//!
//! Each section's type (`ShutdownConfig`; in the other crates
//! `SchedulerSettings`, `ServerSettings`, `RemoteSettings`) derives
//! `Deserialize` and refuses unknown keys, so an application can put the
//! sections in its own configuration struct:
//!
//! ```
//! use proscenium_shutdown::{de, ConfigError, ShutdownConfig};
//! use serde::Deserialize;
//! use std::time::Duration;
//!
//! #[derive(Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct AppConfig {
//!     #[serde(rename = "coordinated-shutdown", default)]
//!     shutdown: ShutdownConfig,
//!     cache: Cache,
//! }
//!
//! #[derive(Deserialize)]
//! #[serde(deny_unknown_fields, rename_all = "kebab-case")]
//! struct Cache {
//!     #[serde(deserialize_with = "de::duration")]
//!     time_to_live: Duration,
//! }
//!
//! let config: AppConfig = de::from_toml_str(r#"
//!     [coordinated-shutdown]
//!     default-phase-timeout = "2 s"
//!     [cache]
//!     time-to-live = "90 s"
//! "#)?;
//! assert_eq!(config.shutdown.default_phase_timeout, Duration::from_secs(2));
//! assert_eq!(config.cache.time_to_live, Duration::from_secs(90));
//!
//! let bad = de::from_toml_str::<AppConfig>(
//!     "[coordinated-shutdown.phases.service-stop]\ntimeout = \"soon\"\n[cache]\ntime-to-live = \"1 s\"",
//! );
//! let Err(ConfigError::InvalidValue { key, .. }) = bad else { panic!() };
//! assert_eq!(key, "coordinated-shutdown.phases.service-stop.timeout");
//! # Ok::<(), ConfigError>(())
//! ```

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::de::{DeserializeOwned, Deserializer, Unexpected, Visitor};
use serde_path_to_error::Segment;

use crate::config::ConfigError;

/// Deserializes a `T` from a TOML document. An error names what it is
/// about: a value serde refuses is a [`ConfigError::InvalidValue`] with
/// the key's full path (`coordinated-shutdown.phases.service-stop.timeout`;
/// array indices left out) and the line and column in its message; a key
/// the type does not know is a [`ConfigError::UnknownKey`] with its full
/// path, line and column; a missing
/// required key is an `InvalidValue` naming it with the message
/// `required`; text that is not TOML is a [`ConfigError::Parse`] with the
/// line and column.
pub fn from_toml_str<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(toml::Deserializer::new(text))
        .map_err(|e| config_error(&e, text))
}

/// [`from_toml_str`] on a file's contents; a file that cannot be read is a
/// [`ConfigError::Io`] naming it.
pub fn from_toml_file<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<T, ConfigError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    from_toml_str(&text)
}

/// The [`ConfigError`] of a failed deserialization of `text`.
fn config_error(err: &serde_path_to_error::Error<toml::de::Error>, text: &str) -> ConfigError {
    let mut key = String::new();
    for segment in err.path().iter() {
        let name = match segment {
            Segment::Map { key } => key.as_str(),
            Segment::Enum { variant } => variant.as_str(),
            // A key path names keys: an array's items share its key.
            Segment::Seq { .. } | Segment::Unknown => continue,
        };
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(name);
    }
    let inner = err.inner();
    let message = inner.message().replace('\n', ", ");
    let position = inner.span().map(|span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.chars().rev().take_while(|&c| c != '\n').count() + 1;
        (line, column)
    });
    let at = position
        .map(|(line, column)| format!(" (line {line}, column {column})"))
        .unwrap_or_default();
    if let Some(field) = quoted_after(&message, "missing field `") {
        let key = match key.is_empty() {
            true => field.to_owned(),
            false => format!("{key}.{field}"),
        };
        return ConfigError::InvalidValue {
            key,
            message: format!("required{at}"),
        };
    }
    if key.is_empty() {
        // The document is parsed whole before any value is read, and no
        // reader raises an error of its own at the root: a syntax error.
        return ConfigError::Parse(format!("{message}{at}"));
    }
    if quoted_after(&message, "unknown field `").is_some() {
        // The path already ends with the unknown key; the span is the
        // key's.
        return ConfigError::UnknownKey {
            key,
            line: position.map(|(line, _)| line),
            column: position.map(|(_, column)| column),
        };
    }
    ConfigError::InvalidValue {
        key,
        message: format!("{message}{at}"),
    }
}

/// The name between backquotes of serde's `missing field `x`` and
/// `unknown field `x`, expected ...` messages.
fn quoted_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    message.strip_prefix(prefix)?.split('`').next()
}

/// A TOML scalar, as [`scalar`] hands it to its reader.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Scalar<'a> {
    /// An integer.
    Integer(i64),
    /// A string.
    String(&'a str),
    /// A boolean.
    Boolean(bool),
}

/// Deserializes a value with `read`: an integer, a string or a boolean
/// that `read` turns into a `T`, or an error "expected {expected}" (any
/// other value, such as a table or a float, or one `read` refuses). The
/// base of the other readers here, and of each crate's readers with
/// bounds (a positive count, a non-zero timeout).
///
/// ```
/// use proscenium_shutdown::de::{scalar, Scalar};
/// use serde::Deserializer;
///
/// /// A port, not 0.
/// fn port<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
///     scalar(d, "a port from 1 to 65535", |value| match value {
///         Scalar::Integer(n) => u16::try_from(n).ok().filter(|&p| p > 0),
///         _ => None,
///     })
/// }
/// assert_eq!(port(toml::de::ValueDeserializer::new("8080")), Ok(8080));
/// assert!(port(toml::de::ValueDeserializer::new("0")).is_err());
/// ```
pub fn scalar<'de, D, T>(
    deserializer: D,
    expected: &'static str,
    read: impl FnOnce(Scalar<'_>) -> Option<T>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    deserializer.deserialize_any(ScalarVisitor { expected, read })
}

struct ScalarVisitor<F> {
    expected: &'static str,
    read: F,
}

impl<F, T> ScalarVisitor<F>
where
    F: FnOnce(Scalar<'_>) -> Option<T>,
{
    fn read<E: serde::de::Error>(self, value: Scalar<'_>) -> Result<T, E> {
        let unexpected = match value {
            Scalar::Integer(n) => Unexpected::Signed(n),
            Scalar::String(s) => Unexpected::Str(s),
            Scalar::Boolean(b) => Unexpected::Bool(b),
        };
        let expected = self.expected;
        (self.read)(value).ok_or_else(|| E::invalid_value(unexpected, &expected))
    }
}

impl<'de, F, T> Visitor<'de> for ScalarVisitor<F>
where
    F: FnOnce(Scalar<'_>) -> Option<T>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<T, E> {
        self.read(Scalar::Integer(n))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<T, E> {
        match i64::try_from(n) {
            Ok(n) => self.read(Scalar::Integer(n)),
            Err(_) => Err(E::invalid_value(Unexpected::Unsigned(n), &self.expected)),
        }
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        self.read(Scalar::String(s))
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<T, E> {
        self.read(Scalar::Boolean(b))
    }
}

const DURATION: &str = "a duration such as \"10 s\" or \"500 ms\"";

/// A duration string (see [`parse_duration`]); zero is allowed. A bare
/// number is refused, as by [`duration_with`].
pub fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    duration_with(deserializer, DURATION, parse_duration)
}

/// Reads a duration key, the one rule of every proscenium section: a
/// string, handed to `read` (which applies the key's own bounds: non-zero,
/// `"infinite"`, ...; [`parse_duration`] for the format), or an error
/// "expected {expected}". A bare number, integer or float, is refused with
/// an error that says to add a unit: whether `5` meant seconds or
/// milliseconds is what the file must say (before, `[remote]` alone read an
/// integer as milliseconds and the other sections refused it).
///
/// ```
/// use proscenium_shutdown::de::{duration_with, parse_duration};
/// use serde::Deserializer;
/// use std::time::Duration;
///
/// /// A non-zero duration.
/// fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
///     duration_with(d, "a non-zero duration such as \"5 s\"", |s| {
///         parse_duration(s).filter(|d| !d.is_zero())
///     })
/// }
/// let read = |text| timeout(toml::de::ValueDeserializer::new(text));
/// assert_eq!(read("\"2 s\""), Ok(Duration::from_secs(2)));
/// assert!(read("\"0 s\"").is_err());
/// let bare = read("5").unwrap_err().to_string();
/// assert!(bare.contains("a bare number has no unit: write \"5 s\" or \"5 ms\""), "{bare}");
/// ```
pub fn duration_with<'de, D, T>(
    deserializer: D,
    expected: &'static str,
    read: impl FnOnce(&str) -> Option<T>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    deserializer.deserialize_any(DurationVisitor { expected, read })
}

struct DurationVisitor<F> {
    expected: &'static str,
    read: F,
}

impl<F> DurationVisitor<F> {
    /// A bare number: refused, saying how to write what was meant.
    fn bare<E: serde::de::Error>(&self, unexpected: Unexpected<'_>, number: &str) -> E {
        E::custom(format_args!(
            "invalid value: {unexpected}, expected {}; a bare number has no unit: \
             write \"{number} s\" or \"{number} ms\"",
            self.expected
        ))
    }
}

impl<'de, F, T> Visitor<'de> for DurationVisitor<F>
where
    F: FnOnce(&str) -> Option<T>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        let expected = self.expected;
        (self.read)(s).ok_or_else(|| E::invalid_value(Unexpected::Str(s), &expected))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<T, E> {
        if n < 0 {
            return Err(E::invalid_value(Unexpected::Signed(n), &self.expected));
        }
        Err(self.bare(Unexpected::Signed(n), &n.to_string()))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<T, E> {
        Err(self.bare(Unexpected::Unsigned(n), &n.to_string()))
    }

    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<T, E> {
        if !(n.is_finite() && n >= 0.0) {
            return Err(E::invalid_value(Unexpected::Float(n), &self.expected));
        }
        Err(self.bare(Unexpected::Float(n), &n.to_string()))
    }
}

/// `true` / `false`, or Akka's `"on"` / `"off"` (and `"true"` /
/// `"false"`).
pub fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    scalar(deserializer, "true, false, \"on\" or \"off\"", read_flag)
}

/// [`flag`]'s reading of a scalar.
pub(crate) fn read_flag(value: Scalar<'_>) -> Option<bool> {
    match value {
        Scalar::Boolean(b) => Some(b),
        Scalar::String("on" | "true") => Some(true),
        Scalar::String("off" | "false") => Some(false),
        _ => None,
    }
}

/// A positive integer, for an optional key (`#[serde(default,
/// deserialize_with = "de::positive_integer")]` on an `Option<usize>`):
/// the count keys of every section (workers, connections, capacities).
pub fn positive_integer<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<usize>, D::Error> {
    scalar(deserializer, "a positive integer", |value| match value {
        Scalar::Integer(n) => usize::try_from(n).ok().filter(|&n| n > 0),
        _ => None,
    })
    .map(Some)
}

/// A size in bytes: an integer, or a string (see [`parse_byte_size`]).
/// Zero is allowed; the caller checks its own bounds.
pub fn byte_size<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    scalar(
        deserializer,
        "a size: an integer of bytes, or a string such as \"8 MiB\" (units B, KiB, MiB, GiB)",
        read_byte_size,
    )
}

/// [`byte_size`]'s reading of a scalar: a non-negative integer, or a
/// string [`parse_byte_size`] reads.
pub fn read_byte_size(value: Scalar<'_>) -> Option<usize> {
    match value {
        Scalar::Integer(n) => usize::try_from(n).ok(),
        Scalar::String(s) => parse_byte_size(s),
        Scalar::Boolean(_) => None,
    }
}

/// Akka's long unit names that humantime does not know, and its names
/// for them.
const AKKA_UNITS: [(&str, &str); 7] = [
    ("nanosecond", "ns"),
    ("nanoseconds", "ns"),
    ("micros", "us"),
    ("microsecond", "us"),
    ("microseconds", "us"),
    ("millisecond", "ms"),
    ("milliseconds", "ms"),
];

/// A duration: humantime's format (`"10 s"`, `"10s"`, `"1.5 s"`,
/// `"500 ms"`, `"2 m"`, `"1 h"`, `"1m 30s"`; units `ns`, `us`/`µs`, `ms`,
/// `s`/`sec`/`seconds`, `m`/`min`/`minutes`, `h`/`hr`/`hours`, `d`, ...)
/// with Akka's long unit names as well (`nanoseconds`, `micros`,
/// `milliseconds`, ...), and a fraction with no digit on one side
/// (`".5 s"`, `"10. s"`) read as written; surrounding whitespace is
/// ignored. `None` for anything else: a number without a unit (`"10"`: no
/// section guesses one), a negative one, an unknown unit, a fraction finer
/// than a nanosecond, an overflow.
///
/// ```
/// use proscenium_shutdown::de::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("1.5 s"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("2 milliseconds"), Some(Duration::from_millis(2)));
/// assert_eq!(parse_duration("1m 30s"), Some(Duration::from_secs(90)));
/// assert_eq!(parse_duration("10"), None);
/// ```
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let mut normal = String::with_capacity(text.len() + 2);
    // Runs of letters are units, runs of digits and dots numbers.
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let letter = |c: char| c.is_alphabetic();
        let number = |c: char| c.is_ascii_digit() || c == '.';
        let run_end = if letter(c) {
            rest.find(|c| !letter(c))
        } else if number(c) {
            rest.find(|c| !number(c))
        } else {
            Some(c.len_utf8())
        };
        let (run, after) = rest.split_at(run_end.unwrap_or(rest.len()));
        if letter(c) {
            let unit = AKKA_UNITS.iter().find(|(akka, _)| *akka == run);
            normal.push_str(unit.map_or(run, |(_, ours)| *ours));
        } else if number(c) && run.contains(|c: char| c.is_ascii_digit()) {
            // ".5" and "10." as a float reads them.
            if run.starts_with('.') {
                normal.push('0');
            }
            normal.push_str(run.strip_suffix('.').unwrap_or(run));
        } else {
            normal.push_str(run);
        }
        rest = after;
    }
    humantime::parse_duration(&normal).ok()
}

/// A size in bytes written as a string: an integer and an optional binary
/// unit, with or without a space (`"8 MiB"`, `"512KiB"`, `"4096"`; units
/// `B`, `KiB`, `MiB`, `GiB`, case as written). `None` for anything else
/// (a decimal unit such as `MB`, a fraction, a sign) or an overflow.
///
/// The bytesize crate was not taken for this: it also reads `"8 MB"`
/// (8 000 000), `"8 mib"` and `"1.5 MiB"`, which proscenium's sections
/// have always refused (decision 0025).
///
/// ```
/// use proscenium_shutdown::de::parse_byte_size;
///
/// assert_eq!(parse_byte_size("8 MiB"), Some(8 << 20));
/// assert_eq!(parse_byte_size("8 MB"), None);
/// ```
pub fn parse_byte_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale: usize = match unit.trim_start() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.parse::<usize>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::{parse_byte_size, parse_duration};
    use std::time::Duration;

    #[test]
    fn durations_in_akka_and_humantime_forms() {
        let ms = Duration::from_millis;
        let cases = [
            ("10 s", Some(ms(10_000))),
            ("10s", Some(ms(10_000))),
            (" 10 s ", Some(ms(10_000))),
            ("500 ms", Some(ms(500))),
            ("1.5 s", Some(ms(1500))),
            (".5 s", Some(ms(500))),
            ("10. s", Some(ms(10_000))),
            ("2 minutes", Some(ms(120_000))),
            ("2 milliseconds", Some(ms(2))),
            ("3 micros", Some(Duration::from_micros(3))),
            ("3 µs", Some(Duration::from_micros(3))),
            ("4 nanoseconds", Some(Duration::from_nanos(4))),
            ("1m 30s", Some(ms(90_000))),
            ("0 s", Some(Duration::ZERO)),
            ("10", None),
            ("ten s", None),
            ("-1 s", None),
            (". s", None),
            ("1.2.3 s", None),
            ("1e3 s", None),
            ("5 parsecs", None),
            ("99999999999999999999999 h", None),
            ("", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), expected, "{text:?}");
        }
    }

    #[test]
    fn sizes_with_binary_units() {
        assert_eq!(parse_byte_size("8 MiB"), Some(8 << 20));
        assert_eq!(parse_byte_size("512KiB"), Some(512 << 10));
        assert_eq!(parse_byte_size("100 B"), Some(100));
        assert_eq!(parse_byte_size("4096"), Some(4096));
        assert_eq!(parse_byte_size("1 MB"), None);
        assert_eq!(parse_byte_size("8 mib"), None);
        assert_eq!(parse_byte_size("1.5 MiB"), None);
        assert_eq!(parse_byte_size("-1 MiB"), None);
        assert_eq!(parse_byte_size("99999999999999999999 GiB"), None);
    }
}
