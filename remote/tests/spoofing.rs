//! A NATS client without the cluster's key (issue 25, items 2 and 3):
//! the control notices, replies, where-answers and messages it publishes
//! on the cluster's subjects are dropped and counted; a replayed notice
//! too; reply subjects are unguessable and never published.

mod support;

use std::time::Duration;

use async_nats::HeaderMap;
use futures_util::StreamExt;
use proscenium::prelude::*;
use proscenium::testkit::TestProbe;
use proscenium_remote::{Remote, RemoteSettings, RemoteTerminated, TerminatedReason};
use support::{eventually, require_nats, system, Cmd, Counter, NatsServer, GUARD};

const KEY: &str = "the test cluster's key: 32 bytes or more";

fn settings(server: &NatsServer, node: &str) -> RemoteSettings {
    RemoteSettings::new(server.url(), "t", node)
        .failure_detector(Duration::from_millis(100), Duration::from_secs(60))
        .cluster_key(KEY)
}

/// Nodes `a` (exposing a Counter as "counter") and `b`, with the key.
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

/// A plain NATS client on the cluster's subjects: the attacker, with
/// publish and subscribe rights but without the key.
struct Raw {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
}

impl Raw {
    fn connect(server: &NatsServer) -> Raw {
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let client = rt
            .block_on(async_nats::connect(server.url()))
            .expect("raw client");
        Raw { rt, client }
    }

    fn publish(&self, subject: &str, payload: &[u8]) {
        self.rt.block_on(async {
            let payload = bytes::Bytes::copy_from_slice(payload);
            self.client
                .publish(subject.to_owned(), payload)
                .await
                .expect("publish");
            self.client.flush().await.expect("flush");
        });
    }

    fn publish_error(&self, subject: &str, reason: &str) {
        self.rt.block_on(async {
            let mut headers = HeaderMap::new();
            headers.insert("Proscenium-Error", reason);
            self.client
                .publish_with_headers(subject.to_owned(), headers, bytes::Bytes::new())
                .await
                .expect("publish");
            self.client.flush().await.expect("flush");
        });
    }

    /// Subscribes; live on the server when this returns (a flush's PONG
    /// is not awaited by async-nats, a request to nobody is: its
    /// no-responders answer comes after the SUB was handled).
    fn subscribe(&self, subject: &str) -> async_nats::Subscriber {
        self.rt.block_on(async {
            let sub = self
                .client
                .subscribe(subject.to_owned())
                .await
                .expect("subscribe");
            let _ = self
                .client
                .request("t.nobody.listens", bytes::Bytes::new())
                .await;
            sub
        })
    }

    fn next(&self, sub: &mut async_nats::Subscriber) -> async_nats::Message {
        self.rt.block_on(async {
            tokio::time::timeout(GUARD, sub.next())
                .await
                .expect("a message within the guard")
                .expect("a message")
        })
    }
}

/// Issue 25, item 2: any client could publish `C.node.<n>.leave`,
/// `C.node.<n>.hb` with another payload, or a terminated notice, and
/// every watcher got Terminated (NodeLeft, NodeUnreachable, Stopped) for a
/// live node whose actor still answered. Now they do not verify against
/// the cluster key: dropped and counted, and the watch still works.
#[test]
fn spoofed_leave_heartbeat_and_terminated_notices_are_dropped_and_counted() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let probe = TestProbe::<RemoteTerminated>::new(&p.sys_b);
    p.b.watch("counter", &probe.actor_ref(), |t| t)
        .expect("watch");
    // Answered after the watch's where-request: the watch knows node a.
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let raw = Raw::connect(&server);
    raw.publish("t.node.a.hb", b"an incarnation of the attacker's choosing");
    raw.publish("t.node.a.leave", b"");
    raw.publish("t.node.a.terminated.counter", b"a");
    // The subject terminated notices had before: nobody listens there.
    raw.publish("t.terminated.counter", b"a");
    // A message to the actor (postcard: Cmd::Add(100)), and one on the
    // reliable path (envelope: producer 1, seq 1, first 1).
    raw.publish("t.actor.counter", &[0, 100]);
    raw.publish("t.actor.counter.r", &[1, 1, 1, 0, 100]);
    eventually("b drops three notices", || p.b.rejected_messages() >= 3);
    eventually("a drops them and the messages", || {
        p.a.rejected_messages() >= 5
    });
    assert_eq!(p.b.rejected_messages(), 3);
    assert_eq!(p.a.rejected_messages(), 5);
    probe.expect_no_msg(Duration::from_millis(100));
    // The actor answers, and never got the forged Add.
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    // The real notice (signed) still gives the watch its Terminated.
    counter.tell(Cmd::Stop).expect("tell");
    let t = probe.expect_msg(GUARD);
    assert_eq!(
        (t.name.as_str(), t.reason),
        ("counter", TerminatedReason::Stopped)
    );
    p.finish();
}

/// A client that can read the cluster's subjects but has no key replays a
/// genuine (signed) heartbeat: not newer than the last one heard, dropped
/// and counted; the watch stays.
#[test]
fn a_replayed_heartbeat_is_dropped_and_counted() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let probe = TestProbe::<RemoteTerminated>::new(&p.sys_b);
    p.b.watch("counter", &probe.actor_ref(), |t| t)
        .expect("watch");
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    let raw = Raw::connect(&server);
    let mut beats = raw.subscribe("t.node.a.hb");
    let beat = raw.next(&mut beats);
    // Published after the server handed the original to b: b has it first.
    raw.publish(beat.subject.as_str(), &beat.payload);
    eventually("b drops the replay", || p.b.rejected_messages() >= 1);
    assert_eq!(p.b.rejected_messages(), 1);
    // a does not watch itself: its own heartbeats are not tracked there.
    assert_eq!(p.a.rejected_messages(), 0);
    probe.expect_no_msg(Duration::from_millis(100));
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
    p.finish();
}

/// Issue 25, item 3: heartbeats published each node's reply inbox and
/// reply ids were sequential, so a client publishing to `<inbox>.0..63`
/// answered another node's pending ask with a value of its choosing. Now
/// a forged answer (a value, a "dropped", a where-answer) does not verify
/// and is dropped, the real one still answers, the heartbeats carry no
/// reply subject and the ids are random.
#[test]
fn a_forged_reply_is_dropped_and_the_real_one_answers() {
    require_nats!();
    let server = NatsServer::start();
    let p = pair(&server);
    let raw = Raw::connect(&server);
    let mut requests = raw.subscribe("t.actor.counter");
    let counter = p.b.actor_ref::<Cmd>("counter").expect("ref");
    // Held by the actor until released: the forgeries come first.
    let ask = counter.ask(Cmd::Hold, GUARD);
    let reply = raw
        .next(&mut requests)
        .reply
        .expect("an ask has a reply subject")
        .to_string();
    raw.publish(&reply, &[0x9a, 0x05]); // postcard: 666
    raw.publish_error(&reply, "dropped");
    eventually("b drops both forgeries", || p.b.rejected_messages() >= 2);
    assert_eq!(p.b.rejected_messages(), 2);
    p.counter.tell(Cmd::Add(7));
    p.counter.tell(Cmd::Release);
    assert_eq!(ask.wait(), Ok(7));

    // A forged where-answer: dropped; the watch finds the real node.
    let mut wheres = raw.subscribe("t.where.counter");
    let probe = TestProbe::<RemoteTerminated>::new(&p.sys_b);
    p.b.watch("counter", &probe.actor_ref(), |t| t)
        .expect("watch");
    let where_reply = raw
        .next(&mut wheres)
        .reply
        .expect("a where-request has a reply subject")
        .to_string();
    raw.publish(&where_reply, b"\x01x");
    eventually("b drops the forged where-answer", || {
        p.b.rejected_messages() >= 3
    });
    assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(7));
    counter.tell(Cmd::Stop).expect("tell");
    let t = probe.expect_msg(GUARD);
    assert_eq!(
        (t.node.as_deref(), t.reason),
        (Some("a"), TerminatedReason::Stopped)
    );

    // Reply subjects: `t.reply.b.<128 random bits>.<random id>`. The
    // heartbeats do not carry them, and two asks' ids are not neighbours.
    let tokens: Vec<&str> = reply.split('.').collect();
    assert_eq!(&tokens[..3], ["t", "reply", "b"], "{reply}");
    assert_eq!(tokens[3].len(), 32, "{reply}");
    let mut beats = raw.subscribe("t.node.b.hb");
    let beat = raw.next(&mut beats);
    let shown = String::from_utf8_lossy(&beat.payload);
    assert!(!shown.contains(tokens[3]), "a heartbeat shows the inbox");
    let id = |r: &str| u64::from_str_radix(r.rsplit('.').next().unwrap_or(""), 16);
    let first = id(&reply).expect("a hex id");
    let mut requests = raw.subscribe("t.actor.nobody");
    let nobody = p.b.actor_ref::<Cmd>("nobody").expect("ref");
    // Seen by the raw subscriber (so no "no responders"); not waited for.
    drop(nobody.ask(Cmd::Get, GUARD));
    let second = raw.next(&mut requests).reply.expect("a reply subject");
    let second = id(&second).expect("a hex id");
    assert!(first.abs_diff(second) > 1 << 20, "{first} then {second}");
    p.finish();
}
