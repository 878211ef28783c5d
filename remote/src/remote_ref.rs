//! [`RemoteRef`]: tell and ask an actor exposed on any node; and its
//! adaptation to a local `ActorRef`.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use proscenium::{Actor, ActorRef, ActorSystem, Context, Outcome, Props, SpawnError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::codec::{encode, RemoteReply};
use crate::error::{RemoteAskError, RemoteError};
use crate::remote::{answer, Inner};
use crate::shared::Pending;

/// A reference to the actor exposed under a name, on whichever node
/// exposes it: [`tell`](Self::tell) and [`ask`](Self::ask) send over
/// NATS, [`to_actor_ref`](Self::to_actor_ref) makes a local `ActorRef<M>`
/// in front of it. Cheap to clone. See the crate docs for the delivery
/// guarantees.
pub struct RemoteRef<M> {
    inner: Arc<Inner>,
    name: String,
    subject: String,
    _msg: PhantomData<fn(M)>,
}

impl<M> Clone for RemoteRef<M> {
    fn clone(&self) -> Self {
        RemoteRef {
            inner: Arc::clone(&self.inner),
            name: self.name.clone(),
            subject: self.subject.clone(),
            _msg: PhantomData,
        }
    }
}

impl<M> fmt::Debug for RemoteRef<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteRef")
            .field("name", &self.name)
            .finish()
    }
}

impl<M: Serialize + DeserializeOwned + Send + 'static> RemoteRef<M> {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> RemoteRef<M> {
        let subject = inner.shared.subject("actor", name);
        RemoteRef {
            inner,
            name: name.to_owned(),
            subject,
            _msg: PhantomData,
        }
    }

    /// The exposed name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends `msg`, at most once, after every message this node sent
    /// before (to any name). Returns once it is queued for the server: an
    /// error here means nothing was sent ([`RemoteError::Encode`],
    /// [`RemoteError::PayloadTooLarge`], [`RemoteError::Closed`], or
    /// [`RemoteError::OutboundFull`] when the node already holds
    /// `outbound-capacity` bytes for the server); `Ok` does not mean it
    /// arrived (nobody may expose the name, or the connection may fail
    /// before it is written).
    pub fn tell(&self, msg: M) -> Result<(), RemoteError> {
        let shared = &self.inner.shared;
        if shared.is_closed() {
            return Err(RemoteError::Closed);
        }
        let encoded = encode(shared, &msg)?;
        // A local reply inside: the first one's subject is the NATS reply
        // subject too, so a no-responders status reaches (and fails) it.
        let reply = encoded.first_reply_subject(shared);
        encoded.publish(shared, self.subject.clone(), reply)?;
        #[cfg(feature = "metrics")]
        shared.messages.sent();
        Ok(())
    }

    /// Sends `make(reply)` and waits for the reply, up to `timeout`
    /// (failing at once, as [`tell`](Self::tell) does, if it cannot be
    /// sent: `RemoteAskError::Send`):
    /// [`RemoteAskError::NoResponders`] at once if no node exposes the
    /// name, [`RemoteAskError::Timeout`] if no reply comes in time (a later
    /// one is dropped). The returned [`RemoteAsk`] is a future (await it,
    /// or pipe it to an actor with `Context::pipe_to_self`) with a blocking
    /// [`wait`](RemoteAsk::wait) for plain threads.
    pub fn ask<R>(&self, make: impl FnOnce(RemoteReply<R>) -> M, timeout: Duration) -> RemoteAsk<R>
    where
        R: Serialize + DeserializeOwned + Send + 'static,
    {
        let shared = Arc::clone(&self.inner.shared);
        let (tx, rx) = oneshot::channel();
        if shared.is_closed() {
            let _ = tx.send(Err(RemoteAskError::Send(RemoteError::Closed)));
            return RemoteAsk { rx };
        }
        let (id, reply_subject) = shared.new_reply_subject();
        let name = self.name.clone();
        let for_answer = Arc::clone(&shared);
        shared.put_pending(
            id,
            Pending {
                deliver: Box::new(move |outcome| {
                    let result = match outcome {
                        Ok(msg) => answer::<R>(&for_answer, &name, msg),
                        Err(()) => Err(RemoteAskError::Timeout(timeout)),
                    };
                    let _ = tx.send(result);
                }),
                alive: None,
                // Given up on by the remote's expiry task; removed with the
                // entry when the answer comes. (A timeout past the end of
                // time never expires.)
                deadline: Instant::now().checked_add(timeout),
            },
        );
        let msg = make(RemoteReply::to_subject(reply_subject.clone()));
        match encode(&shared, &msg)
            .and_then(|encoded| encoded.publish(&shared, self.subject.clone(), Some(reply_subject)))
        {
            Ok(()) => {
                #[cfg(feature = "metrics")]
                shared.messages.sent();
            }
            Err(e) => {
                if let Some(pending) = shared.take_pending(id) {
                    drop(pending);
                }
                let (tx, rx2) = oneshot::channel();
                let _ = tx.send(Err(RemoteAskError::Send(e)));
                return RemoteAsk { rx: rx2 };
            }
        }
        RemoteAsk { rx }
    }

    /// A local `ActorRef<M>` in front of this remote one: every message
    /// told to it is sent with [`tell`](Self::tell), so local code (and a
    /// local `ask` whose reply is a [`RemoteReply`] made from its
    /// `Reply`) cannot tell it from a local actor. It is a small
    /// forwarding actor under `/system` (one more hop, as
    /// `ActorRef::adapt`); each call makes a new one. A message that
    /// cannot be sent (encode error, over the max payload, the remote
    /// closed) is a dead letter of this forwarder, and the reason is
    /// logged.
    pub fn to_actor_ref(&self, system: &ActorSystem) -> Result<ActorRef<M>, SpawnError> {
        let remote = self.clone();
        let n = NEXT_FORWARDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed); // Relaxed: a unique suffix.
        system.spawn_system_actor(
            Props::new(move || Forwarder {
                remote: remote.clone(),
            }),
            &format!("remote-ref-{}-{n}", self.name),
        )
    }
}

static NEXT_FORWARDER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct Forwarder<M> {
    remote: RemoteRef<M>,
}

impl<M: Serialize + DeserializeOwned + Send + 'static> Actor for Forwarder<M> {
    type Msg = M;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: M) -> Outcome {
        // `tell` encodes a borrow; keep the message for a dead letter.
        let shared = &self.remote.inner.shared;
        if shared.is_closed() {
            tracing::warn!(name = %self.remote.name, "remote: closed; message dropped");
            shared.dead_letter(Some(ctx.id()), msg);
            return Ok(());
        }
        match encode(shared, &msg) {
            Ok(encoded) => {
                let reply = encoded.first_reply_subject(shared);
                match encoded.publish(shared, self.remote.subject.clone(), reply) {
                    Ok(()) => {
                        #[cfg(feature = "metrics")]
                        shared.messages.sent();
                    }
                    Err(e) => {
                        tracing::warn!(name = %self.remote.name, error = %e, "remote: message not sent");
                        shared.dead_letter(Some(ctx.id()), msg);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(name = %self.remote.name, error = %e, "remote: message not sent");
                shared.dead_letter(Some(ctx.id()), msg);
            }
        }
        Ok(())
    }
}

/// The future reply of [`RemoteRef::ask`]. It always resolves: with the
/// reply, or an error at the latest at the ask's timeout.
#[must_use = "an ask's reply is lost if the RemoteAsk is dropped"]
pub struct RemoteAsk<R> {
    rx: oneshot::Receiver<Result<R, RemoteAskError>>,
}

impl<R> RemoteAsk<R> {
    /// Blocks this thread until the reply or the error.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (`.await` it there, or pipe it to the
    /// actor), and inside a tokio runtime.
    #[track_caller]
    pub fn wait(self) -> Result<R, RemoteAskError> {
        proscenium_scheduler::assert_not_on_worker("RemoteAsk::wait");
        self.rx
            .blocking_recv()
            .unwrap_or(Err(RemoteAskError::NoReply))
    }
}

impl<R> Future for RemoteAsk<R> {
    type Output = Result<R, RemoteAskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(RemoteAskError::NoReply)))
    }
}

impl<R> fmt::Debug for RemoteAsk<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteAsk").finish_non_exhaustive()
    }
}
