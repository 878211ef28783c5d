//! Issue 36, check 11: the example server configuration
//! (`examples/nats-server.conf`) on a real nats-server: the nodes, each
//! with its own nkey and only the permissions a node needs, shard their
//! entities; a client of the same account with publish rights on the
//! cluster's subjects but no cluster key and no JetStream rights
//! publishes garbage and unsigned messages on the shard subjects (dropped
//! and counted by the nodes: nothing reaches an entity) and tries to
//! write and purge the bucket (refused by the server); the owners and
//! fencing tokens are unchanged afterwards.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use proscenium::prelude::*;
use proscenium_cluster::{Cluster, ClusterSettings, EntityInfo, Region};
use proscenium_remote::{Remote, RemoteReply, RemoteSettings};
use serde::{Deserialize, Serialize};
use support::{require_jetstream, system, NatsServer, GUARD};

const KEY: &str = "the test cluster's key: 32 bytes or more";

#[derive(Debug, Serialize, Deserialize)]
enum Cmd {
    Add(u64),
    /// The node it runs on, and its fencing token.
    Where(RemoteReply<(String, u64)>),
}

struct Entity {
    node: String,
    token: u64,
    /// Messages handled, all entities of the process together.
    handled: Arc<AtomicUsize>,
}

impl Actor for Entity {
    type Msg = Cmd;
    fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
        // Relaxed: a count read after the test's own waits.
        self.handled.fetch_add(1, Ordering::Relaxed);
        match msg {
            Cmd::Add(_) => {}
            Cmd::Where(r) => r.send((self.node.clone(), self.token)),
        }
        Ok(())
    }
}

struct Node {
    sys: ActorSystem,
    remote: Remote,
    cluster: Cluster,
    region: Region<Cmd>,
}

fn node(url: &str, name: &str, seed: &str, handled: &Arc<AtomicUsize>) -> Node {
    let sys = system(name);
    let remote = Remote::connect(
        &sys,
        RemoteSettings::new(url, "shop", name)
            .cluster_key(KEY)
            .nkey_seed(seed.to_owned())
            .connect_timeout(Duration::from_secs(5)),
    )
    .expect("connect with the node's nkey");
    let cluster = Cluster::join(
        &remote,
        ClusterSettings::default().lease(
            Duration::from_millis(2000),
            Duration::from_millis(250),
            Duration::from_millis(500),
        ),
    )
    .expect("join: the node's permissions cover the bucket");
    let (n, handled) = (name.to_owned(), Arc::clone(handled));
    let region = cluster
        .start_region("counter", move |e: &EntityInfo| {
            let (node, token, handled) = (n.clone(), e.fencing_token, Arc::clone(&handled));
            Props::new(move || Entity {
                node: node.clone(),
                token,
                handled: Arc::clone(&handled),
            })
        })
        .expect("region");
    Node {
        sys,
        remote,
        cluster,
        region,
    }
}

fn owners(n: &Node, ids: &[String]) -> Vec<(String, u64)> {
    ids.iter()
        .map(|id| {
            n.region
                .entity_ref(id.as_str())
                .ask(Cmd::Where, GUARD)
                .wait()
                .unwrap_or_else(|e| panic!("{id}: {e}"))
        })
        .collect()
}

#[test]
fn only_the_nodes_write_the_bucket_and_unsigned_shard_traffic_is_dropped() {
    require_jetstream!();
    let keys: Vec<nkeys::KeyPair> = (0..3).map(|_| nkeys::KeyPair::new_user()).collect();
    let env = ["SHOP_NODE_A", "SHOP_NODE_B", "SHOP_INTRUDER"]
        .iter()
        .zip(&keys)
        .map(|(var, k)| ((*var).to_owned(), k.public_key()))
        .collect();
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/nats-server.conf");
    let server = NatsServer::start_with_config(&config, env);
    let seed = |i: usize| keys[i].seed().expect("seed");
    let handled = Arc::new(AtomicUsize::new(0));
    let a = node(&server.url(), "a", &seed(0), &handled);
    let b = node(&server.url(), "b", &seed(1), &handled);
    let deadline = Instant::now() + GUARD;
    while a.cluster.members().len() < 2 {
        assert!(Instant::now() < deadline, "b not seen by a");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ids: Vec<String> = (0..60).map(|i| format!("cart-{i}")).collect();
    let before = owners(&a, &ids);
    assert_eq!(owners(&b, &ids), before, "the same owners from both nodes");
    for node in ["a", "b"] {
        assert!(
            before.iter().any(|(n, _)| n == node),
            "{node} runs some: {before:?}"
        );
    }

    // The intruder: its server errors (permission violations) collected.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (errors_tx, errors) = mpsc::channel::<String>();
    let intruder = rt
        .block_on(
            async_nats::ConnectOptions::new()
                .nkey(seed(2))
                .event_callback(move |e| {
                    let tx = errors_tx.clone();
                    async move {
                        if let async_nats::Event::ServerError(e) = e {
                            let _ = tx.send(e.to_string());
                        }
                    }
                })
                .connect(server.url()),
        )
        .expect("the intruder connects");

    // Shard traffic without the key: garbage, and bytes shaped like a
    // region's message, on both regions' subjects. Dropped and counted
    // unread; no entity handles anything.
    let handled_before = handled.load(Ordering::Relaxed);
    let rejected_before = a.remote.rejected_messages() + b.remote.rejected_messages();
    let mut sent = 0;
    rt.block_on(async {
        for subject in ["shop.actor.shard-counter-a", "shop.actor.shard-counter-b"] {
            for body in [
                Bytes::from_static(b"\x00\x07cart-17\x00\x05\x00"),
                Bytes::from_static(b"garbage"),
                Bytes::from(vec![0xff; 300]),
            ] {
                intruder.publish(subject, body).await.expect("publish");
                sent += 1;
            }
        }
        intruder.flush().await.expect("flush");
    });
    let deadline = Instant::now() + GUARD;
    while a.remote.rejected_messages() + b.remote.rejected_messages() < rejected_before + sent {
        assert!(
            Instant::now() < deadline,
            "the unsigned messages were not all dropped"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        handled.load(Ordering::Relaxed),
        handled_before,
        "no entity handled one"
    );

    // The bucket: a write of a shard record, a purge of the stream, and
    // JetStream's API at all: refused by the server.
    rt.block_on(async {
        intruder
            .publish(
                "$KV.shop-shards.s.counter.0",
                Bytes::from_static(b"\x01i\x00\x00"),
            )
            .await
            .expect("publish");
        intruder
            .publish("$KV.shop-shards.n.a", Bytes::new())
            .await
            .expect("publish");
        intruder
            .publish("$JS.API.STREAM.PURGE.KV_shop-shards", Bytes::new())
            .await
            .expect("publish");
        intruder.flush().await.expect("flush");
        let js = async_nats::jetstream::new(intruder.clone());
        assert!(
            tokio::time::timeout(Duration::from_secs(5), js.get_key_value("shop-shards"))
                .await
                .map_or(true, |r| r.is_err()),
            "the intruder opened the bucket"
        );
    });
    let mut refused = Vec::new();
    let deadline = Instant::now() + GUARD;
    while refused.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        match errors.recv_timeout(left) {
            Ok(e) => refused.push(e),
            Err(e) => panic!("refusals: {refused:?} ({e:?})"),
        }
    }
    for subject in [
        "$KV.shop-shards.s.counter.0",
        "$KV.shop-shards.n.a",
        "$JS.API.STREAM.PURGE",
    ] {
        assert!(
            refused
                .iter()
                .any(|e| e.contains("Permissions Violation") && e.contains(subject)),
            "{subject} not refused: {refused:?}"
        );
    }
    eprintln!("the server refused: {refused:#?}");

    // Nothing moved: the same owners and tokens, from both nodes.
    assert_eq!(owners(&a, &ids), before);
    assert_eq!(owners(&b, &ids), before);
    drop(intruder);
    for n in [a, b] {
        let Node {
            sys,
            remote,
            cluster,
            region,
        } = n;
        drop((region, cluster));
        assert!(sys.terminate().wait_timeout(GUARD).is_some());
        drop(remote);
    }
}
