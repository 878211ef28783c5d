//! One process, real NATS: connecting, exposing, tell and ask with their
//! failure modes, dead letters, the payload limit, adapted refs, groups,
//! remote death watch, and leaving with the coordinated shutdown.

mod support;

use std::time::Duration;

use proscenium::prelude::*;
use proscenium::testkit::{EventProbe, TestProbe};
use proscenium_remote::{
    Remote, RemoteAskError, RemoteError, RemoteReply, RemoteSettings, RemoteTerminated,
    TerminatedReason, UndecodableMessage, MAX_NAME_LEN,
};
use support::{require_nats, system, Cmd, Counter, NatsServer, GUARD};

fn settings(server: &NatsServer, node: &str) -> RemoteSettings {
    RemoteSettings::new(server.url(), "t", node)
        .failure_detector(Duration::from_millis(100), Duration::from_millis(1000))
}

/// Two nodes on one server, each with its own system; `a` exposes a
/// Counter as "counter".
struct Pair {
    a: Remote,
    b: Remote,
    sys_a: ActorSystem,
    sys_b: ActorSystem,
    counter: ActorRef<Cmd>,
}

fn pair(server: &NatsServer) -> Pair {
    let sys_a = system("a");
    let sys_b = system("b");
    let a = Remote::connect(&sys_a, settings(server, "a")).expect("connect a");
    let b = Remote::connect(&sys_b, settings(server, "b")).expect("connect b");
    let counter = sys_a.spawn(Counter::props("a"), "counter").expect("spawn");
    a.expose(&counter, "counter").expect("expose");
    Pair {
        a,
        b,
        sys_a,
        sys_b,
        counter,
    }
}

impl Pair {
    fn finish(self) {
        drop(self.a);
        drop(self.b);
        assert!(self.sys_a.terminate().wait_timeout(GUARD).is_some());
        assert!(self.sys_b.terminate().wait_timeout(GUARD).is_some());
    }
}

#[test]
fn connect_announces_the_node() {
    require_nats!();
    let server = NatsServer::start();
    let sys = system("w");
    let watcher = Remote::connect(&sys, settings(&server, "w")).expect("connect");
    // A raw NATS client sees the join of the next node.
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let mut joins = rt.block_on(async {
        let c = async_nats::connect(server.url()).await.expect("raw client");
        let s = c.subscribe("t.node.*.join").await.expect("sub");
        c.flush().await.expect("flush");
        (c, s)
    });
    let sys2 = system("n");
    let n = Remote::connect(&sys2, settings(&server, "newcomer")).expect("connect");
    let subject = rt.block_on(async {
        use futures_util::StreamExt;
        tokio::time::timeout(GUARD, joins.1.next())
            .await
            .expect("a join within the guard")
            .expect("a message")
            .subject
    });
    assert_eq!(subject.as_str(), "t.node.newcomer.join");
    assert_eq!(n.node(), "newcomer");
    drop((watcher, n, joins));
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
    assert!(sys2.terminate().wait_timeout(GUARD).is_some());
}

#[test]
fn connect_errors_are_typed() {
    require_nats!();
    let sys = system("e");
    // Nobody listens on this port.
    let port = support::free_port();
    let err = Remote::connect(
        &sys,
        RemoteSettings::new(format!("nats://127.0.0.1:{port}"), "t", "x")
            .connect_timeout(Duration::from_secs(2)),
    )
    .expect_err("no server");
    assert!(
        matches!(err, proscenium_remote::ConnectError::Nats { .. }),
        "{err:?}"
    );
    let err = Remote::connect(&sys, RemoteSettings::new("nats://127.0.0.1:1", "t", "a.b"))
        .expect_err("bad node name");
    assert_eq!(
        err.to_string(),
        "`remote.node`: expected a name of 1 to 64 bytes without '.', '*', '>', whitespace or \
         control characters"
    );
    let err =
        Remote::connect(&sys, RemoteSettings::new("nats://[::1", "t", "x")).expect_err("bad URL");
    assert!(
        matches!(&err, proscenium_remote::ConnectError::Settings(
            proscenium_remote::ConfigError::InvalidValue { key, .. }) if key == "remote.servers"),
        "{err:?}"
    );
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
}

#[test]
fn tell_and_ask_between_nodes_keep_the_senders_order() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    for i in 0..500 {
        counter.tell(Cmd::Seq(i)).expect("tell");
        counter.tell(Cmd::Add(1)).expect("tell");
    }
    // The ask goes out after the tells: it sees all of them.
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(500));
    let log = counter.ask(Cmd::Log, GUARD).wait().expect("log");
    assert_eq!(log, (0..500).collect::<Vec<u32>>());
    p.finish();
}

#[test]
fn an_ask_with_no_responder_fails_at_once() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let nobody = p.b.actor_ref::<Cmd>("nobody").expect("ref");
    // A Timeout error would mean the no-responders status was missed.
    let err = nobody.ask(Cmd::Get, GUARD).wait();
    assert_eq!(err, Err(RemoteAskError::NoResponders("nobody".into())));
    p.finish();
}

#[test]
fn a_slow_ask_times_out_and_a_dropped_reply_fails_at_once() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    let timeout = Duration::from_millis(300);
    assert_eq!(
        counter.ask(Cmd::Hold, timeout).wait(),
        Err(RemoteAskError::Timeout(timeout))
    );
    assert_eq!(
        counter.ask(Cmd::Drop, GUARD).wait(),
        Err(RemoteAskError::NoReply)
    );
    p.finish();
}

#[test]
fn an_undecodable_message_is_a_dead_letter_with_the_reason() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    // The dead letters' undecodable messages, with their recipients.
    let dead = EventProbe::new(&p.sys_a).subscribe_map(|d: &DeadLetter| {
        d.downcast_ref::<UndecodableMessage>()
            .map(|u| (d.recipient().cloned(), u.clone()))
    });
    // Another type under the same name: a discriminant Cmd does not have.
    let wrong = p.b.actor_ref::<(u32, String)>("counter").expect("ref");
    wrong.tell((200, "not a Cmd".into())).expect("tell");
    let (recipient, undecodable) =
        dead.expect_event::<(Option<ActorId>, UndecodableMessage)>(GUARD);
    assert_eq!(undecodable.name, "counter");
    assert!(!undecodable.reason.is_empty());
    assert_eq!(recipient, Some(p.counter.id()));
    let before = p.sys_a.dead_letter_count();
    assert!(before >= 1);
    // An asker hears the reason instead of waiting for its timeout.
    let err =
        p.b.actor_ref::<(u8, RemoteReply<u64>)>("counter")
            .expect("ref")
            .ask(|r| (250, r), GUARD)
            .wait();
    assert!(
        matches!(&err, Err(RemoteAskError::Remote(reason)) if reason.starts_with("undecodable")),
        "{err:?}"
    );
    let _ = dead.expect_event::<(Option<ActorId>, UndecodableMessage)>(GUARD);
    // The actor still works.
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    p.finish();
}

#[test]
fn a_payload_over_the_max_is_refused_on_the_sender() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    // nats-server's default max_payload: 1 MiB.
    let max = 1024 * 1024;
    let err = counter
        .tell(Cmd::Blob(vec![7; max]))
        .expect_err("too large");
    assert!(
        matches!(err, RemoteError::PayloadTooLarge { size, max: m } if size > max && m == max),
        "{err:?}"
    );
    let err = counter
        .ask(|_: RemoteReply<u64>| Cmd::Blob(vec![7; max]), GUARD)
        .wait();
    assert!(
        matches!(
            err,
            Err(RemoteAskError::Send(RemoteError::PayloadTooLarge { .. }))
        ),
        "{err:?}"
    );
    // Just under the limit goes through, and the connection is intact.
    counter.tell(Cmd::Blob(vec![7; max - 16])).expect("fits");
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok((max - 16) as u64));
    p.finish();
}

#[test]
fn an_adapted_remote_ref_is_an_actor_ref() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let remote = p.b.actor_ref::<Cmd>("counter").expect("ref");
    let local: ActorRef<Cmd> = remote.to_actor_ref(&p.sys_b).expect("adapt");
    local.tell(Cmd::Add(3));
    local.tell(Cmd::Add(4));
    // Issue 35, item 3: one message type for a local ask and a remote
    // one, no wrapping at the call site: the same `Cmd::Get` through the
    // adapted remote ref, the local actor itself, and the remote ref.
    let n = local.ask(Cmd::Get, GUARD).wait();
    assert_eq!(n, Ok(7));
    let n = p.counter.ask(Cmd::Get, GUARD).wait();
    assert_eq!(n, Ok(7));
    let n = remote.ask(Cmd::Get, GUARD).wait();
    assert_eq!(n, Ok(7));
    p.finish();
}

#[test]
fn a_group_spreads_over_nodes() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let w_a = p.sys_a.spawn(Counter::props("a"), "worker").expect("spawn");
    let w_b = p.sys_b.spawn(Counter::props("b"), "worker").expect("spawn");
    p.a.expose_group(&w_a, "workers").expect("group a");
    p.b.expose_group(&w_b, "workers").expect("group b");
    let workers = p.a.actor_ref::<Cmd>("workers").expect("ref");
    let mut by_a = 0;
    let n = 64;
    for _ in 0..n {
        match workers.ask(Cmd::Who, GUARD).wait().expect("who").as_str() {
            "a" => by_a += 1,
            "b" => {}
            other => panic!("{other}"),
        }
    }
    // Each request goes to one member; NATS picks at random, so both
    // serve some of 64 (all on one side: probability 2^-63).
    assert!(by_a > 0 && by_a < n, "a served {by_a} of {n}");
    // Exposing a name twice on one node is an error.
    assert_eq!(
        p.a.expose_group(&w_a, "workers"),
        Err(RemoteError::AlreadyExposed("workers".into()))
    );
    assert_eq!(
        p.a.expose(&w_a, "bad.name"),
        Err(RemoteError::BadName("bad.name".into()))
    );
    p.finish();
}

/// Issue 25, item 5: a 5,000-byte name (a subject token by the old
/// check) was subscribed anyway: the server closed the connection over its
/// control-line limit, every reconnect sent the subscription again, every
/// name of the node was unreachable for `connect_timeout`, then `expose`
/// returned a misleading NATS error; `actor_ref` took it, and a tell to it
/// returned Ok and was lost. Now every entry point refuses it at once,
/// typed, before anything reaches the server.
#[test]
fn a_name_over_the_limit_is_refused_before_anything_reaches_the_server() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let long = "n".repeat(5_000);
    let too_long = Err(RemoteError::NameTooLong {
        len: 5_000,
        max: MAX_NAME_LEN,
    });
    let other = p.sys_a.spawn(Counter::props("a"), "other").expect("spawn");
    assert_eq!(p.a.expose(&other, &long), too_long);
    assert_eq!(p.a.expose_group(&other, &long), too_long);
    assert_eq!(p.b.actor_ref::<Cmd>(&long).map(|_| ()), too_long);
    let probe = TestProbe::<RemoteTerminated>::new(&p.sys_b);
    assert_eq!(
        p.b.watch(&long, &probe.actor_ref(), |t| t).map(|_| ()),
        too_long
    );
    // One byte over the limit too; a control character is no name either.
    let over = "n".repeat(MAX_NAME_LEN + 1);
    assert_eq!(
        p.a.expose(&other, &over),
        Err(RemoteError::NameTooLong {
            len: MAX_NAME_LEN + 1,
            max: MAX_NAME_LEN
        })
    );
    assert_eq!(
        p.a.expose(&other, "a\u{7}b"),
        Err(RemoteError::BadName("a\u{7}b".into()))
    );
    // The connection was never broken: the node's names answer at once,
    // and a name at the limit works, as an exposed name and as a group.
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let at_limit = "n".repeat(MAX_NAME_LEN);
    p.a.expose(&other, &at_limit).expect("a name at the limit");
    other.tell(Cmd::Add(5));
    let far = p.b.actor_ref::<Cmd>(&at_limit).expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(5));
    let group = "g".repeat(MAX_NAME_LEN);
    p.a.expose_group(&other, &group)
        .expect("a group at the limit");
    let far = p.b.actor_ref::<Cmd>(&group).expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(5));
    p.finish();
}

#[test]
fn a_remote_watch_fires_once_when_the_actor_stops() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let probe = TestProbe::<RemoteTerminated>::new(&p.sys_b);
    p.b.watch("counter", &probe.actor_ref(), |t| t)
        .expect("watch");
    // A second watch, cancelled: it must not fire.
    let cancelled =
        p.b.watch("counter", &probe.actor_ref(), |t| t)
            .expect("watch");
    assert!(cancelled.unwatch());
    // Make sure the watch has found the node before stopping the actor
    // (an ask after the watch's where-request is answered after it).
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    counter.tell(Cmd::Stop).expect("tell");
    let t = probe.expect_msg(GUARD);
    assert_eq!(t.name, "counter");
    assert_eq!(t.reason, TerminatedReason::Stopped);
    // Once per watch: nothing more, also after the node's heartbeats go on.
    probe.expect_no_msg(Duration::from_millis(500));
    // The name is withdrawn with the actor.
    assert_eq!(
        counter.ask(Cmd::Get, GUARD).wait(),
        Err(RemoteAskError::NoResponders("counter".into()))
    );
    // Watching a name nobody exposes: Terminated at once. Akka: "you
    // still get the message even if at the time of registration the
    // target is already dead."
    p.b.watch("ghost", &probe.actor_ref(), |t| t)
        .expect("watch");
    let t = probe.expect_msg(GUARD);
    assert_eq!(
        (t.name.as_str(), t.reason),
        ("ghost", TerminatedReason::NotFound)
    );
    p.finish();
}

#[test]
fn leaving_with_the_coordinated_shutdown_drains_and_tells_the_watchers() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    p.a.add_to_coordinated_shutdown().expect("tasks");
    let probe = TestProbe::<RemoteTerminated>::new(&p.sys_b);
    p.b.watch("counter", &probe.actor_ref(), |t| t)
        .expect("watch");
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    // An ask in flight while the node leaves: answered 500 ms after the
    // actor got it. The Get behind it (same sender, so handled after it)
    // proves the actor has it before the leave starts.
    let in_flight = counter.ask(|r| Cmd::Later(500, r), GUARD);
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    // The node leaves: cluster-leave drains, cluster-exiting announces,
    // cluster-shutdown waits for the reply, then closes.
    let terminated = p.sys_a.terminate();
    let t = probe.expect_msg(GUARD);
    assert_eq!(t.name, "counter");
    assert!(
        matches!(
            t.reason,
            TerminatedReason::Stopped | TerminatedReason::NodeLeft
        ),
        "{t:?}"
    );
    assert_eq!(in_flight.wait(), Ok(0));
    assert!(terminated.wait_timeout(GUARD).is_some());
    // At most once per watch.
    probe.expect_no_msg(Duration::from_millis(300));
    // A node that has left sends nothing more.
    let after = p.a.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(after.tell(Cmd::Add(1)), Err(RemoteError::Closed));
    assert_eq!(
        after.ask(Cmd::Get, GUARD).wait(),
        Err(RemoteAskError::Send(RemoteError::Closed))
    );
    let state = p.sys_a.coordinated_shutdown().state();
    for task in ["remote-drain", "remote-leave", "remote-close"] {
        let report = state
            .tasks
            .iter()
            .find(|t| t.name == task)
            .unwrap_or_else(|| panic!("{task} in {state:?}"));
        assert!(
            format!("{:?}", report.state).contains("Done"),
            "{task}: {report:?}"
        );
    }
    drop(p.a);
    drop(p.b);
    assert!(p.sys_b.terminate().wait_timeout(GUARD).is_some());
}

#[test]
fn connect_works_from_inside_a_tokio_runtime() {
    require_nats!();
    let server = NatsServer::start();
    let sys = system("r");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    // Blocking on a runtime from inside another panics; connect must not.
    let remote = rt
        .block_on(async { Remote::connect(&sys, settings(&server, "inside")) })
        .expect("connect");
    let counter = sys.spawn(Counter::props("r"), "counter").expect("spawn");
    remote.expose(&counter, "counter").expect("expose");
    // A RemoteAsk is a plain future: awaited on this other runtime.
    let n = rt.block_on(
        remote
            .actor_ref::<Cmd>("counter")
            .expect("ref")
            .ask(Cmd::Get, GUARD),
    );
    assert_eq!(n, Ok(0));
    drop(remote);
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
}

/// Passes every message on to a remote ref (a reply inside included).
struct Relay(proscenium_remote::RemoteRef<Cmd>);

impl Actor for Relay {
    type Msg = Cmd;
    fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
        self.0
            .tell(msg)
            .map_err(|e| ActorError::from(e.to_string()))?;
        Ok(())
    }
}

#[test]
fn a_reply_forwarded_to_another_node_is_answered_there() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    // b asks a's relay; the relay forwards the request, reply and all, to
    // a counter on b, which answers the asker directly.
    let on_b = p
        .sys_b
        .spawn(Counter::props("b"), "counter-b")
        .expect("spawn");
    on_b.tell(Cmd::Add(41));
    p.b.expose(&on_b, "counter-b").expect("expose");
    let to_b = p.a.actor_ref::<Cmd>("counter-b").expect("ref");
    let relay = p
        .sys_a
        .spawn(Props::new(move || Relay(to_b.clone())), "relay")
        .expect("spawn");
    p.a.expose(&relay, "relay").expect("expose");
    let relay = p.b.actor_ref::<Cmd>("relay").expect("ref");
    // The relay's copy of the reply is dropped after forwarding: it must
    // not tell the asker "dropped" (NoReply).
    assert_eq!(relay.ask(Cmd::Get, GUARD).wait(), Ok(41));
    p.finish();
}

#[test]
fn an_adapted_ref_dead_letters_what_it_cannot_send() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let local =
        p.b.actor_ref::<Cmd>("counter")
            .expect("ref")
            .to_actor_ref(&p.sys_b)
            .expect("adapt");
    let dead = EventProbe::new(&p.sys_b).subscribe_map(|d: &DeadLetter| {
        d.downcast_ref::<Cmd>()
            .map(|c| (d.recipient().cloned(), matches!(c, Cmd::Blob(_))))
    });
    local.tell(Cmd::Blob(vec![7; 1024 * 1024]));
    let (recipient, blob) = dead.expect_event::<(Option<ActorId>, bool)>(GUARD);
    assert!(blob);
    assert_eq!(recipient, Some(local.id()));
    p.finish();
}

/// Asks a remote counter from inside an actor, without blocking: the
/// RemoteAsk future is piped to the actor.
struct Asker {
    counter: proscenium_remote::RemoteRef<Cmd>,
    out: std::sync::mpsc::Sender<Result<u64, RemoteAskError>>,
}

enum AskerMsg {
    Go,
    Answer(Result<u64, RemoteAskError>),
}

impl Actor for Asker {
    type Msg = AskerMsg;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: AskerMsg) -> Outcome {
        match msg {
            AskerMsg::Go => {
                let ask = self.counter.ask(Cmd::Get, GUARD);
                let _handle = ctx.pipe_to_self(ask, AskerMsg::Answer);
            }
            AskerMsg::Answer(n) => {
                let _ = self.out.send(n);
            }
        }
        Ok(())
    }
}

#[test]
fn an_actor_asks_a_remote_actor_through_a_piped_future() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    p.counter.tell(Cmd::Add(9));
    let (tx, rx) = std::sync::mpsc::channel();
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    let asker = p
        .sys_b
        .spawn(
            Props::new(move || Asker {
                counter: counter.clone(),
                out: tx.clone(),
            }),
            "asker",
        )
        .expect("spawn");
    asker.tell(AskerMsg::Go);
    assert_eq!(rx.recv_timeout(GUARD).expect("an answer"), Ok(9));
    p.finish();
}

/// Answers with the number in its message: the reply comes first, so a
/// message that ends after the reply decodes the reply, then fails.
struct Strict;

impl Actor for Strict {
    type Msg = (RemoteReply<u64>, u64);
    fn receive(&mut self, _: &mut Context<Self>, (reply, n): (RemoteReply<u64>, u64)) -> Outcome {
        reply.send(n);
        Ok(())
    }
}

/// Passes the reply of each `Cmd::Get` on, in a message of its own type.
struct ReplyRelay<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> {
    to: proscenium_remote::RemoteRef<T>,
    wrap: fn(RemoteReply<u64>) -> T,
    sent: std::sync::mpsc::Sender<Result<(), RemoteError>>,
}

impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Actor for ReplyRelay<T> {
    type Msg = Cmd;
    fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
        if let Cmd::Get(reply) = msg {
            let _ = self.sent.send(self.to.tell((self.wrap)(reply)));
        }
        Ok(())
    }
}

#[test]
fn a_reply_decoded_before_a_later_field_fails_gets_the_decode_error() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let strict = p
        .sys_a
        .spawn(Props::new(|| Strict), "strict")
        .expect("spawn");
    p.a.expose(&strict, "strict").expect("expose");
    let dead = EventProbe::new(&p.sys_a).subscribe_map(|d: &DeadLetter| {
        d.downcast_ref::<UndecodableMessage>()
            .map(|u| u.name.clone())
    });
    // The request ends after the reply: the receiver decodes the reply,
    // then fails on the number. The asker must hear that reason, not
    // the partly decoded reply's "dropped" (NoReply).
    let short = p.b.actor_ref::<(RemoteReply<u64>,)>("strict").expect("ref");
    let err = short.ask(|r| (r,), GUARD).wait();
    assert!(
        matches!(&err, Err(RemoteAskError::Remote(reason)) if reason.starts_with("undecodable")),
        "{err:?}"
    );
    assert_eq!(dead.expect_event::<String>(GUARD), "strict");
    // The same when the reply was forwarded by another node in a tell
    // (whose NATS message has no reply subject): b asks a's relay, which
    // passes the reply on to "strict" in a message cut short.
    let (tx, sent) = std::sync::mpsc::channel();
    let to = p.a.actor_ref::<(RemoteReply<u64>,)>("strict").expect("ref");
    let relay = p
        .sys_a
        .spawn(
            Props::new(move || ReplyRelay {
                to: to.clone(),
                wrap: |r| (r,),
                sent: tx.clone(),
            }),
            "relay",
        )
        .expect("spawn");
    p.a.expose(&relay, "relay").expect("expose");
    let err =
        p.b.actor_ref::<Cmd>("relay")
            .expect("ref")
            .ask(Cmd::Get, GUARD)
            .wait();
    assert_eq!(sent.recv_timeout(GUARD).expect("relayed"), Ok(()));
    assert!(
        matches!(&err, Err(RemoteAskError::Remote(reason)) if reason.starts_with("undecodable")),
        "{err:?}"
    );
    assert_eq!(dead.expect_event::<String>(GUARD), "strict");
    // A whole request is answered.
    let whole =
        p.b.actor_ref::<(RemoteReply<u64>, u64)>("strict")
            .expect("ref");
    assert_eq!(whole.ask(|r| (r, 7), GUARD).wait(), Ok(7));
    p.finish();
}

#[test]
fn a_forwarded_reply_whose_message_cannot_be_sent_fails_the_asker_at_once() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    // a's relay forwards the reply of b's ask in a message over the max
    // payload: the tell fails, nothing is sent, and the reply it carried
    // is dropped with the message. The asker must hear NoReply at once,
    // not wait for its timeout.
    let (tx, sent) = std::sync::mpsc::channel();
    let to =
        p.a.actor_ref::<(RemoteReply<u64>, Vec<u8>)>("counter")
            .expect("ref");
    let relay = p
        .sys_a
        .spawn(
            Props::new(move || ReplyRelay {
                to: to.clone(),
                wrap: |r| (r, vec![7; 2 * 1024 * 1024]),
                sent: tx.clone(),
            }),
            "relay",
        )
        .expect("spawn");
    p.a.expose(&relay, "relay").expect("expose");
    let ask =
        p.b.actor_ref::<Cmd>("relay")
            .expect("ref")
            .ask(Cmd::Get, GUARD);
    let sent = sent.recv_timeout(GUARD).expect("relayed");
    assert!(
        matches!(sent, Err(RemoteError::PayloadTooLarge { .. })),
        "{sent:?}"
    );
    assert_eq!(ask.wait(), Err(RemoteAskError::NoReply));
    p.finish();
}

/// The tests' convention for the programs they drive: with
/// `PROSCENIUM_REQUIRE_PROGRAMS=1` (CI) a missing nats-server fails the
/// test and names it; without, the test is skipped and says so where it
/// shows (not in the captured output of a passing test). Runs one test of
/// this binary in a child process with `NATS_SERVER` pointing nowhere.
#[test]
fn a_missing_nats_server_fails_when_programs_are_required_and_skips_otherwise() {
    let run = |required: bool| {
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("test binary"));
        cmd.args(["--exact", "connect_errors_are_typed", "--test-threads=1"])
            .env("NATS_SERVER", "/nonexistent/nats-server");
        if required {
            cmd.env("PROSCENIUM_REQUIRE_PROGRAMS", "1");
        } else {
            cmd.env_remove("PROSCENIUM_REQUIRE_PROGRAMS");
        }
        let out = cmd.output().expect("run the test binary");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (passed, text) = run(true);
    assert!(!passed, "required and missing must fail:\n{text}");
    assert!(
        text.contains("nats-server is not installed") && text.contains("1 failed"),
        "{text}"
    );
    let (passed, text) = run(false);
    assert!(passed, "not required: skipped, not failed:\n{text}");
    assert!(
        text.contains("SKIPPED: nats-server is not installed"),
        "the skip says so:\n{text}"
    );
}

/// A reply its actor holds forever cannot be waited for forever: the
/// close in cluster-shutdown waits for open replies only while its phase
/// leaves time to flush and close the connection, then closes in order
/// (the asker gets its own timeout) instead of timing the phase out.
#[test]
fn a_reply_held_forever_does_not_time_the_close_out() {
    require_nats!();
    let server = NatsServer::start();
    let sys_a = ActorSystem::builder()
        .name("a")
        .workers(2)
        .pin_workers(false)
        .from_toml_str(
            "[coordinated-shutdown]\nrun-by-signals = \"off\"\n\
             [coordinated-shutdown.phases.cluster-shutdown]\ntimeout = \"2 s\"",
        )
        .expect("valid toml")
        .build()
        .expect("system");
    let sys_b = system("b");
    let a = Remote::connect(&sys_a, settings(&server, "a")).expect("connect a");
    let b = Remote::connect(&sys_b, settings(&server, "b")).expect("connect b");
    a.add_to_coordinated_shutdown().expect("tasks");
    let counter = sys_a.spawn(Counter::props("a"), "counter").expect("spawn");
    a.expose(&counter, "counter").expect("expose");
    let counter = b.actor_ref::<Cmd>("counter").expect("ref");
    let held = counter.ask(Cmd::Hold, GUARD);
    // Handled after the Hold (same sender): the reply is held now.
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    assert!(sys_a.terminate().wait_timeout(GUARD).is_some());
    let state = sys_a.coordinated_shutdown().state();
    let close = state
        .tasks
        .iter()
        .find(|t| t.name == "remote-close")
        .expect("remote-close");
    assert_eq!(close.state, proscenium::TaskState::Done, "{close:?}");
    drop(held);
    drop((a, b));
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
