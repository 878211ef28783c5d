//! The phase DAG and its configuration, in code and from TOML
//! (akka-coordinated-shutdown.txt).
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::time::Duration;

use proscenium_shutdown::{ConfigError, Phase, PhaseConfig, ShutdownConfig};

fn position(order: &[String], phase: &str) -> usize {
    order.iter().position(|p| p == phase).unwrap()
}

/// "The order of the shutdown phases is defined in configuration
/// akka.coordinated-shutdown.phases. The default phases are defined as: ..."
/// (before-service-unbind through actor-system-terminate, each depending on
/// the one before; three of them with `timeout = 10 s`).
#[test]
fn the_default_phases_run_in_the_documented_order_with_their_timeouts() {
    let config = ShutdownConfig::default();
    assert_eq!(config.ordered_phases().unwrap(), Phase::DEFAULTS);
    let ten = Some(Duration::from_secs(10));
    let five = Some(Duration::from_secs(5));
    assert_eq!(
        config.phase_timeout(Phase::CLUSTER_SHARDING_SHUTDOWN_REGION),
        ten
    );
    assert_eq!(config.phase_timeout(Phase::CLUSTER_EXITING), ten);
    assert_eq!(config.phase_timeout(Phase::ACTOR_SYSTEM_TERMINATE), ten);
    assert_eq!(config.phase_timeout(Phase::SERVICE_UNBIND), five);
    assert_eq!(
        config
            .phase_config(Phase::SERVICE_UNBIND)
            .unwrap()
            .depends_on,
        [Phase::BEFORE_SERVICE_UNBIND]
    );
    // Akka's process-level defaults, with exit off (Akka's exit-jvm = off).
    assert!(config.run_by_signals && config.terminate_actor_system);
    assert!(config.run_by_actor_system_terminate && !config.exit_process);
}

/// "The default phases are defined in a single linear order, but the phases
/// can be ordered as a directed acyclic graph (DAG) by defining the
/// dependencies between the phases. The phases are ordered with
/// topological sort of the DAG."
#[test]
fn a_diamond_is_sorted_topologically() {
    let config = ShutdownConfig::default()
        .phase("d", PhaseConfig::new().depends_on("b").depends_on("c"))
        .phase("b", PhaseConfig::new().depends_on("a"))
        .phase("c", PhaseConfig::new().depends_on("a"))
        .phase("a", PhaseConfig::new().depends_on(Phase::SERVICE_STOP));
    let order = config.ordered_phases().unwrap();
    let at = |p| position(&order, p);
    assert!(at(Phase::SERVICE_STOP) < at("a"));
    assert!(at("a") < at("b") && at("a") < at("c"));
    assert!(at("b") < at("d") && at("c") < at("d"));
}

/// "More phases can be added in the application's configuration if needed
/// by overriding a phase with an additional depends-on."
#[test]
fn toml_adds_a_phase_and_an_additional_depends_on() {
    let config = ShutdownConfig::from_toml_str(
        r#"
        [coordinated-shutdown]
        default-phase-timeout = "2 s"
        exit-process = "on"
        exit-code = 7
        run-by-signals = false
        terminate-actor-system = "off"
        run-by-actor-system-terminate = false

        [coordinated-shutdown.phases.drain-queues]
        depends-on = ["service-requests-done"]
        timeout = "750ms"
        recover = "off"

        [coordinated-shutdown.phases.service-stop]
        depends-on = ["drain-queues"]
        enabled = false
        "#,
    )
    .unwrap();
    let order = config.ordered_phases().unwrap();
    let at = |p| position(&order, p);
    assert!(at(Phase::SERVICE_REQUESTS_DONE) < at("drain-queues"));
    assert!(at("drain-queues") < at(Phase::SERVICE_STOP));
    let stop = config.phase_config(Phase::SERVICE_STOP).unwrap();
    // Additional: the default dependency is kept.
    assert_eq!(
        stop.depends_on,
        [Phase::SERVICE_REQUESTS_DONE, "drain-queues"]
    );
    assert!(!stop.enabled && stop.recover);
    let drain = config.phase_config("drain-queues").unwrap();
    assert!(!drain.recover);
    assert_eq!(
        config.phase_timeout("drain-queues"),
        Some(Duration::from_millis(750))
    );
    assert_eq!(config.default_phase_timeout, Duration::from_secs(2));
    assert_eq!(
        config.phase_timeout(Phase::SERVICE_UNBIND),
        Some(Duration::from_secs(2))
    );
    assert!(config.exit_process && config.exit_code == 7);
    assert!(!config.run_by_signals && !config.terminate_actor_system);
    assert!(!config.run_by_actor_system_terminate);
}

/// A file without a `[coordinated-shutdown]` table gives the defaults (other
/// tables belong to other layers).
#[test]
fn toml_without_the_section_gives_the_defaults() {
    let config = ShutdownConfig::from_toml_str("[scheduler]\nworkers = 4\n").unwrap();
    assert_eq!(config, ShutdownConfig::default());
}

#[test]
fn an_unknown_phase_in_depends_on_names_both_phases() {
    let err = ShutdownConfig::default()
        .depends_on(Phase::SERVICE_STOP, "no-such-phase")
        .ordered_phases()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::UnknownPhase {
            phase: Phase::SERVICE_STOP.to_owned(),
            depends_on: "no-such-phase".to_owned()
        }
    );
    let text =
        ShutdownConfig::from_toml_str("[coordinated-shutdown.phases.x]\ndepends-on = [\"nope\"]\n")
            .unwrap_err()
            .to_string();
    assert!(text.contains("`x`") && text.contains("`nope`"), "{text}");
}

#[test]
fn a_cycle_is_refused_and_named() {
    let err = ShutdownConfig::default()
        .phase("a", PhaseConfig::new().depends_on("c"))
        .phase("b", PhaseConfig::new().depends_on("a"))
        .phase("c", PhaseConfig::new().depends_on("b"))
        .phase("after", PhaseConfig::new().depends_on("a"))
        .ordered_phases()
        .unwrap_err();
    let ConfigError::Cycle { phases } = &err else {
        panic!("{err:?}");
    };
    let mut sorted = phases.clone();
    sorted.sort();
    assert_eq!(sorted, ["a", "b", "c"], "only the phases on the cycle");
    assert!(err.to_string().contains(" -> "), "{err}");
    // A self-dependency is a cycle of one.
    let err = ShutdownConfig::default()
        .depends_on(Phase::SERVICE_STOP, Phase::SERVICE_STOP)
        .ordered_phases()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::Cycle {
            phases: vec![Phase::SERVICE_STOP.to_owned()]
        }
    );
}

#[test]
fn bad_values_and_unknown_keys_name_the_key() {
    let cases = [
        (
            "[coordinated-shutdown.phases.service-stop]\ntimeout = \"soon\"\n",
            "coordinated-shutdown.phases.service-stop.timeout",
        ),
        (
            "[coordinated-shutdown]\ndefault-phase-timeout = 5\n",
            "coordinated-shutdown.default-phase-timeout",
        ),
        (
            "[coordinated-shutdown]\nexit-process = \"maybe\"\n",
            "coordinated-shutdown.exit-process",
        ),
        (
            "[coordinated-shutdown]\nexit-code = 99999999999\n",
            "coordinated-shutdown.exit-code",
        ),
        (
            "[coordinated-shutdown.phases.service-stop]\ndepends-on = \"service-unbind\"\n",
            "coordinated-shutdown.phases.service-stop.depends-on",
        ),
    ];
    for (text, key) in cases {
        match ShutdownConfig::from_toml_str(text) {
            Err(ConfigError::InvalidValue { key: k, .. }) => assert_eq!(k, key, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    assert_eq!(
        ShutdownConfig::from_toml_str("[coordinated-shutdown]\nexit-jvm = true\n"),
        Err(ConfigError::UnknownKey {
            key: "coordinated-shutdown.exit-jvm".to_owned(),
            line: Some(2),
            column: Some(1),
        })
    );
    assert_eq!(
        ShutdownConfig::from_toml_str(
            "[coordinated-shutdown.phases.service-stop]\nrecovr = false\n"
        ),
        Err(ConfigError::UnknownKey {
            key: "coordinated-shutdown.phases.service-stop.recovr".to_owned(),
            line: Some(2),
            column: Some(1),
        })
    );
    assert!(matches!(
        ShutdownConfig::from_toml_str("[coordinated-shutdown"),
        Err(ConfigError::Parse(_))
    ));
}

#[test]
fn a_missing_file_is_a_typed_error_naming_it() {
    let err = ShutdownConfig::from_toml_file("/nonexistent/shutdown.toml").unwrap_err();
    assert!(matches!(&err, ConfigError::Io { path, .. } if path == "/nonexistent/shutdown.toml"));
}

/// "Last phase. ... Don't add phases that depends on this phase because the
/// dispatcher and scheduler of the ActorSystem have been shutdown." A phase
/// that depends on it is refused at start-up, naming the phase; a phase that
/// nothing depends on still runs before it.
#[test]
fn nothing_may_follow_the_last_phase() {
    let err = ShutdownConfig::default()
        .phase(
            "too-late",
            PhaseConfig::new().depends_on(Phase::ACTOR_SYSTEM_TERMINATE),
        )
        .ordered_phases()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::AfterLastPhase {
            phase: "too-late".to_owned()
        }
    );
    assert!(err.to_string().contains("`too-late`"), "{err}");
    let order = ShutdownConfig::default()
        .phase("dangling", PhaseConfig::new())
        .ordered_phases()
        .unwrap();
    assert_eq!(
        order.last().map(String::as_str),
        Some(Phase::ACTOR_SYSTEM_TERMINATE)
    );
    assert!(position(&order, "dangling") < position(&order, Phase::ACTOR_SYSTEM_TERMINATE));
}

/// Code and TOML configure a phase the same way: setting an existing
/// phase's timeout in code keeps the dependencies added before (it used to
/// replace the whole phase, silently dropping `early` from `service-stop`'s
/// dependencies, so `early` could run after `service-stop`).
#[test]
fn code_merges_a_phase_as_toml_does() {
    let in_code = ShutdownConfig::default()
        .phase("early", PhaseConfig::new())
        .depends_on(Phase::SERVICE_STOP, "early")
        .phase(
            Phase::SERVICE_STOP,
            PhaseConfig::new().timeout(Duration::from_secs(1)),
        )
        .phase(Phase::SERVICE_UNBIND, PhaseConfig::new().recover(false))
        .phase(Phase::SERVICE_UNBIND, PhaseConfig::new().enabled(false));
    let from_toml = ShutdownConfig::from_toml_str(
        r#"
        [coordinated-shutdown.phases.early]
        [coordinated-shutdown.phases.service-stop]
        depends-on = ["early"]
        timeout = "1 s"
        [coordinated-shutdown.phases.service-unbind]
        recover = "off"
        enabled = "off"
        "#,
    )
    .unwrap();
    let stop = in_code.phase_config(Phase::SERVICE_STOP).unwrap();
    assert_eq!(stop.depends_on, [Phase::SERVICE_REQUESTS_DONE, "early"]);
    assert_eq!(stop.timeout, Some(Duration::from_secs(1)));
    let unbind = in_code.phase_config(Phase::SERVICE_UNBIND).unwrap();
    assert!(
        !unbind.recover,
        "a later phase() that sets only `enabled` keeps `recover`"
    );
    assert!(!unbind.enabled);
    assert_eq!(unbind.depends_on, [Phase::BEFORE_SERVICE_UNBIND]);
    assert_eq!(in_code, from_toml);
    let order = in_code.ordered_phases().unwrap();
    assert!(position(&order, "early") < position(&order, Phase::SERVICE_STOP));
    // A recover(true) after a recover(false) sets it back, as TOML's "on".
    let back = in_code.phase(Phase::SERVICE_UNBIND, PhaseConfig::new().recover(true));
    assert!(back.phase_config(Phase::SERVICE_UNBIND).unwrap().recover);
}

/// `replace_phase` starts a phase over, dependencies included.
#[test]
fn replace_phase_replaces_everything() {
    let config = ShutdownConfig::default()
        .phase("early", PhaseConfig::new())
        .depends_on(Phase::SERVICE_STOP, "early")
        .replace_phase(
            Phase::SERVICE_STOP,
            PhaseConfig::new()
                .depends_on(Phase::SERVICE_REQUESTS_DONE)
                .timeout(Duration::from_secs(1)),
        );
    let stop = config.phase_config(Phase::SERVICE_STOP).unwrap();
    assert_eq!(stop.depends_on, [Phase::SERVICE_REQUESTS_DONE]);
    assert_eq!(stop.timeout, Some(Duration::from_secs(1)));
}

/// The section embedded in an application's own configuration struct
/// (serde, issue 26): read over the defaults and validated as
/// `from_toml_str` reads it, unknown keys refused, an error naming the
/// full key path and its line.
#[test]
fn the_section_embeds_in_an_application_struct() {
    use proscenium_shutdown::de;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct AppConfig {
        #[serde(rename = "coordinated-shutdown", default)]
        shutdown: ShutdownConfig,
        name: String,
    }

    let text = r#"
        name = "shop"
        [coordinated-shutdown]
        exit-code = 4
        [coordinated-shutdown.phases.drain-queues]
        depends-on = ["service-requests-done"]
        timeout = "1.5 s"
    "#;
    let app: AppConfig = de::from_toml_str(text).unwrap();
    assert_eq!(app.name, "shop");
    assert_eq!(app.shutdown, ShutdownConfig::from_toml_str(text).unwrap());
    assert_eq!(
        app.shutdown.phase_timeout("drain-queues"),
        Some(Duration::from_millis(1500))
    );
    // Absent: the defaults.
    let app: AppConfig = de::from_toml_str("name = \"shop\"").unwrap();
    assert_eq!(app.shutdown, ShutdownConfig::default());

    let err = de::from_toml_str::<AppConfig>(
        "name = \"shop\"\n[coordinated-shutdown.phases.service-stop]\ntimeout = \"soon\"\n",
    )
    .unwrap_err();
    let ConfigError::InvalidValue { key, message } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(key, "coordinated-shutdown.phases.service-stop.timeout");
    assert!(message.contains("line 3, column 11"), "{message}");
    assert!(err.to_string().contains(key.as_str()), "{err}");
    assert_eq!(
        de::from_toml_str::<AppConfig>("name = \"a\"\n[coordinated-shutdown]\nexit-jvm = true")
            .unwrap_err(),
        ConfigError::UnknownKey {
            key: "coordinated-shutdown.exit-jvm".to_owned(),
            line: Some(3),
            column: Some(1),
        }
    );
    // The application's own keys: as strict.
    assert_eq!(
        de::from_toml_str::<AppConfig>("name = \"a\"\nnmae = \"b\"").unwrap_err(),
        ConfigError::UnknownKey {
            key: "nmae".to_owned(),
            line: Some(2),
            column: Some(1),
        }
    );
    assert_eq!(
        de::from_toml_str::<AppConfig>("").unwrap_err(),
        ConfigError::InvalidValue {
            key: "name".to_owned(),
            message: "required (line 1, column 1)".to_owned()
        }
    );
    // The phase graph is validated when the section is read.
    let err = de::from_toml_str::<AppConfig>(
        "name = \"a\"\n[coordinated-shutdown.phases.x]\ndepends-on = [\"nope\"]\n",
    )
    .unwrap_err();
    let ConfigError::InvalidValue { key, message } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(key, "coordinated-shutdown");
    assert!(
        message.contains("`x`") && message.contains("`nope`"),
        "{message}"
    );
}

/// A syntax error is a parse error with its line and column.
#[test]
fn a_syntax_error_names_its_line() {
    let err =
        ShutdownConfig::from_toml_str("[coordinated-shutdown]\nexit-code = = 3\n").unwrap_err();
    let ConfigError::Parse(message) = &err else {
        panic!("{err:?}");
    };
    assert!(message.contains("line 2"), "{message}");
}

/// An unknown key names its full path and its line and column, as a bad
/// value does (issue 35, item 4a: the README promises "an error naming the
/// key path and its line"; the line was missing for unknown keys).
#[test]
fn an_unknown_key_names_its_path_and_line() {
    let text = r#"[coordinated-shutdown]
default-phase-timeout = "5 s"

[coordinated-shutdown.phases.service-stop]
timeout = "1 s"
  recovr = "off"
"#;
    let err = ShutdownConfig::from_toml_str(text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown key `coordinated-shutdown.phases.service-stop.recovr` (line 6, column 3)"
    );
    // In an inline table too.
    let err = ShutdownConfig::from_toml_str(
        "[coordinated-shutdown]\nphases = { service-stop = { timeout = \"1 s\", enabld = false } }\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown key `coordinated-shutdown.phases.service-stop.enabld` (line 2, column 46)"
    );
}

/// A misspelt phase (`service-request-done` for `service-requests-done`)
/// used to be accepted as a new, empty phase, and the timeout meant for
/// the real one was never applied. A phase the file names that is not one
/// of Akka's, depends on no phase and that no phase depends on is refused,
/// naming the closest of Akka's phases (issue 35, item 4b). One tied in by
/// `depends-on`, either way, is an application's own phase ("More phases
/// can be added in the application's configuration if needed by
/// overriding a phase with an additional depends-on"), as are Akka's
/// phases set without one.
#[test]
fn a_misspelt_phase_is_refused_naming_the_closest_phase() {
    let err = ShutdownConfig::from_toml_str(
        "[coordinated-shutdown.phases.service-request-done]\ntimeout = \"30 s\"\n",
    )
    .unwrap_err();
    assert_eq!(
        err,
        ConfigError::UnconnectedPhase {
            phase: "service-request-done".to_owned(),
            closest: Phase::SERVICE_REQUESTS_DONE.to_owned(),
        }
    );
    assert_eq!(
        err.to_string(),
        "`coordinated-shutdown.phases.service-request-done` is not one of Akka's phases and no \
         `depends-on` ties it to one (it depends on no phase, and no phase depends on it), so it \
         would be a new, empty phase: did you mean `service-requests-done`?"
    );
    // Tied in by its own depends-on, or by another phase's: accepted.
    let own = ShutdownConfig::from_toml_str(
        r#"
        [coordinated-shutdown.phases.flush-caches]
        depends-on = ["service-stop"]
        [coordinated-shutdown.phases.early]
        timeout = "1 s"
        [coordinated-shutdown.phases.service-unbind]
        depends-on = ["early"]
        [coordinated-shutdown.phases.cluster-shutdown]
        timeout = "3 s"
        "#,
    )
    .unwrap();
    assert_eq!(own.phase_timeout("early"), Some(Duration::from_secs(1)));
    assert_eq!(
        own.phase_timeout(Phase::CLUSTER_SHUTDOWN),
        Some(Duration::from_secs(3))
    );
    // Embedded in an application's struct: an error at the section's key
    // that names the phase (as every check across keys there).
    #[derive(Debug, serde::Deserialize)]
    struct App {
        #[serde(rename = "coordinated-shutdown")]
        _shutdown: ShutdownConfig,
    }
    let err = proscenium_shutdown::de::from_toml_str::<App>(
        "[coordinated-shutdown.phases.servce-stop]
timeout = \"1 s\"\n",
    )
    .unwrap_err();
    let ConfigError::InvalidValue { key, message } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(key, "coordinated-shutdown");
    assert!(
        message.contains("`coordinated-shutdown.phases.servce-stop`")
            && message.contains("did you mean `service-stop`?"),
        "{message}"
    );
    // In code, a phase with no dependencies stays allowed
    // (`nothing_may_follow_the_last_phase`): the constants avoid typos.
    assert!(ShutdownConfig::default()
        .phase("dangling", PhaseConfig::new())
        .ordered_phases()
        .is_ok());
}

/// One rule for durations in every section (issue 35, item 4c): a string
/// with a unit. A bare number, integer or float, is refused at its key and
/// line with an error that says to add one (was `5` seconds or
/// milliseconds?); `[remote]`, which alone read an integer as
/// milliseconds, follows the same rule (remote/src/config.rs
/// `a_bare_number_is_refused_asking_for_a_unit`).
#[test]
fn a_bare_number_for_a_duration_is_refused_asking_for_a_unit() {
    let message_of = |text: &str, key: &str| match ShutdownConfig::from_toml_str(text) {
        Err(ConfigError::InvalidValue { key: k, message }) => {
            assert_eq!(k, key, "{text}");
            message
        }
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(
        message_of(
            "[coordinated-shutdown]\ndefault-phase-timeout = 5\n",
            "coordinated-shutdown.default-phase-timeout"
        ),
        "invalid value: integer `5`, expected a duration such as \"10 s\" or \"500 ms\"; a bare \
         number has no unit: write \"5 s\" or \"5 ms\" (line 2, column 25)"
    );
    assert!(message_of(
        "[coordinated-shutdown.phases.service-stop]\ntimeout = 1.5\n",
        "coordinated-shutdown.phases.service-stop.timeout"
    )
    .contains("a bare number has no unit: write \"1.5 s\" or \"1.5 ms\""));
    // A negative number is not a duration in any unit: no hint.
    let negative = message_of(
        "[coordinated-shutdown]\ndefault-phase-timeout = -5\n",
        "coordinated-shutdown.default-phase-timeout",
    );
    assert!(!negative.contains("bare number"), "{negative}");
    // With a unit, the same value is read.
    let config =
        ShutdownConfig::from_toml_str("[coordinated-shutdown]\ndefault-phase-timeout = \"5 s\"\n")
            .unwrap();
    assert_eq!(config.default_phase_timeout, Duration::from_secs(5));
}
