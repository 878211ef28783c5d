//! Issue 33, item 12: the outbound bound held about twice the memory it
//! counted. With `outbound-capacity` at 32 MiB, a NATS outage under
//! 200,000 tells of 1 KiB accepted 30,751 of them (the rest refused, as
//! documented) and RSS grew by 68 MB: each encoded message sat in a
//! buffer grown by doubling (a 1 KiB message in a 2 KiB allocation), and
//! only its length was counted. What the queue counts is now what it
//! holds, so the setting is the memory a user budgets for. (Its own test
//! binary: the RSS measured is this test's alone.)

mod support;

use proscenium_remote::{Remote, RemoteError, RemoteSettings};
use support::{require_nats, rss_bytes, system, Cmd, Counter, NatsServer, GUARD};

#[test]
fn the_outbound_capacity_is_the_memory_held_through_an_outage() {
    require_nats!();
    let mut server = NatsServer::start();
    let (sys_a, sys_b) = (system("a"), system("b"));
    let capacity = 32 << 20;
    let a = Remote::connect(
        &sys_a,
        RemoteSettings::new(server.url(), "m", "a").outbound_capacity(capacity),
    )
    .expect("connect a");
    let b =
        Remote::connect(&sys_b, RemoteSettings::new(server.url(), "m", "b")).expect("connect b");
    let counter = sys_b.spawn(Counter::props("b"), "counter").expect("spawn");
    b.expose(&counter, "counter").expect("expose");
    let far = a.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    // The message built once: the test's own copies are not the queue's.
    let blob = vec![7u8; 1024];
    let before = rss_bytes();
    server.kill();
    let (mut queued, mut refused) = (0u64, 0u64);
    for _ in 0..200_000 {
        match far.tell(Cmd::Blob(blob.clone())) {
            Ok(()) => queued += 1,
            Err(RemoteError::OutboundFull { .. }) => refused += 1,
            Err(e) => panic!("a tell during the outage: {e}"),
        }
    }
    let grown = rss_bytes().saturating_sub(before);
    eprintln!(
        "outage, capacity {} MiB: {queued} tells of 1 KiB queued, {refused} refused, \
         RSS grew by {} KiB",
        capacity >> 20,
        grown / 1024
    );
    assert!(refused > 0, "nothing was refused");
    // The capacity, the NATS client's own buffer (2,048 commands of about
    // 1 KiB, written before the outage was noticed) and the allocator's
    // own rounding: a quarter over the capacity at most. Counting only
    // lengths, it grew by twice the capacity.
    let bound = capacity + capacity / 4;
    assert!(
        grown < bound,
        "RSS grew by {grown} bytes through the outage (capacity {capacity}, bound {bound})"
    );
    drop((a, b));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
