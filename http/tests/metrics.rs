//! The `metrics` feature end to end: the server of examples/metrics.rs
//! (its code, included below) with the Prometheus recorder installed,
//! some traffic of known statuses, K actors spawned and stopped and their
//! dead letters, then `GET /metrics` on the server itself, whose
//! Prometheus text must show exactly those values.
//!
//! Run with `cargo test -p proscenium-http --features metrics --test
//! metrics` (.ci/run does). One test: the recorder is global, installed
//! once per process.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

/// The example's server: `install_recorder`, `serve` (its `main` is not
/// run here).
#[allow(dead_code)]
#[path = "../examples/metrics.rs"]
mod example;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;

use support::{connect, read_answer, system};

/// A scrape's samples: `name{labels}` (labels sorted) to value.
struct Scrape(BTreeMap<String, f64>);

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut samples = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let key = match series.split_once('{') {
                None => series.to_owned(),
                Some((name, labels)) => {
                    let mut labels: Vec<&str> = labels
                        .trim_end_matches('}')
                        .split(',')
                        .filter(|l| !l.is_empty())
                        .collect();
                    labels.sort_unstable();
                    format!("{name}{{{}}}", labels.join(","))
                }
            };
            samples.insert(key, value.parse().expect("a number"));
        }
        Scrape(samples)
    }

    /// The value of `name` with exactly `labels` (`key="value"` pairs).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        labels.sort_unstable();
        let key = format!("{name}{{{}}}", labels.join(","));
        *self.0.get(&key).unwrap_or_else(|| {
            panic!(
                "{key} is not in the scrape: {:#?}",
                self.0.keys().collect::<Vec<_>>()
            )
        })
    }
}

/// Sends `method path` on the keep-alive connection and returns the
/// answer's status and body.
fn exchange(stream: &mut TcpStream, method: &str, path: &str) -> (u16, String) {
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let answer = read_answer(stream);
    (answer.status, answer.body)
}

/// Every request goes on one keep-alive connection, one after the other:
/// the server finishes a request (its counters and its duration recorded)
/// before it reads the next, so the scrape, the last request, sees all
/// of them and nothing is waited for but answers.
#[test]
fn a_scrape_after_traffic_shows_the_counted_values() {
    const OK: usize = 5;
    const NOT_FOUND: usize = 3;
    const FAILED: usize = 2;
    const ACTORS: usize = 4;
    let prometheus = example::install_recorder();
    let system = system();
    let binding = example::serve(&system, "127.0.0.1:0".parse().unwrap(), prometheus).unwrap();
    let address = binding.local_addr().to_string();
    let mut client = connect(&binding);

    for _ in 0..OK {
        assert_eq!(exchange(&mut client, "GET", "/hello").0, 200);
    }
    for _ in 0..NOT_FOUND {
        assert_eq!(exchange(&mut client, "GET", "/status/404").0, 404);
    }
    for _ in 0..FAILED {
        assert_eq!(exchange(&mut client, "GET", "/status/500").0, 500);
    }
    let actors = format!("/actors/{ACTORS}");
    assert_eq!(exchange(&mut client, "POST", &actors).0, 204);
    // Every actor was told one message after its stop.
    assert_eq!(system.dead_letter_count(), ACTORS as u64);

    let (status, text) = exchange(&mut client, "GET", "/metrics");
    assert_eq!(status, 200);
    let scrape = Scrape::parse(&text);
    let at = [("address", address.as_str())];
    let with_status = |code| [("address", address.as_str()), ("status", code)];
    let requests = "proscenium_http_requests_total";
    // The traffic before the scrape: the scrape's own response is written
    // after its handler rendered the text.
    assert_eq!(scrape.get(requests, &with_status("200")), OK as f64);
    assert_eq!(scrape.get(requests, &with_status("404")), NOT_FOUND as f64);
    assert_eq!(scrape.get(requests, &with_status("500")), FAILED as f64);
    assert_eq!(scrape.get(requests, &with_status("204")), 1.0);
    let before_scrape = (OK + NOT_FOUND + FAILED + 1) as f64;
    // The scrape itself is in the handler.
    assert_eq!(
        scrape.get("proscenium_http_handler_requests_total", &at),
        before_scrape + 1.0
    );
    assert_eq!(scrape.get("proscenium_http_in_flight_requests", &at), 1.0);
    assert_eq!(scrape.get("proscenium_http_open_connections", &at), 1.0);
    assert_eq!(
        scrape.get("proscenium_http_connections_accepted_total", &at),
        1.0
    );
    let durations = "proscenium_http_request_duration_seconds";
    assert_eq!(
        scrape.get(&format!("{durations}_count"), &at),
        before_scrape
    );
    let mut inf = at.to_vec();
    inf.push(("le", "+Inf"));
    assert_eq!(
        scrape.get(&format!("{durations}_bucket"), &inf),
        before_scrape
    );
    assert!(scrape.get(&format!("{durations}_sum"), &at) > 0.0);

    let sys = [("system", system.name())];
    // The three guardians and the actors.
    assert_eq!(
        scrape.get("proscenium_actors_spawned_total", &sys),
        (3 + ACTORS) as f64
    );
    assert_eq!(
        scrape.get("proscenium_actors_stopped_total", &sys),
        ACTORS as f64
    );
    assert_eq!(scrape.get("proscenium_actors_restarts_total", &sys), 0.0);
    assert_eq!(
        scrape.get("proscenium_dead_letters_total", &sys),
        ACTORS as f64
    );
    assert_eq!(scrape.get("proscenium_scheduler_workers", &sys), 2.0);
    let runs: f64 = ["0", "1"]
        .iter()
        .map(|w| {
            scrape.get(
                "proscenium_scheduler_runs_total",
                &[("system", system.name()), ("worker", w)],
            )
        })
        .sum();
    assert!(runs > 0.0, "the workers ran the connection and the actors");
    let _ = scrape.get("proscenium_scheduler_injector_depth", &sys);
    assert!(text.contains("# TYPE proscenium_http_requests_total counter"));
    assert!(text.contains("# TYPE proscenium_http_request_duration_seconds histogram"));
    assert!(text.contains("# HELP proscenium_actors_spawned_total "));

    // A second scrape counts the first.
    let (_, text) = exchange(&mut client, "GET", "/metrics");
    let scrape = Scrape::parse(&text);
    assert_eq!(scrape.get(requests, &with_status("200")), (OK + 1) as f64);
    assert_eq!(
        scrape.get(&format!("{durations}_count"), &at),
        before_scrape + 1.0
    );

    // The server first, then the system: a system terminated under a
    // bound server (whose connection task may not have seen the client's
    // close yet) leaves that task behind, and the report is not clean.
    drop(client);
    let terminated = binding
        .terminate(std::time::Duration::from_secs(5))
        .wait()
        .expect("the server terminates");
    assert_eq!(terminated.forced_connections, 0);
    assert!(system.terminate().wait().clean());
}
