//! Readers of TOML values in the formats every proscenium configuration
//! accepts (Akka's): each names the offending key in its [`ConfigError`].
//!
//! Shared by the configurations of the shutdown, the engine
//! (`[scheduler]`), `proscenium-http` (`[http.server]`) and
//! `proscenium-remote` (`[remote]`), so a duration, a size or a flag is
//! written the same way in every section. Not a stable API: for the
//! proscenium crates only.

use std::time::Duration;

use crate::config::ConfigError;

/// An invalid value at `key`: "expected {expected}".
pub fn invalid(key: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        message: format!("expected {expected}"),
    }
}

/// The table at `key`.
pub fn table<'a>(value: &'a toml::Value, key: &str) -> Result<&'a toml::Table, ConfigError> {
    value.as_table().ok_or_else(|| invalid(key, "a table"))
}

/// `true` / `false`, or Akka's `"on"` / `"off"` (and `"true"` / `"false"`).
pub fn flag(value: &toml::Value, key: &str) -> Result<bool, ConfigError> {
    match value {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) if s == "on" || s == "true" => Ok(true),
        toml::Value::String(s) if s == "off" || s == "false" => Ok(false),
        _ => Err(invalid(key, "true, false, \"on\" or \"off\"")),
    }
}

/// An integer of at least 1.
pub fn positive(value: &toml::Value, key: &str) -> Result<usize, ConfigError> {
    value
        .as_integer()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(key, "a positive integer"))
}

/// A duration string (see [`parse_duration`]) at `key`.
pub fn duration(value: &toml::Value, key: &str) -> Result<Duration, ConfigError> {
    let text = value
        .as_str()
        .ok_or_else(|| invalid(key, "a duration such as \"10 s\" or \"500 ms\""))?;
    parse_duration(text).ok_or_else(|| ConfigError::InvalidValue {
        key: key.to_owned(),
        message: format!("`{text}` is not a duration such as \"10 s\" or \"500 ms\""),
    })
}

/// `"10 s"`, `"10s"`, `"1.5 s"`, `"500 ms"`, `"2 m"`, `"1 h"`, and Akka's
/// long unit names (`millis`, `seconds`, `minutes`, ...); `None` for
/// anything else (a number without a unit included).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds_per_unit = match unit.trim() {
        "ns" | "nanos" | "nanosecond" | "nanoseconds" => 1e-9,
        "us" | "µs" | "micros" | "microsecond" | "microseconds" => 1e-6,
        "ms" | "millis" | "millisecond" | "milliseconds" => 1e-3,
        "s" | "second" | "seconds" => 1.0,
        "m" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(number * seconds_per_unit).ok()
}

/// A size in bytes: an integer, or a string of an integer and an optional
/// binary unit (`"8 MiB"`, `"512KiB"`; units `B`, `KiB`, `MiB`, `GiB`).
/// `None` if it is neither, or overflows; the caller checks its bounds.
pub fn byte_size(value: &toml::Value) -> Option<usize> {
    match value {
        toml::Value::Integer(n) => usize::try_from(*n).ok(),
        toml::Value::String(s) => {
            let s = s.trim();
            let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let (number, unit) = s.split_at(digits);
            let scale: usize = match unit.trim_start() {
                "" | "B" => 1,
                "KiB" => 1 << 10,
                "MiB" => 1 << 20,
                "GiB" => 1 << 30,
                _ => return None,
            };
            number.parse::<usize>().ok()?.checked_mul(scale)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{byte_size, parse_duration};
    use std::time::Duration;

    #[test]
    fn durations_in_akka_forms() {
        assert_eq!(parse_duration("10 s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("500 ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5 s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2 minutes"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("ten s"), None);
        assert_eq!(parse_duration("-1 s"), None);
    }

    #[test]
    fn sizes_with_binary_units() {
        let size = |s: &str| byte_size(&toml::Value::String(s.to_owned()));
        assert_eq!(byte_size(&toml::Value::Integer(4096)), Some(4096));
        assert_eq!(byte_size(&toml::Value::Integer(-1)), None);
        assert_eq!(size("8 MiB"), Some(8 << 20));
        assert_eq!(size("512KiB"), Some(512 << 10));
        assert_eq!(size("100 B"), Some(100));
        assert_eq!(size("1 MB"), None);
        assert_eq!(size("99999999999999999999 GiB"), None);
        assert_eq!(byte_size(&toml::Value::Boolean(true)), None);
    }
}
