//! Property tests of `SystemBuilder::from_toml_str` (issue 16): any input
//! is `Ok` or a `ConfigError`, never a panic; bad `[scheduler]` values are
//! refused with an error naming the key; good ones give the builder the
//! same settings make in code. Parse only: no system is built (no threads).
//!
//! Bounded: 256 to 512 cases a property, a second or so in CI. A failing
//! input is shrunk and saved by proptest (its default file persistence) in
//! `engine/tests/config_fuzz.proptest-regressions` (next to this file: tests/
//! has no lib.rs, so the default `SourceParallel` falls back to
//! `WithSource`), which is
//! committed, so every later run replays it first; the literal input is
//! also kept as a plain `#[test]`.
#![allow(clippy::unwrap_used)] // tests may unwrap

use proptest::prelude::*;
use proscenium::ActorSystem;
use proscenium_shutdown::{ConfigError, ShutdownConfig};

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn wrong_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        Just("{ a = 1 }".to_owned()),
        Just("1979-05-27".to_owned()),
        Just("1.5".to_owned()),
        Just("nan".to_owned()),
        Just("-inf".to_owned()),
    ]
}

/// `workers`: a positive integer.
fn workers_value() -> impl Strategy<Value = (String, Option<usize>)> {
    prop_oneof![
        (1usize..10_000).prop_map(|n| (n.to_string(), Some(n))),
        Just((i64::MAX.to_string(), usize::try_from(i64::MAX).ok())),
        (i64::MIN..=0).prop_map(|n| (n.to_string(), None)),
        (1usize..100).prop_map(|n| (quote(&n.to_string()), None)),
        Just(("true".to_owned(), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// `throughput`: 1 to 2^32 - 1.
fn throughput_value() -> impl Strategy<Value = (String, Option<u32>)> {
    prop_oneof![
        (1u32..=u32::MAX).prop_map(|n| (n.to_string(), Some(n))),
        (i64::from(u32::MAX) + 1..=i64::MAX).prop_map(|n| (n.to_string(), None)),
        (i64::MIN..=0).prop_map(|n| (n.to_string(), None)),
        (1u32..100).prop_map(|n| (quote(&n.to_string()), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// `pin-workers`: a flag.
fn flag_value() -> impl Strategy<Value = (String, Option<bool>)> {
    prop_oneof![
        any::<bool>().prop_map(|b| (b.to_string(), Some(b))),
        any::<bool>().prop_map(|b| (quote(if b { "on" } else { "off" }), Some(b))),
        any::<bool>().prop_map(|b| (quote(&b.to_string()), Some(b))),
        prop_oneof![Just("ON"), Just("yes"), Just(""), Just("1")].prop_map(|s| (quote(s), None)),
        (0i64..2).prop_map(|n| (n.to_string(), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// `stack-size`: bytes (at least 64 KiB), as an integer or with a unit.
fn stack_size_value() -> impl Strategy<Value = (String, Option<usize>)> {
    const MIN: usize = 64 << 10;
    let units: [(&str, usize); 5] = [
        ("", 1),
        ("B", 1),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
    ];
    prop_oneof![
        (0usize..1 << 24).prop_map(|n| (n.to_string(), Some(n).filter(|&n| n >= MIN))),
        (0usize..100_000, 0..units.len(), any::<bool>()).prop_map(move |(n, u, space)| {
            let (unit, scale) = units[u];
            let sep = if space { " " } else { "" };
            let bytes = n.checked_mul(scale).filter(|&b| b >= MIN);
            (quote(&format!("{n}{sep}{unit}")), bytes)
        }),
        Just((quote("99999999999999 GiB"), None)),
        Just((quote(&format!("{} B", "9".repeat(40))), None)),
        Just((i64::MAX.to_string(), usize::try_from(i64::MAX).ok())),
        (i64::MIN..0).prop_map(|n| (n.to_string(), None)),
        prop_oneof![
            Just("8 MB"),
            Just("8 mib"),
            Just("MiB"),
            Just("1.5 MiB"),
            Just("-1 MiB"),
            Just("")
        ]
        .prop_map(|s| (quote(s), None)),
        "x\\PC{0,12}".prop_map(|s| (quote(&s), None)),
        Just(("true".to_owned(), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// `coordinated-shutdown.exit-code`, to check the section is read too.
fn exit_code_value() -> impl Strategy<Value = (String, Option<i32>)> {
    prop_oneof![
        any::<i32>().prop_map(|n| (n.to_string(), Some(n))),
        Just((i64::MAX.to_string(), None)),
        Just((quote("3"), None)),
    ]
}

type Setting<T> = Option<(String, Option<T>)>;

#[derive(Debug, Clone)]
struct Input {
    workers: Setting<usize>,
    pin_workers: Setting<bool>,
    throughput: Setting<u32>,
    stack_size: Setting<usize>,
    unknown: Option<String>,
    exit_code: Setting<i32>,
}

fn input() -> impl Strategy<Value = Input> {
    (
        proptest::option::of(workers_value()),
        proptest::option::of(flag_value()),
        proptest::option::of(throughput_value()),
        proptest::option::of(stack_size_value()),
        proptest::option::weighted(0.1, "[a-z][a-z-]{0,12}"),
        proptest::option::weighted(0.3, exit_code_value()),
    )
        .prop_map(
            |(workers, pin_workers, throughput, stack_size, unknown, exit_code)| Input {
                workers,
                pin_workers,
                throughput,
                stack_size,
                unknown: unknown.filter(|k| {
                    !["workers", "pin-workers", "throughput", "stack-size"].contains(&k.as_str())
                }),
                exit_code,
            },
        )
}

/// The document, its bad keys, and the `Debug` of the builder the good
/// values make in code (the builder has no getters; its Debug shows every
/// setting).
fn render(input: &Input) -> (String, Vec<String>, String) {
    let mut text = String::from("[scheduler]\n");
    let mut bad = Vec::new();
    let mut expected = ActorSystem::builder();
    if let Some((value, parsed)) = &input.workers {
        text.push_str(&format!("workers = {value}\n"));
        match parsed {
            Some(n) => expected = expected.workers(*n),
            None => bad.push("scheduler.workers".to_owned()),
        }
    }
    if let Some((value, parsed)) = &input.pin_workers {
        text.push_str(&format!("pin-workers = {value}\n"));
        match parsed {
            Some(b) => expected = expected.pin_workers(*b),
            None => bad.push("scheduler.pin-workers".to_owned()),
        }
    }
    if let Some((value, parsed)) = &input.stack_size {
        text.push_str(&format!("stack-size = {value}\n"));
        match parsed {
            Some(n) => expected = expected.worker_stack_size(*n),
            None => bad.push("scheduler.stack-size".to_owned()),
        }
    }
    if let Some((value, parsed)) = &input.throughput {
        text.push_str(&format!("throughput = {value}\n"));
        match parsed {
            Some(n) => expected = expected.throughput(*n),
            None => bad.push("scheduler.throughput".to_owned()),
        }
    }
    if let Some(key) = &input.unknown {
        text.push_str(&format!("{key} = 1\n"));
        bad.push(format!("scheduler.{key}"));
    }
    if let Some((value, parsed)) = &input.exit_code {
        text.push_str(&format!("[coordinated-shutdown]\nexit-code = {value}\n"));
        match parsed {
            Some(code) => {
                expected = expected.coordinated_shutdown(ShutdownConfig::default().exit_code(*code))
            }
            None => bad.push("coordinated-shutdown.exit-code".to_owned()),
        }
    }
    (text, bad, format!("{expected:?}"))
}

fn toml_soup() -> impl Strategy<Value = String> {
    let fragments = [
        "[scheduler]",
        "[coordinated-shutdown]",
        "[coordinated-shutdown.phases.a]",
        "workers",
        "pin-workers",
        "throughput",
        "stack-size",
        "depends-on",
        "exit-code",
        "\n",
        " = ",
        "\"8 MiB\"",
        "\"on\"",
        "\"",
        "[",
        "]",
        ".",
        "{",
        "}",
        "0",
        "-1",
        "4294967296",
        "99999999999999999999",
        "true",
        "#",
    ];
    proptest::collection::vec(0..fragments.len(), 0..40)
        .prop_map(move |ix| ix.iter().map(|&i| fragments[i]).collect())
}

fn check_any(text: &str) {
    match ActorSystem::builder().from_toml_str(text) {
        Ok(_) => {}
        Err(ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. }) => {
            assert!(
                key.starts_with("scheduler") || key.starts_with("coordinated-shutdown"),
                "{key}"
            );
        }
        Err(_) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_string_is_ok_or_an_error(text in any::<String>()) {
        check_any(&text);
    }

    #[test]
    fn any_bytes_are_ok_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        check_any(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn toml_like_soup_is_ok_or_an_error(text in toml_soup()) {
        check_any(&text);
    }

    /// Bad values are refused with an error naming one of the bad keys;
    /// good ones give the builder the same settings make in code.
    #[test]
    fn errors_name_the_key_and_values_match(input in input()) {
        let (text, bad, expected) = render(&input);
        let result = ActorSystem::builder().from_toml_str(&text);
        if bad.is_empty() {
            let builder = result.map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
            prop_assert_eq!(format!("{builder:?}"), expected, "{}", text);
        } else {
            let err = result.expect_err(&text);
            let key = match &err {
                ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
                other => panic!("{text}\nexpected an error naming one of {bad:?}, got {other:?}"),
            };
            prop_assert!(bad.contains(key), "{}\n{:?} names none of {:?}", text, err, bad);
            prop_assert!(err.to_string().contains(key.as_str()), "{}", err);
        }
    }
}
