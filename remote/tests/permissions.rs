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
