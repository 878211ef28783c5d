//! The trust model's example server configuration
//! (`examples/nats-server.conf`, docs/decisions/0023-remote-security.md)
//! on a real nats-server: mutual TLS, a user (an nkey) per node with
//! per-node permissions, an intruder of the same account and a client of
//! another account. The nodes work (tell, ask, watch, groups); what the
//! configuration denies is refused by the server, also to a node's own
//! credentials used to impersonate another node.

mod support;

use std::sync::mpsc;
use std::time::Duration;

use proscenium::testkit::TestProbe;
use proscenium_remote::{Remote, RemoteTerminated, TerminatedReason};
use support::shop::shop;
use support::{require_nats, system, Cmd, Counter, GUARD};

/// The next server error of a raw client: a permissions violation for
/// `what` (`Publish` or `Subscription`) to `subject`.
fn refused(errors: &mpsc::Receiver<String>, what: &str, subject: &str) {
    let e = errors
        .recv_timeout(GUARD)
        .expect("a server error within the guard");
    assert!(
        e.to_lowercase()
            .contains(&format!("permissions violation for {what} to"))
            && e.contains(subject),
        "{e}"
    );
}

#[test]
fn the_example_server_config_lets_the_nodes_work_and_refuses_the_rest() {
    require_nats!();
    let shop = shop();
    let (sys_a, sys_b) = (system("a"), system("b"));
    let a = Remote::connect(&sys_a, shop.settings("a")).expect("connect a");
    let b = Remote::connect(&sys_b, shop.settings("b")).expect("connect b");
    let counter = sys_a.spawn(Counter::props("a"), "counter").expect("spawn");
    a.expose(&counter, "counter").expect("expose");
    let probe = TestProbe::<RemoteTerminated>::new(&sys_b);
    b.watch("counter", &probe.actor_ref(), |t| t)
        .expect("watch");
    let far = b.actor_ref::<Cmd>("counter").expect("ref");
    far.tell(Cmd::Add(2)).expect("tell");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(2));
    // A group over both nodes.
    let wa = sys_a.spawn(Counter::props("a"), "w").expect("spawn");
    let wb = sys_b.spawn(Counter::props("b"), "w").expect("spawn");
    a.expose_group(&wa, "workers").expect("group");
    b.expose_group(&wb, "workers").expect("group");
    let workers = a.actor_ref::<Cmd>("workers").expect("ref");
    for _ in 0..8 {
        let who = workers.ask(Cmd::Who, GUARD).wait().expect("who");
        assert!(who == "a" || who == "b", "{who}");
    }

    // A client of the account without rights on the cluster's subjects.
    let (rt, intruder, errors) = shop.raw("intruder");
    rt.block_on(async {
        let _ = intruder.publish("shop.node.a.leave", "".into()).await;
        let _ = intruder.flush().await;
    });
    refused(&errors, "publish", "shop.node.a.leave");
    let sub = rt.block_on(intruder.subscribe("shop.>"));
    refused(&errors, "subscription", "shop.>");
    drop((sub, intruder, rt));

    // Node b's own credentials, used to claim that a left or to read a's
    // replies.
    let (rt, stolen, errors) = shop.raw("b");
    rt.block_on(async {
        let _ = stolen.publish("shop.node.a.leave", "".into()).await;
        let _ = stolen.flush().await;
    });
    refused(&errors, "publish", "shop.node.a.leave");
    let sub = rt.block_on(stolen.subscribe("shop.reply.a.>"));
    refused(&errors, "subscription", "shop.reply.a.>");
    drop((sub, stolen, rt));

    // Another account's client: the same subject is another subject.
    let (rt, other, _errors) = shop.raw("other");
    rt.block_on(async {
        other
            .publish("shop.node.a.leave", "".into())
            .await
            .expect("publish");
        other.flush().await.expect("flush");
    });
    drop((other, rt));

    // Nothing of it reached the nodes (not even to be rejected there).
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(2));
    probe.expect_no_msg(Duration::from_millis(100));
    assert_eq!((a.rejected_messages(), b.rejected_messages()), (0, 0));
    far.tell(Cmd::Stop).expect("tell");
    let t = probe.expect_msg(GUARD);
    assert_eq!(
        (t.name.as_str(), t.reason),
        ("counter", TerminatedReason::Stopped)
    );
    drop((a, b));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}

/// Issue 33, item 2, with the example configuration: a header block that
/// does not parse disconnected every node that read it, and the
/// permissions cannot keep a node's own credentials off its own notices,
/// which every node reads (`shop.node.>`). With node b's stolen
/// credentials (TLS, its nkey), a client that writes any header block
/// publishes malformed ones on b's notices and to an actor: every node
/// drops and counts them and stays connected. The intruder of the account
/// cannot publish them at all.
#[test]
fn a_malformed_header_block_with_a_nodes_credentials_disconnects_no_node() {
    require_nats!();
    use support::raw::RawNats;
    let shop = shop();
    let (sys_a, sys_b) = (system("a"), system("b"));
    let a = Remote::connect(&sys_a, shop.settings("a")).expect("connect a");
    let b = Remote::connect(&sys_b, shop.settings("b")).expect("connect b");
    let counter = sys_a.spawn(Counter::props("a"), "counter").expect("spawn");
    a.expose(&counter, "counter").expect("expose");
    let far = b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let raw = |user: &str| {
        RawNats::connect_tls_nkey(
            shop.server.port,
            &shop.pki.ca,
            &shop.pki.client_cert,
            &shop.pki.client_key,
            &shop.seeds[user],
        )
    };
    let mut stolen = raw("b");
    let n = 50;
    for _ in 0..n {
        stolen.hpub("shop.node.b.hb", None, "NATS/1.0 abc\r\n\r\n", b"x");
        stolen.hpub(
            "shop.actor.counter",
            None,
            "NATS/1.0\r\nno colon\r\n\r\n",
            &[0, 9],
        );
    }
    stolen.flush();
    assert!(stolen.errors.is_empty(), "{:?}", stolen.errors);
    support::eventually("a drops them", || a.rejected_messages() >= 2 * n);
    support::eventually("b drops them", || b.rejected_messages() >= n);
    assert_eq!((a.rejected_messages(), b.rejected_messages()), (2 * n, n));
    assert_eq!((a.reconnects(), b.reconnects()), (0, 0));
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    // The intruder: refused by the server, nothing reaches the nodes.
    let mut intruder = raw("intruder");
    intruder.hpub("shop.node.a.hb", None, "NATS/1.0 abc\r\n\r\n", b"x");
    intruder.flush();
    assert!(
        intruder.errors.iter().any(|e| e
            .to_lowercase()
            .contains("permissions violation for publish")),
        "{:?}",
        intruder.errors
    );
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    assert_eq!((a.rejected_messages(), b.rejected_messages()), (2 * n, n));
    drop((a, b));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
