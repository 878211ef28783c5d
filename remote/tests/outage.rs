//! Issue 25, item 4: while NATS is unreachable, a node used to take every
//! tell (`Ok`) and queue it without limit: 200,000 tells of 1 KiB grew its
//! RSS by 441 MB, none refused. Now past `outbound-capacity` a tell fails
//! with `OutboundFull` and an ask fails at once; the process's memory stays
//! bounded through a 10 s outage under a sending loop, and the node works
//! again once the server is back. (Its own test binary: the RSS measured
//! is this test's alone.)

mod support;

use std::time::{Duration, Instant};

use proscenium_remote::{Remote, RemoteAskError, RemoteError, RemoteSettings};
use support::{eventually, require_nats, rss_bytes, system, Cmd, Counter, NatsServer, GUARD};

#[test]
fn through_an_outage_tells_are_refused_past_the_capacity_and_memory_stays_bounded() {
    require_nats!();
    let mut server = NatsServer::start();
    let (sys_a, sys_b) = (system("a"), system("b"));
    let capacity = 4 << 20;
    let a = Remote::connect(
        &sys_a,
        RemoteSettings::new(server.url(), "o", "a").outbound_capacity(capacity),
    )
    .expect("connect a");
    let b =
        Remote::connect(&sys_b, RemoteSettings::new(server.url(), "o", "b")).expect("connect b");
    let counter = sys_b.spawn(Counter::props("b"), "counter").expect("spawn");
    b.expose(&counter, "counter").expect("expose");
    let far = a.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let before = rss_bytes();

    server.kill();
    let outage = Duration::from_secs(10);
    let started = Instant::now();
    let (mut queued, mut refused) = (0u64, 0u64);
    while started.elapsed() < outage {
        match far.tell(Cmd::Blob(vec![7; 1024])) {
            Ok(()) => queued += 1,
            Err(RemoteError::OutboundFull { capacity: c }) => {
                assert_eq!(c, capacity);
                refused += 1;
                // Paces the sending loop (it is no wait for anything).
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("a tell during the outage: {e}"),
        }
    }
    // An ask fails at once, not at its timeout.
    let asked = Instant::now();
    let err = far.ask(Cmd::Get, GUARD).wait();
    assert!(
        matches!(
            err,
            Err(RemoteAskError::Send(RemoteError::OutboundFull { .. }))
        ),
        "{err:?}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    let grown = rss_bytes().saturating_sub(before);
    eprintln!(
        "outage of {outage:?}: {queued} tells queued, {refused} refused, RSS grew by {} KiB",
        grown / 1024
    );
    assert!(refused > 0, "nothing was refused in {outage:?}");
    // The queue's capacity, the NATS client's own buffer (2,048 commands of
    // about 1 KiB), and room for the allocator: far below what queueing
    // without limit took (hundreds of MB).
    let bound = 32 << 20;
    assert!(
        grown < bound,
        "RSS grew by {grown} bytes through the outage (capacity {capacity}, bound {bound})"
    );

    // The server is back: the queue drains, and the node works again.
    server.start_again();
    eventually("an answered ask after the outage", || {
        far.ask(Cmd::Get, Duration::from_secs(1)).wait().is_ok()
    });
    far.tell(Cmd::Add(1)).expect("a tell after the outage");
    let n = far.ask(Cmd::Get, GUARD).wait().expect("count");
    // At most once: what was queued arrives, or was lost with the socket.
    assert!(n >= 1 && n <= queued * 1024 + 1, "{n} after {queued} tells");
    drop((a, b));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
