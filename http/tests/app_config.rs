//! An application's configuration struct with proscenium's sections as
//! fields (issue 26, decision 0025): `[scheduler]`,
//! `[coordinated-shutdown]` and `[http.server]` read in one pass with the
//! application's own table, each as its own reader reads it, and an error
//! in an embedded section naming its full key path.
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::time::Duration;

use proscenium::{de, ConfigError, Phase, SchedulerSettings, ShutdownConfig};
use proscenium_http::ServerSettings;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppConfig {
    #[serde(default)]
    scheduler: SchedulerSettings,
    #[serde(rename = "coordinated-shutdown", default)]
    shutdown: ShutdownConfig,
    #[serde(default)]
    http: HttpConfig,
    my_own: MyStuff,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpConfig {
    #[serde(default)]
    server: ServerSettings,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct MyStuff {
    name: String,
    #[serde(deserialize_with = "de::duration")]
    refresh: Duration,
}

const TEXT: &str = r#"
[scheduler]
workers = 3
stack-size = "1 MiB"

[coordinated-shutdown]
exit-code = 2
[coordinated-shutdown.phases.before-service-unbind]
timeout = "250ms"
[coordinated-shutdown.phases.flush]
depends-on = ["service-stop"]

[http.server]
max-connections = 7
linger-timeout = "0 s"
[http.server.parsing]
max-head-size = "8 KiB"

[my_own]
name = "shop"
refresh = "1m 30s"
"#;

fn key_of(err: ConfigError) -> String {
    match err {
        ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
        other => panic!("not a keyed error: {other:?}"),
    }
}

#[test]
fn an_application_struct_reads_the_sections_as_their_own_readers_do() {
    let app: AppConfig = de::from_toml_str(TEXT).unwrap();
    assert_eq!(app.my_own.name, "shop");
    assert_eq!(app.my_own.refresh, Duration::from_secs(90));
    assert_eq!(app.scheduler.workers, Some(3));
    assert_eq!(app.scheduler.stack_size, Some(1 << 20));
    // The same values as each section's own reader gives.
    assert_eq!(app.shutdown, ShutdownConfig::from_toml_str(TEXT).unwrap());
    assert_eq!(app.shutdown.exit_code, 2);
    assert_eq!(
        app.shutdown.phase_timeout(Phase::BEFORE_SERVICE_UNBIND),
        Some(Duration::from_millis(250))
    );
    assert!(app.shutdown.phase_config("flush").is_some());
    let server = ServerSettings::from_toml_str(TEXT).unwrap();
    assert_eq!(format!("{:?}", app.http.server), format!("{server:?}"));
    let in_code = ServerSettings::default()
        .max_connections(7)
        .linger_timeout(Duration::ZERO)
        .max_head_bytes(8 << 10);
    assert_eq!(format!("{:?}", app.http.server), format!("{in_code:?}"));
    let builder = proscenium::ActorSystem::builder()
        .from_toml_str(TEXT)
        .unwrap();
    let from_struct = proscenium::ActorSystem::builder()
        .scheduler_settings(app.scheduler)
        .coordinated_shutdown(app.shutdown);
    assert_eq!(format!("{builder:?}"), format!("{from_struct:?}"));
}

#[test]
fn absent_sections_are_the_defaults() {
    let app: AppConfig = de::from_toml_str("[my_own]\nname = \"a\"\nrefresh = \"1 s\"").unwrap();
    assert_eq!(app.scheduler, SchedulerSettings::default());
    assert_eq!(app.shutdown, ShutdownConfig::default());
    assert_eq!(
        format!("{:?}", app.http.server),
        format!("{:?}", ServerSettings::default())
    );
}

#[test]
fn an_error_in_an_embedded_section_names_its_full_key_path() {
    let with = |from: &str, to: &str| {
        assert!(TEXT.contains(from), "{from}");
        de::from_toml_str::<AppConfig>(&TEXT.replace(from, to)).unwrap_err()
    };
    let err = with("timeout = \"250ms\"", "timeout = \"soon\"");
    assert!(
        err.to_string()
            .contains("coordinated-shutdown.phases.before-service-unbind.timeout"),
        "{err}"
    );
    let ConfigError::InvalidValue { message, .. } = &err else {
        panic!("{err:?}");
    };
    // The line of the bad value in TEXT (which starts with a newline).
    assert!(message.contains("line 9, column 11"), "{message}");
    let cases = [
        (
            ("max-connections = 7", "max-connections = 0"),
            "http.server.max-connections",
        ),
        (
            ("max-connections = 7", "max-conections = 7"),
            "http.server.max-conections",
        ),
        (
            ("max-head-size = \"8 KiB\"", "max-head-size = \"8 KB\""),
            "http.server.parsing.max-head-size",
        ),
        (("workers = 3", "workers = \"3\""), "scheduler.workers"),
        (
            ("stack-size = \"1 MiB\"", "stack-size = \"1 KiB\""),
            "scheduler.stack-size",
        ),
        (
            ("exit-code = 2", "exit-jvm = 2"),
            "coordinated-shutdown.exit-jvm",
        ),
        (("refresh = \"1m 30s\"", "refresh = 90"), "my_own.refresh"),
        (("name = \"shop\"", "nmae = \"shop\""), "my_own.nmae"),
        (("name = \"shop\"", ""), "my_own.name"),
    ];
    for ((from, to), key) in cases {
        assert_eq!(key_of(with(from, to)), key, "{to}");
    }
    // An unknown key, as the README promises: "an error naming the key path
    // and its line" (issue 35, item 4a; before, the line was missing).
    assert_eq!(
        with("max-connections = 7", "max-conections = 7").to_string(),
        "unknown key `http.server.max-conections` (line 14, column 1)"
    );
}

/// One rule for durations in every section, and in the application's own
/// keys read with `de::duration` (issue 35, item 4c): a string with a
/// unit; a bare number is refused at its key, asking for one.
#[test]
fn a_bare_number_for_a_duration_is_refused_in_every_section() {
    let cases = [
        (
            ("timeout = \"250ms\"", "timeout = 250"),
            "coordinated-shutdown.phases.before-service-unbind.timeout",
            "250",
        ),
        (
            ("linger-timeout = \"0 s\"", "linger-timeout = 0"),
            "http.server.linger-timeout",
            "0",
        ),
        (
            ("linger-timeout = \"0 s\"", "idle-timeout = 60"),
            "http.server.idle-timeout",
            "60",
        ),
        (
            ("refresh = \"1m 30s\"", "refresh = 90"),
            "my_own.refresh",
            "90",
        ),
    ];
    for ((from, to), key, n) in cases {
        assert!(TEXT.contains(from), "{from}");
        let err = de::from_toml_str::<AppConfig>(&TEXT.replace(from, to)).unwrap_err();
        let ConfigError::InvalidValue { key: k, message } = &err else {
            panic!("{to}: {err:?}");
        };
        assert_eq!(k, key, "{to}");
        assert!(
            message.contains(&format!(
                "a bare number has no unit: write \"{n} s\" or \"{n} ms\""
            )),
            "{to}: {message}"
        );
    }
}
