//! Issue 33, item 11: the subscription buffers were bounded in messages
//! (65,536 each), not in bytes: a flood of maximum-size messages that
//! fail verification could hold tens of gigabytes before the node looked
//! at them. With the `nats-patch` feature (the NATS client this workspace
//! patches) each buffer is bounded in bytes too; past it the client drops
//! what arrives, as a slow consumer's. Here: a client without the key
//! floods an exposed name with 2,000 messages of 1 MB, and the node's
//! peak resident memory grows by a few times the bound, not by the flood.
//! (Its own test binary: the memory measured is this test's alone.)

mod support;

use std::time::Duration;

use proscenium_remote::{Remote, RemoteSettings};
use support::raw::RawNats;
use support::{require_nats, system, Cmd, Counter, NatsServer, GUARD};

const KEY: &str = "the test cluster's key: 32 bytes or more";

/// A line of /proc/self/status, in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<usize>().ok())
        .map(|kb| kb * 1024)
        .expect("a size in kB")
}

#[test]
fn a_flood_of_large_unverifiable_messages_holds_a_bounded_memory() {
    require_nats!();
    let server = NatsServer::start();
    let bound = 2 << 20;
    let settings = |node: &str| {
        RemoteSettings::new(server.url(), "f", node)
            .failure_detector(Duration::from_millis(100), Duration::from_secs(60))
            .cluster_key(KEY)
    };
    let (sys_a, sys_b) = (system("a"), system("b"));
    let a = Remote::connect(&sys_a, settings("a").subscription_capacity_bytes(bound))
        .expect("connect a");
    let b = Remote::connect(&sys_b, settings("b")).expect("connect b");
    let counter = sys_a.spawn(Counter::props("a"), "counter").expect("spawn");
    a.expose(&counter, "counter").expect("expose");
    let far = b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let mut raw = RawNats::connect(server.port, "");
    let junk = vec![0x5a; 1_000_000];
    // The peak from here on (writing 5 to clear_refs resets VmHWM).
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak");
    let before = status_bytes("VmRSS");
    let n = 2_000;
    for _ in 0..n {
        raw.publish("f.actor.counter", &junk);
    }
    raw.flush();
    // The server handled the flood before this ask: once it is answered,
    // node a has read (and verified or dropped) every message of it.
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let grown = status_bytes("VmHWM").saturating_sub(before);
    let (rejected, dropped) = (a.rejected_messages(), a.dropped_by_slow_consumer());
    eprintln!(
        "flood of {n} messages of 1 MB, bound {} MiB: peak RSS +{} MiB, {rejected} rejected, \
         slow-consumer drops counted: {dropped}",
        bound >> 20,
        grown >> 20
    );
    assert!(rejected + dropped > 0, "the flood never reached the node");
    // The bound, the client's read buffer and the message being verified,
    // with room for the allocator: far below the flood (2 GB).
    let limit = 48 << 20;
    assert!(
        grown < limit,
        "peak RSS grew by {grown} bytes (limit {limit})"
    );
    drop((a, b));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
