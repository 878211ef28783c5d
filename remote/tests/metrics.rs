//! The `metrics` feature on a real NATS server: a node's messages sent
//! and received, drops and reconnects, published through its system's
//! `publish_metrics` with the label `node`.
//!
//! Run with `cargo test -p proscenium-remote --features metrics --test
//! metrics` (.ci/run does).

mod support;

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use proscenium::prelude::*;
use proscenium_remote::{Remote, RemoteSettings};
use support::{eventually, require_nats, system, Cmd, Counter, NatsServer, GUARD};

fn settings(server: &NatsServer, node: &str) -> RemoteSettings {
    RemoteSettings::new(server.url(), "m", node)
        .failure_detector(Duration::from_millis(100), Duration::from_millis(1000))
}

/// The counters `system` publishes for `node` (one publication, on this
/// thread, into `recorder`): `(name, reason label, value)`.
fn node_counters(
    recorder: &DebuggingRecorder,
    snapshotter: &Snapshotter,
    system: &ActorSystem,
    node: &str,
) -> Vec<(String, Option<String>, u64)> {
    metrics::with_local_recorder(recorder, || system.publish_metrics());
    let mut counters: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let of_node = key.labels().any(|l| l.key() == "node" && l.value() == node);
            let reason = key
                .labels()
                .find(|l| l.key() == "reason")
                .map(|l| l.value().to_owned());
            match value {
                DebugValue::Counter(n) if of_node => Some((key.name().to_owned(), reason, n)),
                _ => None,
            }
        })
        .collect();
    counters.sort();
    counters
}

fn get(counters: &[(String, Option<String>, u64)], name: &str, reason: Option<&str>) -> u64 {
    counters
        .iter()
        .find(|(n, r, _)| n == name && r.as_deref() == reason)
        .map(|&(.., v)| v)
        .unwrap_or_else(|| panic!("{name} {reason:?} not published: {counters:?}"))
}

/// `b` tells `a`'s exposed counter N times and asks it once: `b` sent
/// N + 1, `a` received N + 1 (the reply is not a message to an actor),
/// nothing dropped; then the server restarts and each node counts one
/// reconnect.
#[test]
fn sent_received_dropped_and_reconnects_are_published() {
    require_nats!();
    const N: u64 = 6;
    let mut server = NatsServer::start();
    let sys_a = system("a");
    let sys_b = system("b");
    let a = Remote::connect(&sys_a, settings(&server, "a")).expect("connect a");
    let b = Remote::connect(&sys_b, settings(&server, "b")).expect("connect b");
    let counter = sys_a.spawn(Counter::props("a"), "counter").expect("spawn");
    a.expose(&counter, "counter").expect("expose");
    let far = b.actor_ref::<Cmd>("counter").expect("ref");
    for _ in 0..N {
        far.tell(Cmd::Add(1)).expect("tell");
    }
    // Answered after the tells: they were all delivered.
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(N));

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let on_a = node_counters(&recorder, &snapshotter, &sys_a, "a");
    let on_b = node_counters(&recorder, &snapshotter, &sys_b, "b");
    let sent = "proscenium_remote_messages_sent_total";
    let received = "proscenium_remote_messages_received_total";
    let reconnects = "proscenium_remote_reconnects_total";
    assert_eq!(get(&on_b, sent, None), N + 1);
    assert_eq!(get(&on_a, received, None), N + 1);
    assert_eq!(get(&on_a, sent, None), 0);
    assert_eq!(get(&on_b, received, None), 0);
    for counters in [&on_a, &on_b] {
        assert_eq!(get(counters, reconnects, None), 0);
        for reason in ["slow_consumer", "reply_outbound_full", "rejected"] {
            let dropped = "proscenium_remote_dropped_total";
            assert_eq!(get(counters, dropped, Some(reason)), 0, "{reason}");
        }
        let nats_out = get(counters, "proscenium_remote_nats_messages_out_total", None);
        assert!(nats_out > 0, "heartbeats and messages went out");
    }

    // A restart of the server: each node reconnects once.
    server.kill();
    server.start_again();
    eventually("an answered ask after the restart", || {
        far.ask(Cmd::Get, Duration::from_secs(1)).wait().is_ok()
    });
    eventually("both nodes reconnected", || {
        let on_a = node_counters(&recorder, &snapshotter, &sys_a, "a");
        let on_b = node_counters(&recorder, &snapshotter, &sys_b, "b");
        get(&on_a, reconnects, None) == 1 && get(&on_b, reconnects, None) == 1
    });

    drop((a, b, far));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
