//! Property tests of `ShutdownConfig::from_toml_str` (issue 16): any input
//! is `Ok` or a `ConfigError`, never a panic; a document with the real keys
//! and bad values is refused with an error that names the offending key (or
//! phase); a document with good values gives a config with those values.
//!
//! Bounded: 256 to 512 cases a property, a few seconds in CI. A failing
//! input is shrunk and saved by proptest (its default file persistence) in
//! `shutdown/tests/config_fuzz.proptest-regressions` (next to this file: tests/
//! has no lib.rs, so the default `SourceParallel` falls back to
//! `WithSource`), which is
//! committed, so every later run replays it first; the literal input is
//! also kept as a plain `#[test]` in this file.
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::time::Duration;

use proptest::prelude::*;
use proscenium_shutdown::{ConfigError, Phase, PhaseConfig, ShutdownConfig};

/// A TOML basic string holding `s`.
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

/// A TOML value (as text) that is never a valid duration, flag or integer.
fn wrong_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        Just("[1, \"a\"]".to_owned()),
        Just("{ a = 1 }".to_owned()),
        Just("1979-05-27T07:32:00Z".to_owned()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        Just("nan".to_owned()),
        Just("-inf".to_owned()),
    ]
}

/// A value for a duration key: its TOML text and, if valid, the duration.
fn duration_value() -> impl Strategy<Value = (String, Option<Duration>)> {
    let units: [(&str, u64); 8] = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("millis", 1_000_000),
        ("s", 1_000_000_000),
        ("seconds", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    prop_oneof![
        // Valid: an integer and a unit, with or without a space.
        (0u64..100_000, 0..units.len(), any::<bool>()).prop_map(move |(n, u, space)| {
            let (unit, nanos) = units[u];
            let sep = if space { " " } else { "" };
            (
                quote(&format!("{n}{sep}{unit}")),
                Some(Duration::from_nanos(n * nanos)),
            )
        }),
        // Valid: tenths of a second.
        (0u64..10_000, 0u64..10).prop_map(|(s, tenth)| (
            quote(&format!("{s}.{tenth} s")),
            Some(Duration::from_millis(s * 1000 + tenth * 100))
        )),
        // Negative, no unit, a bad unit, huge, not a number.
        (1u64..1000).prop_map(|n| (quote(&format!("-{n} s")), None)),
        (0u64..1000).prop_map(|n| (quote(&n.to_string()), None)),
        (0u64..1000, "[a-zA-Z]{1,8}")
            .prop_filter("not a unit", |(_, u)| {
                ![
                    "ns",
                    "nanos",
                    "nanosecond",
                    "nanoseconds",
                    "us",
                    "micros",
                    "microsecond",
                    "microseconds",
                    "ms",
                    "millis",
                    "millisecond",
                    "milliseconds",
                    "s",
                    "second",
                    "seconds",
                    "m",
                    "minute",
                    "minutes",
                    "h",
                    "hour",
                    "hours",
                    // humantime's names (decision 0025).
                    "nsec",
                    "usec",
                    "msec",
                    "sec",
                    "secs",
                    "min",
                    "mins",
                    "hr",
                    "hrs",
                    "d",
                    "day",
                    "days",
                    "w",
                    "wk",
                    "wks",
                    "week",
                    "weeks",
                    "M",
                    "month",
                    "months",
                    "y",
                    "yr",
                    "yrs",
                    "year",
                    "years",
                ]
                .contains(&u.as_str())
            })
            .prop_map(|(n, u)| (quote(&format!("{n} {u}")), None)),
        Just((quote("99999999999999999999999 h"), None)),
        Just((quote(&format!("{} s", "9".repeat(400))), None)),
        Just((quote("1e3 s"), None)),
        Just((quote("inf s"), None)),
        Just((quote("NaN s"), None)),
        Just((quote("1.2.3 s"), None)),
        Just((quote(". s"), None)),
        Just((quote(""), None)),
        Just((quote("µs"), None)),
        // Any string starting with a letter: never a duration.
        "x\\PC{0,16}".prop_map(|s| (quote(&s), None)),
        // Not a string at all.
        (0i64..1000).prop_map(|n| (n.to_string(), None)),
        Just(("true".to_owned(), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// A value for a flag: its TOML text and, if valid, the flag.
fn flag_value() -> impl Strategy<Value = (String, Option<bool>)> {
    prop_oneof![
        any::<bool>().prop_map(|b| (b.to_string(), Some(b))),
        any::<bool>().prop_map(|b| (quote(if b { "on" } else { "off" }), Some(b))),
        any::<bool>().prop_map(|b| (quote(&b.to_string()), Some(b))),
        prop_oneof![
            Just("ON"),
            Just("Off"),
            Just("yes"),
            Just("no"),
            Just("1"),
            Just(""),
            Just(" on")
        ]
        .prop_map(|s| (quote(s), None)),
        (0i64..2).prop_map(|n| (n.to_string(), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// A value for `exit-code`: its TOML text and, if valid, the code.
fn exit_code_value() -> impl Strategy<Value = (String, Option<i32>)> {
    prop_oneof![
        any::<i32>().prop_map(|n| (n.to_string(), Some(n))),
        any::<i64>()
            .prop_filter("out of i32", |n| i32::try_from(*n).is_err())
            .prop_map(|n| (n.to_string(), None)),
        Just((i64::MIN.to_string(), None)),
        Just((i64::MAX.to_string(), None)),
        any::<i32>().prop_map(|n| (quote(&n.to_string()), None)),
        Just(("true".to_owned(), None)),
        wrong_type().prop_map(|t| (t, None)),
    ]
}

/// Phase names: the defaults, a few new ones, and odd ones that need
/// quoting.
fn phase_name() -> impl Strategy<Value = String> {
    prop_oneof![
        (0..Phase::DEFAULTS.len()).prop_map(|i| Phase::DEFAULTS[i].to_owned()),
        prop_oneof![Just("a"), Just("b"), Just("c"), Just("d")].prop_map(str::to_owned),
        prop_oneof![Just("with space"), Just("dotted.name"), Just("é"), Just("")]
            .prop_map(str::to_owned),
    ]
}

/// One `depends-on` entry: a phase name (maybe not a phase), or not a
/// string.
#[derive(Debug, Clone)]
enum Dep {
    Name(String),
    NotAString(String),
}

fn dep() -> impl Strategy<Value = Dep> {
    prop_oneof![
        8 => phase_name().prop_map(Dep::Name),
        1 => Just(Dep::Name("no-such-phase".to_owned())),
        1 => prop_oneof![Just("1"), Just("true"), Just("[]"), Just("{}")]
            .prop_map(|s| Dep::NotAString(s.to_owned())),
    ]
}

/// `depends-on`: a list, or not a list.
#[derive(Debug, Clone)]
enum DependsOn {
    List(Vec<Dep>),
    NotAList(String),
}

#[derive(Debug, Clone)]
struct PhaseInput {
    name: String,
    depends_on: Option<DependsOn>,
    timeout: Option<(String, Option<Duration>)>,
    recover: Option<(String, Option<bool>)>,
    enabled: Option<(String, Option<bool>)>,
    unknown: Option<String>,
}

fn phase_input() -> impl Strategy<Value = PhaseInput> {
    let depends_on = prop_oneof![
        9 => proptest::collection::vec(dep(), 0..4).prop_map(DependsOn::List),
        1 => prop_oneof![Just("\"a\""), Just("1"), Just("{}")]
            .prop_map(|s| DependsOn::NotAList(s.to_owned())),
    ];
    (
        phase_name(),
        proptest::option::of(depends_on),
        proptest::option::of(duration_value()),
        proptest::option::of(flag_value()),
        proptest::option::of(flag_value()),
        proptest::option::weighted(0.1, "[a-z][a-z-]{0,10}"),
    )
        .prop_map(
            |(name, depends_on, timeout, recover, enabled, unknown)| PhaseInput {
                name,
                depends_on,
                timeout,
                recover,
                enabled,
                unknown: unknown.filter(|k| {
                    !["depends-on", "timeout", "recover", "enabled"].contains(&k.as_str())
                }),
            },
        )
}

#[derive(Debug, Clone)]
struct Input {
    default_phase_timeout: Option<(String, Option<Duration>)>,
    flags: [Option<(String, Option<bool>)>; 4],
    exit_code: Option<(String, Option<i32>)>,
    unknown: Option<String>,
    phases: Vec<PhaseInput>,
}

const FLAGS: [&str; 4] = [
    "exit-process",
    "run-by-signals",
    "terminate-actor-system",
    "run-by-actor-system-terminate",
];

fn input() -> impl Strategy<Value = Input> {
    let flag = || proptest::option::of(flag_value());
    (
        proptest::option::of(duration_value()),
        [flag(), flag(), flag(), flag()],
        proptest::option::of(exit_code_value()),
        proptest::option::weighted(0.1, "[a-z][a-z-]{0,12}"),
        proptest::collection::vec(phase_input(), 0..4),
    )
        .prop_map(
            |(default_phase_timeout, flags, exit_code, unknown, phases)| Input {
                default_phase_timeout,
                flags,
                exit_code,
                unknown: unknown.filter(|k| {
                    !FLAGS.contains(&k.as_str())
                        && !["default-phase-timeout", "exit-code", "phases"].contains(&k.as_str())
                }),
                phases,
            },
        )
}

/// The document, the keys whose values are bad (an error must name one of
/// them), and the config the good values make (built in code, in the order
/// the parser reads the phases: TOML tables are sorted by key).
fn render(input: &Input) -> (String, Vec<String>, ShutdownConfig) {
    let mut text = String::from("[coordinated-shutdown]\n");
    let mut bad = Vec::new();
    let mut expected = ShutdownConfig::default();
    let cs = "coordinated-shutdown";
    if let Some((value, parsed)) = &input.default_phase_timeout {
        text.push_str(&format!("default-phase-timeout = {value}\n"));
        match parsed {
            Some(d) => expected.default_phase_timeout = *d,
            None => bad.push(format!("{cs}.default-phase-timeout")),
        }
    }
    for (key, flag) in FLAGS.iter().zip(&input.flags) {
        if let Some((value, parsed)) = flag {
            text.push_str(&format!("{key} = {value}\n"));
            match (parsed, *key) {
                (Some(b), "exit-process") => expected.exit_process = *b,
                (Some(b), "run-by-signals") => expected.run_by_signals = *b,
                (Some(b), "terminate-actor-system") => expected.terminate_actor_system = *b,
                (Some(b), _) => expected.run_by_actor_system_terminate = *b,
                (None, _) => bad.push(format!("{cs}.{key}")),
            }
        }
    }
    if let Some((value, parsed)) = &input.exit_code {
        text.push_str(&format!("exit-code = {value}\n"));
        match parsed {
            Some(code) => expected.exit_code = *code,
            None => bad.push(format!("{cs}.exit-code")),
        }
    }
    if let Some(key) = &input.unknown {
        text.push_str(&format!("{key} = 1\n"));
        bad.push(format!("{cs}.{key}"));
    }
    // One table per phase name (a repeated table is not TOML); the first
    // input of a name wins.
    let mut phases: Vec<&PhaseInput> = Vec::new();
    for p in &input.phases {
        if !phases.iter().any(|q| q.name == p.name) {
            phases.push(p);
        }
    }
    phases.sort_by(|a, b| a.name.cmp(&b.name));
    for p in phases {
        let prefix = format!("{cs}.phases.{}", p.name);
        text.push_str(&format!("[{cs}.phases.{}]\n", quote(&p.name)));
        let mut config = PhaseConfig::new();
        match &p.depends_on {
            Some(DependsOn::List(deps)) => {
                let items: Vec<String> = deps
                    .iter()
                    .map(|d| match d {
                        Dep::Name(n) => quote(n),
                        Dep::NotAString(s) => s.clone(),
                    })
                    .collect();
                text.push_str(&format!("depends-on = [{}]\n", items.join(", ")));
                for d in deps {
                    match d {
                        Dep::Name(n) => config = config.depends_on(n.clone()),
                        Dep::NotAString(_) => bad.push(format!("{prefix}.depends-on")),
                    }
                }
            }
            Some(DependsOn::NotAList(s)) => {
                text.push_str(&format!("depends-on = {s}\n"));
                bad.push(format!("{prefix}.depends-on"));
            }
            None => {}
        }
        if let Some((value, parsed)) = &p.timeout {
            text.push_str(&format!("timeout = {value}\n"));
            match parsed {
                Some(d) => config = config.timeout(*d),
                None => bad.push(format!("{prefix}.timeout")),
            }
        }
        if let Some((value, parsed)) = &p.recover {
            text.push_str(&format!("recover = {value}\n"));
            match parsed {
                Some(b) => config = config.recover(*b),
                None => bad.push(format!("{prefix}.recover")),
            }
        }
        if let Some((value, parsed)) = &p.enabled {
            text.push_str(&format!("enabled = {value}\n"));
            match parsed {
                Some(b) => config = config.enabled(*b),
                None => bad.push(format!("{prefix}.enabled")),
            }
        }
        if let Some(key) = &p.unknown {
            text.push_str(&format!("{key} = 1\n"));
            bad.push(format!("{prefix}.{key}"));
        }
        expected = expected.phase(p.name.clone(), config);
    }
    (text, bad, expected)
}

/// The model of the rule for phases the file names (issue 35, item 4b):
/// the first, in name order (the order the reader adds them), that is not
/// one of Akka's, has no dependency, and that no phase depends on.
fn unconnected(input: &Input, expected: &ShutdownConfig) -> Option<String> {
    let mut names: Vec<&str> = input.phases.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let order = expected.ordered_phases().ok()?;
    names
        .into_iter()
        .find(|&name| {
            !Phase::DEFAULTS.contains(&name)
                && expected
                    .phase_config(name)
                    .is_some_and(|c| c.depends_on.is_empty())
                && !order.iter().any(|other| {
                    expected
                        .phase_config(other)
                        .is_some_and(|c| c.depends_on.iter().any(|d| d == name))
                })
        })
        .map(str::to_owned)
}

/// A random sequence of TOML-ish fragments with the real key names: gets
/// past the TOML parser more often than random text does.
fn toml_soup() -> impl Strategy<Value = String> {
    let fragments = [
        "[coordinated-shutdown]",
        "[coordinated-shutdown.phases.",
        "[scheduler]",
        "phases",
        "service-stop",
        "actor-system-terminate",
        "a",
        "]",
        "[",
        "\n",
        " = ",
        ".",
        ",",
        "\"",
        "{",
        "}",
        "depends-on",
        "timeout",
        "recover",
        "enabled",
        "default-phase-timeout",
        "exit-code",
        "exit-process",
        "\"5 s\"",
        "\"on\"",
        "true",
        "-1",
        "99999999999999999999",
        "1.5",
        "#",
    ];
    proptest::collection::vec(0..fragments.len(), 0..40)
        .prop_map(move |ix| ix.iter().map(|&i| fragments[i]).collect())
}

/// Ok or Err; an `InvalidValue` or `UnknownKey` names a key under the
/// section; nothing panics.
fn check_any(text: &str) {
    match ShutdownConfig::from_toml_str(text) {
        Ok(config) => {
            config.ordered_phases().unwrap();
        }
        Err(ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. }) => {
            assert!(key.starts_with("coordinated-shutdown"), "{key}");
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
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Bad values are refused with an error naming one of the bad keys;
    /// good ones give exactly the config the same settings make in code,
    /// or the same DAG error (an unknown phase, a cycle, a phase after the
    /// last), which names the phases involved.
    #[test]
    fn errors_name_the_key_and_values_match(input in input()) {
        let (text, bad, expected) = render(&input);
        let result = ShutdownConfig::from_toml_str(&text);
        if !bad.is_empty() {
            let err = result.expect_err(&text);
            let key = match &err {
                ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
                other => panic!("{text}\nexpected an error naming one of {bad:?}, got {other:?}"),
            };
            prop_assert!(bad.contains(key), "{}\n{:?} names none of {:?}", text, err, bad);
            prop_assert!(err.to_string().contains(key.as_str()), "{}", err);
            return Ok(());
        }
        match expected.ordered_phases() {
            Ok(_) if unconnected(&input, &expected).is_some() => {
                // Issue 35: a phase of the file that is not Akka's and that
                // no depends-on ties in is refused, the first in name order.
                let phase = unconnected(&input, &expected).unwrap();
                let err = result.expect_err(&text);
                let ConfigError::UnconnectedPhase { phase: p, closest } = &err else {
                    panic!("{text}\nexpected UnconnectedPhase {phase:?}, got {err:?}");
                };
                prop_assert_eq!(p, &phase, "{}", text);
                prop_assert!(Phase::DEFAULTS.contains(&closest.as_str()), "{}", closest);
                let shown = err.to_string();
                prop_assert!(shown.contains(p.as_str()) && shown.contains(closest.as_str()));
            }
            Ok(_) => {
                let config = result.map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
                prop_assert_eq!(&config, &expected, "{}", text);
                // Spot checks against the input itself, not only the model.
                if let Some((_, Some(code))) = &input.exit_code {
                    prop_assert_eq!(config.exit_code, *code);
                }
                if let Some((_, Some(d))) = &input.default_phase_timeout {
                    prop_assert_eq!(config.default_phase_timeout, *d);
                }
            }
            Err(dag) => {
                let err = result.expect_err(&text);
                prop_assert_eq!(&err, &dag, "{}", text);
                let shown = err.to_string();
                match &err {
                    ConfigError::UnknownPhase { phase, depends_on } => {
                        prop_assert!(shown.contains(phase.as_str()) && shown.contains(depends_on.as_str()));
                    }
                    ConfigError::Cycle { phases } => {
                        prop_assert!(!phases.is_empty());
                        for p in phases {
                            prop_assert!(shown.contains(p.as_str()), "{}", shown);
                        }
                    }
                    ConfigError::AfterLastPhase { phase } => {
                        prop_assert!(shown.contains(phase.as_str()));
                    }
                    other => prop_assert!(false, "{:?}", other),
                }
            }
        }
    }
}
