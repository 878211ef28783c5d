//! [`Remote`]: one node's connection to the cluster, what it exposes, its
//! watches, and its part in the coordinated shutdown.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use async_nats::{Message, StatusCode, Subscriber};
use bytes::Bytes;
use futures_util::StreamExt;
use proscenium::{Actor, ActorRef, ActorSystem, Context, Outcome, Phase, Props, TaskError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{oneshot, Notify};

use crate::auth::{redact_url, scrub, url_auth, without_userinfo, NatsAuth};
use crate::codec::decode;
use crate::control::{self, Incarnation, RemoteTerminated, RemoteWatch, Watches};
use crate::error::{ConnectError, RemoteError};
use crate::outbound::{self, LaneReceivers, Lanes};
use crate::reliable::{Consumers, Envelope, Producers, ReliableRef, Verdict};
use crate::remote_ref::RemoteRef;
use crate::settings::{check_actor_name, RemoteSettings};
use crate::shared::{
    expire_pending, flush, inbox_task, lock, note_event, PendingTable, Shared, ERROR_HEADER,
};
use crate::sign::{random_hex128, ClusterKey};

/// A message from another node that could not be decoded as the exposed
/// actor's message type; it is a dead letter on the receiving node
/// (recipient: the exposed actor), with the reason.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UndecodableMessage {
    /// The exposed name it was sent to.
    pub name: String,
    /// Why it could not be decoded.
    pub reason: String,
    /// The bytes received.
    pub payload: Bytes,
}

pub(crate) struct Exposed {
    /// Tells the serving task to drain.
    drain: Option<oneshot::Sender<()>>,
}

/// The names this node exposes, and whether the drain has begun.
#[derive(Default)]
pub(crate) struct Exposures {
    by_name: HashMap<String, Exposed>,
    /// Set by `drain` when it takes the drain signals: no expose after it
    /// (its serving task would never get a signal).
    draining: bool,
}

/// `message` without any of `secrets` (see [`scrub`]).
fn scrub_all(message: &str, secrets: &[String]) -> String {
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    scrub(message, &secrets)
}

/// Whether `err` comes from rustls (a handshake that failed: an untrusted
/// certificate, a server that does not speak TLS), somewhere in its chain
/// of sources, directly or inside an `io::Error`.
fn caused_by_tls(err: &(dyn std::error::Error + 'static)) -> bool {
    use async_nats::rustls::Error as TlsError;
    let mut next = Some(err);
    while let Some(e) = next {
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.is::<TlsError>());
        if e.is::<TlsError>() || inner {
            return true;
        }
        next = e.source();
    }
    false
}

/// A `remote.servers` settings error.
fn invalid_servers(message: &str) -> ConnectError {
    ConnectError::Settings(proscenium_shutdown::ConfigError::InvalidValue {
        key: "remote.servers".to_owned(),
        message: message.to_owned(),
    })
}

/// One node of a proscenium cluster on NATS: exposes local actors under
/// names, hands out [`RemoteRef`]s to names exposed anywhere in the
/// cluster, watches them, and leaves in order with the coordinated
/// shutdown. Cheap to clone; see the crate docs for the semantics.
///
/// It owns a small tokio runtime (one worker thread) for the NATS client;
/// dropping the last handle (with every `RemoteRef` made from it) stops
/// the runtime, which closes the connection without the goodbyes of
/// [`add_to_coordinated_shutdown`](Self::add_to_coordinated_shutdown).
#[derive(Clone)]
pub struct Remote {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) handle: tokio::runtime::Handle,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Inside a runtime blocking panics: stop in the background.
                rt.shutdown_background();
            } else {
                // Stop the tasks now, so the actor refs they hold are
                // released before this returns.
                rt.shutdown_timeout(Duration::from_secs(5));
            }
        }
    }
}

/// Fails with [`RemoteError::ExposedElsewhere`] if a live node exposes
/// `name` (with `expose`): a where-request answered, or not answered within
/// the connect timeout by a node that holds the name (a paused one, say).
/// Nobody answers (the server's "no responders"): free.
async fn check_not_exposed(shared: &Arc<Shared>, name: &str) -> Result<(), RemoteError> {
    let (id, reply) = shared.new_reply_subject();
    let (tx, rx) = oneshot::channel();
    shared.put_pending(
        id,
        crate::shared::Pending {
            deliver: Box::new(move |outcome| {
                let _ = tx.send(outcome);
            }),
            alive: None,
            deadline: std::time::Instant::now().checked_add(shared.settings.connect_timeout),
        },
    );
    shared.send_ordered(shared.out(shared.subject("where", name), Some(reply), &[]));
    let elsewhere = |node| {
        Err(RemoteError::ExposedElsewhere {
            name: name.to_owned(),
            node,
        })
    };
    match rx.await {
        Ok(Ok(msg)) if msg.status == Some(StatusCode::NO_RESPONDERS) => Ok(()),
        Ok(Ok(msg)) => match postcard::from_bytes::<control::WhereAnswer>(&msg.payload) {
            Ok(answer) => elsewhere(Some(answer.node)),
            Err(_) => elsewhere(None),
        },
        // Held by a node that did not answer in time, or this node closed.
        _ => elsewhere(None),
    }
}

/// Keeps a node's runtime (and so its connection) alive from
/// [`Remote::add_to_coordinated_shutdown`] until its close has run. Let go
/// on a thread of its own: the last handle's drop stops the runtime, which
/// waits for its tasks, and that is no work for a scheduler worker.
struct KeepAlive(Option<Arc<Inner>>);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            let spawned = std::thread::Builder::new()
                .name("proscenium-remote-close".into())
                .spawn(move || drop(inner));
            if let Err(e) = spawned {
                // No thread to be had: dropped here (the runtime stops in
                // the background when inside one, else within 5 s).
                tracing::warn!(error = %e, "remote: no thread to release the node on");
            }
        }
    }
}

/// Hands the connecting thread an engine-internal `ActorSystem` handle
/// (a `Context`'s), then idles under `/system`.
struct Anchor(mpsc::Sender<ActorSystem>);

impl Actor for Anchor {
    type Msg = ();
    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let _ = self.0.send(ctx.system().clone());
        Ok(())
    }
    fn receive(&mut self, _: &mut Context<Self>, (): ()) -> Outcome {
        Ok(())
    }
}

static ANCHORS: AtomicU64 = AtomicU64::new(0);

/// What one subscription may hold by default, in bytes (the `nats-patch`
/// feature; see `RemoteSettings::subscription_capacity_bytes`).
#[cfg(feature = "nats-patch")]
const DEFAULT_SUBSCRIPTION_BYTES: usize = 64 << 20;

impl Remote {
    /// Connects this node to the cluster: validates the settings, starts
    /// the remote's runtime, connects to one of the NATS servers (within
    /// `connect_timeout`), subscribes to the cluster's control subjects,
    /// and announces the node (`<cluster>.node.<node>.join`), then
    /// publishes a heartbeat every `heartbeat_interval`.
    ///
    /// Blocks the calling thread until connected (not on a scheduler
    /// worker: it panics there).
    #[track_caller]
    pub fn connect(system: &ActorSystem, settings: RemoteSettings) -> Result<Remote, ConnectError> {
        proscenium_scheduler::assert_not_on_worker("Remote::connect");
        if tokio::runtime::Handle::try_current().is_ok() {
            // Called from inside a tokio runtime, where starting and
            // blocking on another one panics: connect from a thread of its own.
            return std::thread::scope(|s| {
                s.spawn(|| Remote::connect_here(system, settings))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            });
        }
        Remote::connect_here(system, settings)
    }

    fn connect_here(
        system: &ActorSystem,
        settings: RemoteSettings,
    ) -> Result<Remote, ConnectError> {
        settings.validate()?;
        let mut addrs = Vec::with_capacity(settings.servers.len());
        let mut from_urls = NatsAuth::None;
        for s in &settings.servers {
            let addr: async_nats::ServerAddr = s.parse().map_err(|e: std::io::Error| {
                proscenium_shutdown::ConfigError::InvalidValue {
                    key: "remote.servers".to_owned(),
                    message: format!("`{}` is not a NATS server URL: {e}", redact_url(s)),
                }
            })?;
            // async-nats ignores a URL's credentials: they are taken here,
            // and the URL it gets has none (it logs the address it
            // connects to, at DEBUG, on every attempt).
            let auth = url_auth(&addr);
            let addr = if auth == NatsAuth::None {
                addr
            } else {
                without_userinfo(s).parse().map_err(|e: std::io::Error| {
                    proscenium_shutdown::ConfigError::InvalidValue {
                        key: "remote.servers".to_owned(),
                        message: format!("`{}` is not a NATS server URL: {e}", redact_url(s)),
                    }
                })?
            };
            if auth != NatsAuth::None {
                if from_urls != NatsAuth::None && from_urls != auth {
                    return Err(invalid_servers(
                        "one set of credentials in the URLs, not two",
                    ));
                }
                from_urls = auth;
            }
            addrs.push(addr);
        }
        let auth = match (&settings.auth, from_urls) {
            (a, NatsAuth::None) => a.clone(),
            (NatsAuth::None, from_urls) => from_urls,
            _ => {
                return Err(invalid_servers(
                    "credentials in the settings or in the URLs, not in both",
                ))
            }
        };
        let (tx, rx) = mpsc::channel();
        let n = ANCHORS.fetch_add(1, Ordering::Relaxed); // Relaxed: a unique suffix.
        system
            .spawn_system_actor(
                Props::new(move || Anchor(tx.clone())),
                &format!("remote-{}-{n}", settings.node),
            )
            .map_err(|e| ConnectError::Start(e.to_string()))?;
        let system = rx.recv_timeout(Duration::from_secs(30)).map_err(|_| {
            ConnectError::Start("the system did not start the remote's actor".into())
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("proscenium-remote")
            .enable_all()
            .build()
            .map_err(|e| ConnectError::Start(e.to_string()))?;
        // Errors show the URLs without their credentials, and never a
        // secret of the settings (whatever the client's message holds).
        let servers: Vec<String> = settings.servers.iter().map(|s| redact_url(s)).collect();
        let servers = servers.join(", ");
        let secrets: Vec<String> = auth.secrets().into_iter().map(str::to_owned).collect();
        let nats_err = |message: String| ConnectError::Nats {
            servers: servers.clone(),
            message: scrub_all(&message, &secrets),
        };
        let slow_consumer_drops = Arc::new(AtomicU64::new(0));
        let client = runtime.block_on(async {
            let drops = Arc::clone(&slow_consumer_drops);
            let mut options = async_nats::ConnectOptions::new()
                .name(format!("proscenium {}/{}", settings.cluster, settings.node))
                // The client's own request inboxes (JetStream's replies and
                // push deliveries, for proscenium-cluster) under the node's
                // subjects, not `_INBOX.>`: a server's permissions can then
                // let each node read its own and nobody else's
                // (docs/decisions/0023, examples/nats-server.conf).
                .custom_inbox_prefix(format!("{}.inbox.{}", settings.cluster, settings.node))
                .connection_timeout(settings.connect_timeout)
                .subscription_capacity(settings.subscription_capacity)
                .event_callback(move |e| {
                    note_event(&drops, &e);
                    async {}
                });
            options = match auth {
                NatsAuth::None => options,
                NatsAuth::UserPassword { user, password } => {
                    options.user_and_password(user, password.reveal().to_owned())
                }
                NatsAuth::Token(token) => options.token(token.reveal().to_owned()),
                NatsAuth::NKey(seed) => options.nkey(seed.reveal().to_owned()),
                NatsAuth::CredentialsFile(path) => {
                    options.credentials_file(&path).await.map_err(|e| {
                        ConnectError::Settings(proscenium_shutdown::ConfigError::InvalidValue {
                            key: "remote.credentials-file".to_owned(),
                            message: format!("a NATS .creds file (`{}`: {e})", path.display()),
                        })
                    })?
                }
            };
            #[cfg(feature = "nats-patch")]
            {
                options = options.subscription_capacity_bytes(
                    settings
                        .subscription_capacity_bytes
                        .unwrap_or(DEFAULT_SUBSCRIPTION_BYTES),
                );
            }
            let tls = &settings.tls;
            if let Some(ca) = &tls.ca_file {
                options = options.add_root_certificates(ca.clone());
            }
            if let Some((cert, key)) = &tls.client_cert {
                options = options.add_client_certificate(cert.clone(), key.clone());
            }
            // A CA or a client certificate means TLS: without it the
            // client would follow the server's (unauthenticated) INFO, and
            // connect in the clear to a server that does not ask for TLS.
            if tls.implied() {
                options = options.require_tls(true);
            }
            match tokio::time::timeout(settings.connect_timeout, options.connect(addrs)).await {
                Ok(Ok(client)) => Ok(client),
                Ok(Err(e)) => {
                    use async_nats::ConnectErrorKind as K;
                    let message = scrub_all(&e.to_string(), &secrets);
                    let servers = servers.clone();
                    Err(match e.kind() {
                        K::AuthorizationViolation | K::Authentication => {
                            ConnectError::Unauthorized { servers, message }
                        }
                        K::Tls => ConnectError::Tls { servers, message },
                        // async-nats reports a failed handshake as I/O.
                        _ if caused_by_tls(&e) => ConnectError::Tls { servers, message },
                        _ => ConnectError::Nats { servers, message },
                    })
                }
                Err(_) => Err(nats_err(format!(
                    "timed out after {:?}",
                    settings.connect_timeout
                ))),
            }
        })?;
        let (lanes, lane_rx) = Lanes::new(settings.outbound_capacity);
        // Never published: reply subjects are unguessable (see `Shared::inbox`).
        let inbox = format!(
            "{}.reply.{}.{}",
            settings.cluster,
            settings.node,
            random_hex128()
        );
        let key = settings.cluster_key.as_ref().map(ClusterKey::new);
        if key.is_none() {
            tracing::warn!(
                node = %settings.node,
                "remote: no cluster key: any client that may publish on the cluster's subjects \
                 can forge control notices and messages (see docs/decisions/0023)"
            );
        }
        let shared = Arc::new(Shared {
            client,
            settings,
            system,
            lanes,
            key,
            incarnation: Incarnation::new(),
            inbox,
            pending: Mutex::new(PendingTable::default()),
            earlier_deadline: Notify::new(),
            next_watch: AtomicU64::new(0),
            watches: Mutex::new(Watches::default()),
            producers: Mutex::new(Producers::default()),
            notice_seq: Mutex::new(0),
            node_heard: Notify::new(),
            exposed: Mutex::new(Exposures::default()),
            serving: AtomicUsize::new(0),
            served: Notify::new(),
            open_replies: AtomicUsize::new(0),
            replies_settled: Notify::new(),
            left: AtomicBool::new(false),
            slow_consumer_drops,
            rejected: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            messages: Default::default(),
        });
        #[cfg(feature = "metrics")]
        {
            // Weak: the system's list of sources must not keep the node's
            // state alive; the source is dropped with it.
            let weak = Arc::downgrade(&shared);
            shared.system.add_metrics_source(move || {
                weak.upgrade()
                    .map(|shared| {
                        crate::metrics::Counts::of(&shared).publish(&shared.settings.node)
                    })
                    .is_some()
            });
        }
        runtime
            .block_on(start(&shared, lane_rx))
            .map_err(nats_err)?;
        let handle = runtime.handle().clone();
        Ok(Remote {
            inner: Arc::new(Inner {
                shared,
                handle,
                runtime: Some(runtime),
            }),
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.inner.shared.settings.node
    }

    /// The node's NATS connection, for crates built on the remote layer
    /// (proscenium-cluster keeps its shard ownership in a JetStream
    /// key-value bucket on it). What is published on it directly is not
    /// signed with the cluster key.
    pub fn nats_client(&self) -> async_nats::Client {
        self.inner.shared.client.clone()
    }

    /// The tokio runtime the node's NATS client runs on (one worker
    /// thread), for crates built on the remote layer: their tasks on the
    /// connection run there. It lives as long as the `Remote` (and the
    /// refs made from it).
    pub fn runtime(&self) -> tokio::runtime::Handle {
        self.inner.handle.clone()
    }

    /// The system this node belongs to (an engine-internal handle: it does
    /// not keep the system alive).
    pub fn system(&self) -> &ActorSystem {
        &self.inner.shared.system
    }

    /// The settings it connected with.
    pub fn settings(&self) -> &RemoteSettings {
        &self.inner.shared.settings
    }

    /// How many messages for this node's exposed names the NATS client
    /// dropped because a name's buffer was full: its actor fell behind its
    /// senders by more than
    /// [`subscription_capacity`](RemoteSettings::subscription_capacity)
    /// messages (NATS's "slow consumer"). Delivery is at most once, and
    /// this is where "at most" shows: raise the capacity, or have senders
    /// wait for replies now and then (an ask every few thousand tells), if
    /// it is not zero. Each counted drop is also logged (a `tracing`
    /// warning, on the first and every power-of-two-th).
    ///
    /// Zero means no drop; otherwise it is a lower bound, and in a burst a
    /// far lower one: the NATS client reports each drop through a bounded
    /// event queue that overflows with them (a 200 000-message burst in the
    /// remote benchmark lost 33 893 messages and counted 512).
    pub fn dropped_by_slow_consumer(&self) -> u64 {
        // Relaxed: a statistic.
        self.inner
            .shared
            .slow_consumer_drops
            .load(Ordering::Relaxed)
    }

    /// How many times this node's connection to NATS was made again after
    /// it dropped (the client reconnects by itself; each reconnect may
    /// lose the messages in flight, as delivery is at most once).
    pub fn reconnects(&self) -> u64 {
        // Relaxed: a statistic.
        self.inner
            .shared
            .client
            .statistics()
            .connects
            .load(Ordering::Relaxed)
            .saturating_sub(1)
    }

    /// How many replies (answers to other nodes' asks, their "dropped" and
    /// decode failures) this node dropped because its outbound queue was
    /// full ([`RemoteSettings::outbound_capacity`]): their askers get their
    /// timeout. Each is also logged (on the first and every
    /// power-of-two-th).
    pub fn dropped_replies(&self) -> u64 {
        self.inner.shared.lanes.dropped_replies()
    }

    /// How many messages this node dropped unread because they did not
    /// verify against the cluster key (a client without the key published
    /// them: a forged control notice, reply, where-answer or message to an
    /// actor), or were replays (a heartbeat, leave or terminated notice of
    /// an older incarnation, or not newer than the last one heard). Each
    /// is also logged (a `tracing` warning, on the first and every
    /// power-of-two-th). See docs/decisions/0023-remote-security.md.
    pub fn rejected_messages(&self) -> u64 {
        // Relaxed: a statistic.
        self.inner.shared.rejected.load(Ordering::Relaxed)
    }

    /// Makes `actor` reachable from every node under `name`: messages
    /// published on `<cluster>.actor.<name>` are decoded as `M` and told
    /// to it, in the order they arrive. A message that cannot be decoded
    /// is a dead letter here ([`UndecodableMessage`]), and an asker gets
    /// [`RemoteAskError::Remote`](crate::RemoteAskError::Remote) with the
    /// reason. The name can be [watched](Self::watch) from other nodes;
    /// when the actor terminates, the name is withdrawn and its watchers
    /// get their Terminated.
    ///
    /// A name is exposed this way by one node at a time (for a pool over
    /// nodes, use [`expose_group`](Self::expose_group)): if a live node
    /// exposes it already, this fails with
    /// [`RemoteError::ExposedElsewhere`] (it asks where the name is first,
    /// as a watch does; two exposes of one name on two nodes within the
    /// same round trip through the server are not told apart). It is
    /// one subject token of at most [`MAX_NAME_LEN`](crate::MAX_NAME_LEN)
    /// bytes (else [`RemoteError::BadName`] or
    /// [`RemoteError::NameTooLong`], before anything is sent).
    ///
    /// Blocks until the server has the subscription (one round trip), so
    /// the name is live on this server when it returns; like every
    /// blocking call of the engine it panics on a scheduler worker (expose
    /// from the code that spawns the actor, not from inside an actor).
    ///
    /// Once the node is leaving (the coordinated shutdown's cluster-leave
    /// has begun draining, see
    /// [`add_to_coordinated_shutdown`](Self::add_to_coordinated_shutdown))
    /// it fails with [`RemoteError::Leaving`], and once it has left with
    /// [`RemoteError::Closed`].
    #[track_caller]
    pub fn expose<M>(&self, actor: &ActorRef<M>, name: &str) -> Result<(), RemoteError>
    where
        M: Serialize + DeserializeOwned + Send + 'static,
    {
        self.expose_as(actor, name, false)
    }

    /// Exposes `actor` under `name` as one member of a NATS queue group:
    /// each message to the name goes to one member of the group, on
    /// whichever node (a pool spread over machines). Members cannot be
    /// watched through the name. Blocks as [`expose`](Self::expose) does.
    #[track_caller]
    pub fn expose_group<M>(&self, actor: &ActorRef<M>, name: &str) -> Result<(), RemoteError>
    where
        M: Serialize + DeserializeOwned + Send + 'static,
    {
        self.expose_as(actor, name, true)
    }

    #[track_caller]
    fn expose_as<M>(&self, actor: &ActorRef<M>, name: &str, group: bool) -> Result<(), RemoteError>
    where
        M: Serialize + DeserializeOwned + Send + 'static,
    {
        proscenium_scheduler::assert_not_on_worker("Remote::expose");
        let shared = &self.inner.shared;
        check_actor_name(name)?;
        if shared.is_closed() {
            return Err(RemoteError::Closed);
        }
        let (drain_tx, drain_rx) = oneshot::channel();
        {
            let mut exposed = lock(&shared.exposed);
            if exposed.draining {
                return Err(RemoteError::Leaving);
            }
            if exposed.by_name.contains_key(name) {
                return Err(RemoteError::AlreadyExposed(name.to_owned()));
            }
            exposed.by_name.insert(
                name.to_owned(),
                Exposed {
                    drain: Some(drain_tx),
                },
            );
            // Counted with the name, under the lock `drain` takes its
            // signals under: a drain that begins from here on waits for
            // this serving task (which finds its signal sent when it
            // starts), or for the failure below.
            // Relaxed: `served`'s notify carries the wake-up of the waiter.
            shared.serving.fetch_add(1, Ordering::Relaxed);
        }
        let subscribed = self.block_on({
            let shared = Arc::clone(shared);
            let name = name.to_owned();
            async move {
                if !group {
                    check_not_exposed(&shared, &name).await?;
                }
                let subject = shared.subject("actor", &name);
                let messages = if group {
                    shared.client.queue_subscribe(subject, name.clone()).await
                } else {
                    shared.client.subscribe(subject).await
                };
                let messages = messages.map_err(|e| RemoteError::Nats(e.to_string()))?;
                let single = if group {
                    None
                } else {
                    let nats = |e: async_nats::SubscribeError| RemoteError::Nats(e.to_string());
                    let where_sub = shared
                        .client
                        .subscribe(shared.subject("where", &name))
                        .await
                        .map_err(nats)?;
                    // Reliable delivery's messages to the name.
                    let reliable = shared
                        .client
                        .subscribe(format!("{}.r", shared.subject("actor", &name)))
                        .await
                        .map_err(nats)?;
                    Some(Single {
                        where_sub,
                        reliable,
                    })
                };
                // Once the server has the subscriptions, the name is live.
                shared.round_trip(false).await.map_err(RemoteError::Nats)?;
                Ok::<_, RemoteError>((messages, single))
            }
        });
        let (messages, single) = match subscribed {
            Ok(subs) => subs,
            Err(e) => {
                lock(&shared.exposed).by_name.remove(name);
                // Relaxed: as in `serve`'s end.
                shared.serving.fetch_sub(1, Ordering::Relaxed);
                shared.served.notify_waiters();
                return Err(e);
            }
        };
        self.inner.handle.spawn(serve(
            Arc::clone(shared),
            name.to_owned(),
            actor.clone(),
            messages,
            single,
            drain_rx,
        ));
        Ok(())
    }

    /// A reference to whatever actor is exposed under `name`, on any node
    /// (no check that one is: a tell to nobody is lost, an ask to nobody
    /// fails at once with `NoResponders`). The name is checked as
    /// [`expose`](Self::expose) checks it.
    pub fn actor_ref<M>(&self, name: &str) -> Result<RemoteRef<M>, RemoteError>
    where
        M: Serialize + DeserializeOwned + Send + 'static,
    {
        check_actor_name(name)?;
        Ok(RemoteRef::new(Arc::clone(&self.inner), name))
    }

    /// A reference that delivers each message to the actor exposed under
    /// `name` (with [`expose`](Self::expose)) exactly once and in order,
    /// across lost messages and a restarted NATS server: see
    /// [`ReliableRef`]. The name is checked as `expose` checks it.
    pub fn reliable_ref<M>(&self, name: &str) -> Result<ReliableRef<M>, RemoteError>
    where
        M: Serialize + DeserializeOwned + Send + 'static,
    {
        check_actor_name(name)?;
        if self.inner.shared.is_closed() {
            return Err(RemoteError::Closed);
        }
        Ok(ReliableRef::new(Arc::clone(&self.inner), name))
    }

    /// Watches the actor exposed under `name` (with [`expose`](Self::expose),
    /// on any node): when it terminates, its node leaves, or its node is
    /// silent for the failure-detector timeout, `make`'s message is told to
    /// `watcher`, once. If no node exposes the name now, at once, with
    /// [`TerminatedReason::NotFound`](crate::TerminatedReason::NotFound).
    ///
    /// As Akka's watch (seeds, akka-net-supervision): "the message will
    /// be delivered irrespective of the order in which the monitoring
    /// request and target's termination occur, i.e. you still get the
    /// message even if at the time of registration the target is already
    /// dead." A remote name that nobody exposes counts as dead.
    pub fn watch<N: Send + 'static>(
        &self,
        name: &str,
        watcher: &ActorRef<N>,
        make: impl FnOnce(RemoteTerminated) -> N + Send + 'static,
    ) -> Result<RemoteWatch, RemoteError> {
        let shared = &self.inner.shared;
        check_actor_name(name)?;
        if shared.is_closed() {
            return Err(RemoteError::Closed);
        }
        let watcher = watcher.clone();
        control::watch(shared, name, Box::new(move |t| watcher.tell(make(t))))
    }

    /// Puts this node's leaving into the system's coordinated shutdown:
    ///
    /// * `cluster-leave`: drains every exposed name (NATS drain: the
    ///   server sends no more, the messages already received are told to
    ///   their actors); an `expose` from then on fails with
    ///   [`RemoteError::Leaving`];
    /// * `cluster-exiting`: announces the leave (watchers of this node's
    ///   names get their Terminated, reason `NodeLeft`) and stops the
    ///   heartbeat; sends fail with [`RemoteError::Closed`] from here on;
    /// * `cluster-shutdown`: waits until every request received has been
    ///   answered (or dropped), flushes, and closes the connection. The
    ///   wait for answers ends early enough to close in order within the
    ///   phase's timeout (a quarter of it, at most 1 s, is kept for that):
    ///   a reply an actor holds past then is left to its asker's timeout
    ///   (logged as a warning).
    ///
    /// Each within its phase's timeout.
    pub fn add_to_coordinated_shutdown(&self) -> Result<(), proscenium::AddTaskError> {
        let cs = self.inner.shared.system.coordinated_shutdown();
        // The node stays on NATS until its phases have run, whatever
        // becomes of the handles: the last task lets it go.
        let keep = Arc::new(Mutex::new(Some(KeepAlive(Some(Arc::clone(&self.inner))))));
        let (shared, handle) = (Arc::clone(&self.inner.shared), self.inner.handle.clone());
        cs.add_task(Phase::CLUSTER_LEAVE, "remote-drain", move || {
            on_runtime(handle.clone(), drain(shared))
        })?;
        let (shared, handle) = (Arc::clone(&self.inner.shared), self.inner.handle.clone());
        cs.add_task(Phase::CLUSTER_EXITING, "remote-leave", move || {
            on_runtime(handle, leave(shared))
        })?;
        let (shared, handle) = (Arc::clone(&self.inner.shared), self.inner.handle.clone());
        let budget = cs
            .config()
            .phase_timeout(Phase::CLUSTER_SHUTDOWN)
            .map(reply_wait_budget);
        cs.add_task(Phase::CLUSTER_SHUTDOWN, "remote-close", move || {
            // Taken here, dropped when the close ends (or is given up on).
            let kept = lock(&keep).take();
            let close = on_runtime(handle, close(shared, budget));
            async move {
                let closed = close.await;
                drop(kept);
                closed
            }
        })?;
        Ok(())
    }

    fn block_on<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        match tokio::runtime::Handle::try_current() {
            // Inside some tokio runtime (not ours to block): wait from a
            // scoped thread.
            Ok(_) => std::thread::scope(|s| {
                s.spawn(|| self.inner.handle.block_on(f))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            }),
            Err(_) => self.inner.handle.block_on(f),
        }
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.shared.settings;
        f.debug_struct("Remote")
            .field("cluster", &s.cluster)
            .field("node", &s.node)
            .finish()
    }
}

/// Runs `f` on the remote's runtime; the shutdown task awaits its end.
fn on_runtime<F>(
    handle: tokio::runtime::Handle,
    f: F,
) -> impl std::future::Future<Output = Result<(), TaskError>> + Send + 'static
where
    F: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let task = handle.spawn(f);
    async move {
        match task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(TaskError::from(e)),
            // The runtime is gone (the Remote was dropped): nothing left to do.
            Err(_) => Ok(()),
        }
    }
}

async fn drain(shared: Arc<Shared>) -> Result<(), String> {
    let signals: Vec<oneshot::Sender<()>> = {
        let mut exposed = lock(&shared.exposed);
        exposed.draining = true;
        exposed
            .by_name
            .values_mut()
            .filter_map(|e| e.drain.take())
            .collect()
    };
    for s in signals {
        let _ = s.send(());
    }
    loop {
        let notified = shared.served.notified();
        // Relaxed: read after registering for the notify (which the last
        // task sends after its decrement), so no wake-up is missed.
        if shared.serving.load(Ordering::Relaxed) == 0 {
            break;
        }
        notified.await;
    }
    tracing::info!(node = %shared.settings.node, "remote: exposed names drained");
    Ok(())
}

async fn leave(shared: Arc<Shared>) -> Result<(), String> {
    // Release: pairs with `is_closed`'s Acquire.
    shared.left.store(true, Ordering::Release);
    // Senders waiting for room in a reliable buffer find it closed.
    crate::reliable::wake_all(&shared);
    // One notice for the node: every watcher of its names hears NodeLeft
    // (a watch located on it at once; one whose where-answer is still on
    // its way when the answer comes: the leave makes the incarnation
    // departed there). No terminated notice per name: the actors did not
    // stop, their node left.
    shared.send_notice("leave");
    let node = &shared.settings.node;
    flush(&shared, false).await;
    tracing::info!(node = %node, "remote: left the cluster");
    Ok(())
}

/// How long `close` waits for open replies within a cluster-shutdown phase
/// of `timeout`: what is left after keeping a quarter of it, at most 1 s,
/// for the flush and the drain of the connection (a round trip each on a
/// healthy connection: milliseconds; the rest is room for a loaded machine).
fn reply_wait_budget(timeout: Duration) -> Duration {
    timeout - (timeout / 4).min(Duration::from_secs(1))
}

async fn close(shared: Arc<Shared>, budget: Option<Duration>) -> Result<(), String> {
    let wait_for_replies = async {
        loop {
            let notified = shared.replies_settled.notified();
            // Acquire: pairs with `reply_settled`'s AcqRel decrement.
            if shared.open_replies.load(Ordering::Acquire) == 0 {
                break;
            }
            notified.await;
        }
    };
    match budget {
        Some(budget) => {
            if tokio::time::timeout(budget, wait_for_replies)
                .await
                .is_err()
            {
                tracing::warn!(
                    node = %shared.settings.node,
                    // Relaxed: a number for the log line.
                    open = shared.open_replies.load(Ordering::Relaxed),
                    "remote: closing with replies still unanswered after {budget:?} \
                     (their askers get their timeout)"
                );
            }
        }
        None => wait_for_replies.await,
    }
    // Everything queued before (the last replies) first.
    flush(&shared, true).await;
    shared.client.drain().await.map_err(|e| e.to_string())?;
    tracing::info!(node = %shared.settings.node, "remote: connection closed");
    Ok(())
}

/// Subscribes to the inbox and the control subjects, announces the node,
/// starts the outbound, inbox, control and heartbeat tasks.
async fn start(shared: &Arc<Shared>, lanes: LaneReceivers) -> Result<(), String> {
    let c = &shared.settings.cluster;
    let client = &shared.client;
    let e = |e: async_nats::SubscribeError| e.to_string();
    let inbox = client
        .subscribe(format!("{}.*", shared.inbox))
        .await
        .map_err(e)?;
    // Every node's notices: join, hb, leave, terminated.<name>.
    let notices = client.subscribe(format!("{c}.node.>")).await.map_err(e)?;
    shared.send_notice("join");
    outbound::run(&shared.client, lanes);
    tokio::spawn(inbox_task(Arc::clone(shared), inbox));
    tokio::spawn(control::control(Arc::clone(shared), notices));
    tokio::spawn(control::heartbeat(Arc::clone(shared)));
    tokio::spawn(control::failure_detector(Arc::clone(shared)));
    tokio::spawn(expire_pending(Arc::clone(shared)));
    // The control subscriptions are live once this returns.
    shared.round_trip(false).await
}

/// Serves one exposed name: tells each decoded message to the actor,
/// answers where-requests, ends when the actor terminates (announcing it)
/// or when drained.
/// The subscriptions of a plain expose besides its messages' (a group
/// member has neither: it cannot be watched, nor reached reliably).
struct Single {
    /// `C.where.<name>`.
    where_sub: Subscriber,
    /// `C.actor.<name>.r`: reliable delivery's messages.
    reliable: Subscriber,
}

async fn serve<M>(
    shared: Arc<Shared>,
    name: String,
    actor: ActorRef<M>,
    mut messages: Subscriber,
    single: Option<Single>,
    mut drain_rx: oneshot::Receiver<()>,
) where
    M: Serialize + DeserializeOwned + Send + 'static,
{
    let mut terminated = actor.when_terminated();
    let mut draining = false;
    let watchable = single.is_some();
    let (mut where_sub, mut reliable) = match single {
        Some(s) => (Some(s.where_sub), Some(s.reliable)),
        None => (None, None),
    };
    // Reliable delivery: where each producer sending to this name stands.
    let mut consumers = Consumers::new(
        shared.settings.reliable_max_producers,
        shared.settings.reliable_idle_timeout,
    );
    let mut forget_idle = tokio::time::interval(shared.settings.reliable_idle_timeout / 2);
    forget_idle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = &mut terminated, if !draining => {
                // Only a plain expose is watchable (a group member's end
                // is not the name's).
                if watchable {
                    shared.send_notice(&format!("terminated.{name}"));
                }
                break;
            }
            _ = &mut drain_rx, if !draining => {
                draining = true;
                if let Some(w) = where_sub.as_mut() {
                    let _ = w.drain().await;
                }
                if let Some(r) = reliable.as_mut() {
                    let _ = r.drain().await;
                }
                if messages.drain().await.is_err() {
                    break;
                }
            }
            // Before the messages: a where-request sent before a message
            // is answered before the message is delivered (the client
            // hands each subscription its messages in the connection's
            // order), so the watcher knows the node first.
            Some(mut ask) = next_of(&mut where_sub) => {
                if !shared.open(&mut ask, "where-request") {
                    continue;
                }
                if let Some(reply) = ask.reply {
                    shared.send_ordered(shared.out(reply.to_string(), None, &shared.where_answer()));
                }
            }
            msg = messages.next() => match msg {
                Some(msg) => deliver(&shared, &name, &actor, msg),
                None => break,
            },
            msg = next_of(&mut reliable) => match msg {
                Some(msg) => {
                    if deliver_reliable(&shared, &name, &actor, &mut consumers, msg) {
                        consumers.acknowledge(&shared);
                    }
                }
                // Drained: the messages' subscription ends the task.
                None => reliable = None,
            },
            _ = forget_idle.tick(), if reliable.is_some() => consumers.forget_idle(),
            // Last: confirmations go out once nothing more is ready (and
            // every `ACK_EVERY` messages, above).
            () = std::future::ready(()), if consumers.owes() => consumers.acknowledge(&shared),
        }
    }
    if consumers.owes() {
        consumers.acknowledge(&shared);
    }
    // Withdraw the name (dropping the subscriptions unsubscribes).
    drop(messages);
    drop(where_sub);
    drop(reliable);
    if !draining {
        lock(&shared.exposed).by_name.remove(&name);
    }
    // Relaxed: the notify below carries the wake-up; `drain` re-reads
    // after registering.
    shared.serving.fetch_sub(1, Ordering::Relaxed);
    shared.served.notify_waiters();
}

async fn next_of(sub: &mut Option<Subscriber>) -> Option<Message> {
    match sub {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

fn deliver<M>(shared: &Arc<Shared>, name: &str, actor: &ActorRef<M>, mut msg: Message)
where
    M: Serialize + DeserializeOwned + Send + 'static,
{
    // A message that does not verify is not from a node of the cluster:
    // dropped and counted (no dead letter, no answer).
    if !shared.open(&mut msg, "message to an exposed actor") {
        return;
    }
    // An asker (the message's reply subject, and any reply decoded from
    // it before the failure) hears the reason from `decode`.
    match decode::<M>(shared, &msg.payload, msg.reply.as_deref()) {
        Ok(m) => {
            #[cfg(feature = "metrics")]
            shared.messages.received();
            actor.tell(m);
        }
        Err(reason) => {
            tracing::warn!(name, %reason, "remote: a message could not be decoded");
            shared.dead_letter(
                Some(actor.id()),
                UndecodableMessage {
                    name: name.to_owned(),
                    reason,
                    payload: msg.payload,
                },
            );
        }
    }
}

/// A reliable message: verified, then delivered if it is the next of its
/// producer (decoded and told, or a dead letter if it does not decode);
/// dropped if seen or out of order. Returns whether a confirmation is due
/// now.
fn deliver_reliable<M>(
    shared: &Arc<Shared>,
    name: &str,
    actor: &ActorRef<M>,
    consumers: &mut Consumers,
    mut msg: Message,
) -> bool
where
    M: Serialize + DeserializeOwned + Send + 'static,
{
    if !shared.open(&mut msg, "reliable message") {
        return false;
    }
    let Some(ack_to) = msg.reply.as_deref() else {
        return false;
    };
    let Ok((envelope, body)) = postcard::take_from_bytes::<Envelope>(&msg.payload) else {
        shared.reject(
            &msg.subject,
            "reliable message",
            "its envelope does not decode",
        );
        return false;
    };
    let (verdict, due) = consumers.receive(&envelope, ack_to);
    if verdict == Verdict::Deliver {
        match decode::<M>(shared, body, None) {
            Ok(m) => {
                #[cfg(feature = "metrics")]
                shared.messages.received();
                actor.tell(m);
            }
            Err(reason) => {
                tracing::warn!(name, %reason, "remote: a reliable message could not be decoded");
                shared.dead_letter(
                    Some(actor.id()),
                    UndecodableMessage {
                        name: name.to_owned(),
                        reason,
                        payload: msg.payload.slice_ref(body),
                    },
                );
            }
        }
    }
    due
}

/// The answer to an ask, as the asker sees it.
pub(crate) fn answer<R: DeserializeOwned>(
    shared: &Arc<Shared>,
    name: &str,
    msg: Message,
) -> Result<R, crate::RemoteAskError> {
    use crate::RemoteAskError as E;
    if msg.status == Some(StatusCode::NO_RESPONDERS) {
        return Err(E::NoResponders(name.to_owned()));
    }
    if let Some(reason) = msg.headers.as_ref().and_then(|h| h.get(ERROR_HEADER)) {
        return Err(match reason.as_str() {
            "dropped" => E::NoReply,
            other => E::Remote(other.to_owned()),
        });
    }
    decode::<R>(shared, &msg.payload, None).map_err(E::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RemoteSettings;
    use std::future::Future;

    use crate::test_support as support;
    use support::{require_nats, Cmd, Counter, NatsServer, GUARD};

    /// An expose that runs while the drain (cluster-leave) waits for the
    /// names being served is refused: its serving task would never get
    /// the drain's signal, and the drain would wait for it until its
    /// phase times out.
    #[test]
    fn an_expose_while_the_drain_runs_is_refused() {
        require_nats!();
        let server = NatsServer::start();
        let sys = support::system("d");
        let remote =
            Remote::connect(&sys, RemoteSettings::new(server.url(), "d", "a")).expect("connect");
        let counter = sys.spawn(Counter::props("a"), "counter").expect("spawn");
        remote.expose(&counter, "counter").expect("expose");
        let shared = Arc::clone(&remote.inner.shared);
        // Stands for a name whose serving task has not ended yet (a
        // backlog to tell): the drain waits for it.
        shared.serving.fetch_add(1, Ordering::Relaxed);
        let mut draining = Box::pin(drain(Arc::clone(&shared)));
        // Polled once: the drain has begun (signals sent) and waits.
        let first = remote.inner.handle.block_on(std::future::poll_fn(|cx| {
            std::task::Poll::Ready(draining.as_mut().poll(cx).is_pending())
        }));
        assert!(first, "the drain waits for the stand-in");
        let late = sys.spawn(Counter::props("a"), "late").expect("spawn");
        assert_eq!(remote.expose(&late, "late"), Err(RemoteError::Leaving));
        assert_eq!(
            remote.expose_group(&late, "late"),
            Err(RemoteError::Leaving)
        );
        // The stand-in ends: so does the drain (nothing else to wait for).
        shared.serving.fetch_sub(1, Ordering::Relaxed);
        shared.served.notify_waiters();
        let drained = remote
            .inner
            .handle
            .block_on(async { tokio::time::timeout(GUARD, draining).await });
        assert_eq!(drained, Ok(Ok(())), "the drain ends");
        drop(remote);
        assert!(sys.terminate().wait_timeout(GUARD).is_some());
    }

    /// Every ask's timeout used to be a tokio task sleeping for the whole
    /// timeout, answered or not (22,000 armed at once in the benchmark).
    /// An answered ask leaves no task and no deadline behind.
    #[test]
    fn an_answered_ask_leaves_no_task_or_deadline_behind() {
        require_nats!();
        let server = NatsServer::start();
        let sys = support::system("u");
        let remote =
            Remote::connect(&sys, RemoteSettings::new(server.url(), "u", "a")).expect("connect");
        let counter = sys.spawn(Counter::props("a"), "counter").expect("spawn");
        remote.expose(&counter, "counter").expect("expose");
        let counter = remote.actor_ref::<Cmd>("counter").expect("ref");
        // One ask first: whatever starts lazily has started.
        assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
        let tasks = || remote.inner.handle.metrics().num_alive_tasks();
        let before = tasks();
        for _ in 0..100 {
            assert_eq!(counter.ask(Cmd::Get, GUARD).wait(), Ok(0));
        }
        assert_eq!(tasks(), before, "tasks alive after 100 answered asks");
        assert_eq!(remote.inner.shared.deadlines_armed(), 0);
        // A timeout past the end of time is no deadline (and no overflow).
        assert_eq!(counter.ask(Cmd::Get, Duration::MAX).wait(), Ok(0));
        // An unanswered one still times out (and leaves nothing either).
        let timeout = Duration::from_millis(200);
        let held = counter.ask(Cmd::Hold, timeout).wait();
        assert_eq!(held, Err(crate::RemoteAskError::Timeout(timeout)));
        assert_eq!(tasks(), before);
        assert_eq!(remote.inner.shared.deadlines_armed(), 0);
        drop(remote);
        assert!(sys.terminate().wait_timeout(GUARD).is_some());
    }

    /// The close keeps a quarter of its phase, at most 1 s, to flush and close.
    #[test]
    fn the_reply_wait_leaves_time_to_close() {
        let ms = Duration::from_millis;
        assert_eq!(reply_wait_budget(ms(2000)), ms(1500));
        assert_eq!(
            reply_wait_budget(Duration::from_secs(5)),
            Duration::from_secs(4)
        );
        assert_eq!(
            reply_wait_budget(Duration::from_secs(60)),
            Duration::from_secs(59)
        );
        assert_eq!(reply_wait_budget(Duration::ZERO), Duration::ZERO);
    }
}
