//! proscenium-remote: actors across machines, on NATS.
//!
//! A node is an [`ActorSystem`](proscenium::ActorSystem) connected to a
//! NATS server with [`Remote::connect`]. It makes local actors reachable
//! under names ([`Remote::expose`], or [`Remote::expose_group`] for a pool
//! spread over nodes), and reaches the names exposed anywhere in the
//! cluster through a [`RemoteRef`] (`tell`, `ask`), which can stand in for
//! a local `ActorRef` ([`RemoteRef::to_actor_ref`]). Messages are
//! `Serialize + DeserializeOwned` (serde), encoded with postcard; the
//! reply half of an ask is a [`RemoteReply`], which travels inside the
//! message. Nodes watch each other's exposed actors ([`Remote::watch`]),
//! and a node leaves in order with the system's coordinated shutdown
//! ([`Remote::add_to_coordinated_shutdown`]).
//!
//! # Subjects
//!
//! Everything lives under the cluster's name `C`:
//!
//! | subject | what |
//! |---|---|
//! | `C.actor.<name>` | messages to the actor exposed as `<name>` (a queue group for [`Remote::expose_group`]) |
//! | `C.actor.<name>.r` | reliable delivery's messages to it ([`ReliableRef`]), confirmed to the sender's `C.reply.<node>.<token>.ack` |
//! | `C.where.<name>` | answered by the node exposing `<name>` (watches find the node with it) |
//! | `C.node.<node>.join` / `.hb` / `.leave` | a node's arrival, heartbeat, and departure |
//! | `C.node.<node>.terminated.<name>` | published when an exposed actor terminates (a node that leaves sends its leave instead) |
//! | `C.reply.<node>.<token>.<id>` | replies to this node's asks (`<token>`: 128 random bits, never published; `<id>`: random) |
//!
//! Every subject a node publishes on names it (`C.node.<node>.>`) or is
//! one another node chose, so NATS permissions can keep each node to its
//! own (see the trust model in docs/decisions/0023-remote-security.md).
//!
//! # Security
//!
//! [`RemoteSettings`] carries the NATS credentials ([`NatsAuth`]: user
//! and password, token, nkey, `.creds` file) and TLS ([`TlsSettings`]: a
//! CA, a client certificate for mutual TLS, TLS required); secrets never
//! show in `Debug` output or errors. With a
//! [`cluster_key`](RemoteSettings::cluster_key) every message a node
//! publishes is signed (HMAC-SHA256) and every message it receives must
//! verify: a NATS client without the key cannot forge a leave, a
//! heartbeat, a terminated notice, a reply or a message to an actor;
//! what does not verify, or replays an old notice, is dropped and counted
//! ([`Remote::rejected_messages`]). So is, key or no key, a message
//! carrying a NATS status anywhere but where the server sends one (its
//! "no responders" on a node's own reply subject), and one whose header
//! block does not parse: such a message disconnects no node (the NATS
//! client in this workspace is patched for it, `third_party/async-nats`;
//! an application that depends on this crate from crates.io adds the same
//! `[patch.crates-io]`, see the README).
//!
//! With the cargo feature `metrics`, each node adds its counters to its
//! system's `ActorSystem::publish_metrics` (the `metrics` facade, label
//! `node`): messages sent to remote actors and delivered to exposed ones
//! (`proscenium_remote_messages_sent_total`, `..._received_total`: one
//! relaxed add per message, only with the feature), drops by reason
//! (`proscenium_remote_dropped_total{reason}`), reconnects and the NATS
//! client's statistics (docs/metrics.md lists them).
//!
//! # Delivery guarantees
//!
//! These are Akka remoting's, on NATS core (no JetStream):
//!
//! * **At most once.** A message is delivered once or not at all: NATS
//!   core does not store or resend, so a message to a name nobody exposes,
//!   or sent while a connection is down, is lost. So is a message that
//!   arrives for a name whose actor has fallen behind its senders by more
//!   than [`RemoteSettings::subscription_capacity`] messages (NATS's "slow
//!   consumer": the client drops it; counted by
//!   [`Remote::dropped_by_slow_consumer`] and logged). Nothing is
//!   delivered twice.
//! * **Exactly once and in order, on request.** A [`ReliableRef`]
//!   ([`Remote::reliable_ref`]) numbers its messages, keeps each until the
//!   receiving node confirms it, resends what is unconfirmed after a
//!   timeout and keeps a window in flight; the receiver drops duplicates
//!   and anything out of order: the actor sees each message once and in
//!   order, across lost messages, a restarted NATS server and bursts (while
//!   both nodes live; see its docs). The default stays at most once.
//! * **Bounded.** While the connection is down (or slower than the
//!   senders) a node holds at most
//!   [`outbound_capacity`](RemoteSettings::outbound_capacity) bytes of
//!   user messages; past it `tell` and `ask` fail at once with
//!   [`RemoteError::OutboundFull`]. Heartbeats and the other notices have
//!   a queue of their own, and never wait behind user messages.
//! * **Per-sender order.** Messages from one node to one name arrive in
//!   the order they were sent: the node publishes everything (tells, asks,
//!   replies) from one queue in order, NATS keeps the order of one
//!   connection's messages on a subject, and the receiving node tells them
//!   to the actor in arrival order. As with local refs, no order holds
//!   between different senders.
//! * **Asks fail fast or on time.** An ask to a name that no node exposes
//!   fails at once with [`RemoteAskError::NoResponders`] (NATS's
//!   no-responders status); one that is not answered in time fails with
//!   [`RemoteAskError::Timeout`]; a reply the actor drops fails it with
//!   [`RemoteAskError::NoReply`] at once.
//! * **Bad input is a dead letter, never a panic.** A message the
//!   receiving node cannot decode as the exposed actor's type (another
//!   type, corrupt bytes, a panicking `Deserialize`) is a dead letter
//!   there (an [`UndecodableMessage`] with the reason, counted and
//!   published on the event stream like every dead letter); an asker
//!   (of this message, or of a reply inside it, even one decoded before
//!   the failing part) gets [`RemoteAskError::Remote`] with that reason.
//! * **Size is checked on the sender.** A message over the server's
//!   `max_payload` (1 MiB by default) is refused by `tell`/`ask` with
//!   [`RemoteError::PayloadTooLarge`]; nothing is sent (the server would
//!   otherwise close the connection).
//! * **Interest takes time to spread.** Within one NATS server an expose is
//!   live when `expose` returns; across a NATS cluster's routes the
//!   subscription reaches the other servers shortly after, and an ask in
//!   between sees no responders.
//!
//! # Death watch
//!
//! [`Remote::watch`] delivers a message once, when the watched actor
//! terminates, when its node leaves, or when its node sends no heartbeat
//! for `failure_detector_timeout` (a node publishes one every
//! `heartbeat_interval`): a killed process or a lost network gives its
//! watchers their Terminated `failure_detector_timeout` after the last
//! heartbeat they heard from it, so within the timeout of its death (the
//! watching node arms a timer per watched node at last-heard + timeout;
//! it does not wait for a tick of its own). A node that leaves in order
//! ([`Remote::add_to_coordinated_shutdown`]) gives them `NodeLeft`. A node
//! restarted under the same name is a new incarnation: the watches of the
//! old one fire as soon as the new one is heard from.
//!
//! One node exposes a name with [`Remote::expose`] at a time: an expose of
//! a name a live node exposes fails with [`RemoteError::ExposedElsewhere`]
//! ([`Remote::expose_group`] shares a name on purpose).
//!
//! # Runtime
//!
//! The NATS client (async-nats) runs on tokio: each [`Remote`] owns a
//! small tokio runtime of one worker thread, so the engine needs no tokio
//! and users with no tokio of their own need nothing. [`RemoteAsk`] is a
//! plain future: await it anywhere (on the engine's workers too) or pipe
//! it to an actor.
//!
//! ```no_run
//! use proscenium::prelude::*;
//! use proscenium_remote::{Remote, RemoteReply, RemoteSettings};
//! use serde::{Deserialize, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! enum Cmd { Add(u64), Get(RemoteReply<u64>) }
//! struct Counter(u64);
//! impl Actor for Counter {
//!     type Msg = Cmd;
//!     fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
//!         match msg {
//!             Cmd::Add(n) => self.0 += n,
//!             Cmd::Get(reply) => reply.send(self.0),
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let system = ActorSystem::new("shop")?;
//! let remote = Remote::connect(&system, RemoteSettings::new("nats://127.0.0.1:4222", "shop", "a"))?;
//! remote.add_to_coordinated_shutdown()?;
//! let counter = system.spawn(Props::new(|| Counter(0)), "counter")?;
//! remote.expose(&counter, "counter")?;
//!
//! // On any node of the cluster "shop":
//! let counter = remote.actor_ref::<Cmd>("counter")?;
//! counter.tell(Cmd::Add(2))?;
//! assert_eq!(counter.ask(Cmd::Get, Duration::from_secs(1)).wait()?, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

// The unit tests share the integration tests' support (a real
// nats-server), which names this crate.
#[cfg(test)]
extern crate self as proscenium_remote;
#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod test_support;

mod auth;
mod codec;
mod config;
mod control;
mod error;
#[cfg(feature = "metrics")]
mod metrics;
mod outbound;
mod reliable;
mod remote;
mod remote_ref;
mod settings;
mod shared;
mod sign;

pub use crate::auth::{NatsAuth, Secret, TlsSettings};
pub use crate::codec::RemoteReply;
pub use crate::control::{RemoteTerminated, RemoteWatch, TerminatedReason};
pub use crate::error::{ConnectError, RemoteAskError, RemoteError};
pub use crate::reliable::{Confirmed, ReliableRef, ReliableSend};
pub use crate::remote::{Remote, UndecodableMessage};
pub use crate::remote_ref::{RemoteAsk, RemoteRef};
pub use crate::settings::{ConfigError, RemoteSettings, MAX_NAME_LEN, MAX_NODE_NAME_LEN};

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
