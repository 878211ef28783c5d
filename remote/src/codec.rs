//! The wire format (postcard) and [`RemoteReply`], the reply half of a
//! remote ask, which travels inside a message as its reply subject.
//!
//! A `RemoteReply` cannot be serialized or deserialized on its own: it
//! needs the node that encodes or decodes it (to register where a local
//! reply goes, or to publish the answer). That node is handed over in a
//! thread-local for the duration of one encode or decode.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use proscenium::Reply;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::RemoteError;
use crate::shared::{Pending, Shared, ERROR_HEADER};

/// The largest scratch buffer a thread keeps between encodes (a larger
/// one, for a rare large message, is freed).
const SCRATCH_KEPT: usize = 64 << 10;

thread_local! {
    /// Where a message is encoded before it is copied out (see `encode`).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static ENCODING: RefCell<Option<EncodeCtx>> = const { RefCell::new(None) };
    static DECODING: RefCell<Option<DecodeCtx>> = const { RefCell::new(None) };
}

struct EncodeCtx {
    shared: Arc<Shared>,
    /// Pending entries registered for local replies during this encode
    /// (removed again if the encode fails).
    registered: Vec<u64>,
    /// Replies decoded on some node of this process and forwarded in this
    /// message: their duty to answer goes with the message once it is
    /// queued, and is dropped (the asker told `NoReply`) if it is not.
    forwarded: Vec<(Arc<Shared>, String)>,
}

struct DecodeCtx {
    shared: Arc<Shared>,
    /// The reply subjects of replies decoded and then dropped during this
    /// decode (a later field failed, or a `Deserialize` impl threw one
    /// away): `decode` answers them once it knows the outcome.
    discarded: Vec<String>,
}

/// An encoded message, ready to publish: [`publish`](Self::publish) it.
/// Dropped unpublished, the replies forwarded in it are dropped (their
/// askers get `NoReply`).
pub(crate) struct Encoded {
    /// The tag's room (with a cluster key), then the body.
    payload: Vec<u8>,
    /// The pending entries of the local replies inside.
    pub(crate) registered: Vec<u64>,
    forwarded: Vec<(Arc<Shared>, String)>,
}

impl Encoded {
    /// The reply subject of the first local reply inside, if any (the NATS
    /// reply subject of a tell, so that no-responders reaches it).
    pub(crate) fn first_reply_subject(&self, shared: &Shared) -> Option<String> {
        self.registered
            .first()
            .map(|id| shared.reply_subject_of(*id))
    }

    /// Queues the message on `subject` (in order with everything else the
    /// node sends); the replies forwarded in it are settled here: their
    /// answer now comes from the receiver.
    ///
    /// Refused past `outbound-capacity` ([`RemoteError::OutboundFull`]):
    /// then nothing is queued, and the replies forwarded in it are dropped
    /// (their askers told `NoReply`, as far as their own queues allow).
    pub(crate) fn publish(
        mut self,
        shared: &Shared,
        subject: String,
        reply: Option<String>,
    ) -> Result<(), RemoteError> {
        shared.send_user(shared.out_encoded(subject, reply, std::mem::take(&mut self.payload)))?;
        for (owner, _) in std::mem::take(&mut self.forwarded) {
            owner.reply_settled();
        }
        Ok(())
    }
}

impl Encoded {
    /// The body alone (without the tag's room), for a reliable producer's
    /// buffer: the replies forwarded in it are settled here, as by
    /// [`publish`](Self::publish) (the producer delivers it or keeps it).
    pub(crate) fn into_body(mut self, shared: &Shared) -> Bytes {
        let payload = std::mem::take(&mut self.payload);
        for (owner, _) in std::mem::take(&mut self.forwarded) {
            owner.reply_settled();
        }
        Bytes::from(payload).slice(shared.tag_len()..)
    }
}

impl Drop for Encoded {
    fn drop(&mut self) {
        drop_forwarded(std::mem::take(&mut self.forwarded));
    }
}

/// Replies disarmed for a message that is not sent: their askers hear
/// "dropped" (`NoReply`) at once, as for any reply dropped unsent.
fn drop_forwarded(forwarded: Vec<(Arc<Shared>, String)>) {
    for (owner, subject) in forwarded {
        owner.send_reply(owner.error_out(subject, "dropped"));
        owner.reply_settled();
    }
}

/// Encodes `value` for `shared`'s connection: postcard, then the size
/// check against the server's max payload. Local replies inside are
/// registered (and unregistered on failure); replies forwarded inside are
/// handed to the message only when it is published (on failure their
/// askers get `NoReply` at once).
pub(crate) fn encode<T: Serialize>(
    shared: &Arc<Shared>,
    value: &T,
) -> Result<Encoded, RemoteError> {
    let previous = ENCODING.with(|c| {
        c.borrow_mut().replace(EncodeCtx {
            shared: Arc::clone(shared),
            registered: Vec::new(),
            forwarded: Vec::new(),
        })
    });
    // Encoded into this thread's scratch buffer, then copied into an
    // allocation of exactly its length: a `Vec<u8>` field is a sequence to
    // serde, pushed byte by byte, so encoding straight into the message's
    // own buffer grew it by doubling (a 1 KiB message in a 2 KiB
    // allocation, and the steps before it freed around it), and the
    // outbound queue and reliable buffers held about twice what they
    // counted (issue 33, item 12). Room for the tag first (with a cluster
    // key): signed in place.
    let mut scratch = SCRATCH.with(|c| std::mem::take(&mut *c.borrow_mut()));
    scratch.clear();
    scratch.resize(shared.tag_len(), 0);
    let result = postcard::to_extend(value, scratch).map(|scratch| {
        let exact = scratch.to_vec();
        if scratch.capacity() <= SCRATCH_KEPT {
            SCRATCH.with(|c| *c.borrow_mut() = scratch);
        }
        exact
    });
    let ctx = ENCODING.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous));
    let (registered, forwarded) = ctx.map(|c| (c.registered, c.forwarded)).unwrap_or_default();
    let max = shared.max_payload();
    let checked = match result {
        Ok(bytes) if bytes.len() > max => Err(RemoteError::PayloadTooLarge {
            size: bytes.len(),
            max,
        }),
        Ok(bytes) => Ok(bytes),
        Err(e) => Err(RemoteError::Encode(e.to_string())),
    };
    match checked {
        Ok(bytes) => Ok(Encoded {
            payload: bytes,
            registered,
            forwarded,
        }),
        Err(e) => {
            for id in &registered {
                shared.take_pending(*id);
            }
            drop_forwarded(forwarded);
            Err(e)
        }
    }
}

/// Decodes `bytes` as a `T` on `shared`'s node (replies inside answer
/// through it). A panic in a `Deserialize` impl is an error too.
///
/// If the decode fails after a reply inside was decoded, that reply's
/// asker gets the reason (`undecodable: ...`, a
/// [`RemoteAskError::Remote`](crate::RemoteAskError::Remote)), as does
/// `reply` (the NATS reply subject of the message, if any): never the
/// partly decoded reply's "dropped".
pub(crate) fn decode<T: DeserializeOwned>(
    shared: &Arc<Shared>,
    bytes: &[u8],
    reply: Option<&str>,
) -> Result<T, String> {
    let previous = DECODING.with(|c| {
        c.borrow_mut().replace(DecodeCtx {
            shared: Arc::clone(shared),
            discarded: Vec::new(),
        })
    });
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        postcard::from_bytes::<T>(bytes)
    }));
    let ctx = DECODING.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous));
    let discarded = ctx.map(|c| c.discarded).unwrap_or_default();
    let result = match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the message's Deserialize panicked".to_owned()),
    };
    match &result {
        // A `Deserialize` impl threw a reply away: dropped, as usual.
        Ok(_) => {
            for subject in &discarded {
                shared.send_reply(shared.error_out(subject.clone(), "dropped"));
            }
        }
        Err(reason) => {
            let why = format!("undecodable: {reason}");
            for subject in &discarded {
                shared.send_reply(shared.error_out(subject.clone(), &why));
            }
            if let Some(reply) = reply.filter(|r| !discarded.iter().any(|d| d == r)) {
                shared.send_reply(shared.error_out(reply.to_owned(), &why));
            }
        }
    }
    for _ in &discarded {
        shared.reply_settled();
    }
    result
}

/// The reply half of a remote ask: put it in the request message (it is
/// `Serialize + Deserialize`, it travels as the asker's reply subject),
/// and the actor that gets the request calls [`send`](Self::send) once,
/// on whichever node it runs.
///
/// One message type serves local and remote askers, with the same
/// constructor: a local ask builds a `RemoteReply` from its [`Reply`]
/// ([`FromReply`](proscenium::FromReply)), so `actor.ask(Cmd::Get,
/// timeout)` works on the local actor, on a
/// [`RemoteRef`](crate::RemoteRef), and on a `RemoteRef` adapted to an
/// `ActorRef` (the reply then comes back over NATS). A local [`Reply`]
/// also converts by hand (`RemoteReply::from(reply)`).
///
/// Dropped without a `send`, the asker gets
/// [`RemoteAskError::NoReply`](crate::RemoteAskError::NoReply) at once.
/// Put inside another message and sent on (to an actor on any node), the
/// duty to answer goes with it: the receiver answers the original asker.
/// If that message cannot be sent (over the max payload, an encode
/// error), the reply is dropped with it: `NoReply` at once. If it reaches
/// a node that cannot decode it, the asker gets
/// [`RemoteAskError::Remote`](crate::RemoteAskError::Remote) with the
/// reason.
pub struct RemoteReply<R: Send + 'static> {
    inner: Inner<R>,
}

enum Inner<R: Send + 'static> {
    /// Answer by publishing to `subject`. `armed`: made by decoding on the
    /// node that must answer (sends and drop notices go out); not armed: the
    /// asker's own copy, inert, or one forwarded to another node inside a
    /// message (the duty to answer went with it).
    Remote {
        subject: String,
        shared: Option<Arc<Shared>>,
        armed: AtomicBool,
    },
    /// A local asker's reply, moved out when the message is encoded.
    Local(Mutex<Option<Reply<R>>>),
    /// Sent or dropped.
    Done,
}

impl<R: Send + 'static> RemoteReply<R> {
    pub(crate) fn to_subject(subject: String) -> RemoteReply<R> {
        RemoteReply {
            inner: Inner::Remote {
                subject,
                shared: None,
                armed: AtomicBool::new(false),
            },
        }
    }
}

impl<R: Serialize + Send + 'static> RemoteReply<R> {
    /// Answers the request. A remote asker gets the value over NATS
    /// (if it cannot be encoded or is over the max payload, the asker
    /// gets [`RemoteAskError::Remote`](crate::RemoteAskError::Remote)
    /// with the reason); a local asker gets it directly.
    pub fn send(mut self, value: R) {
        match std::mem::replace(&mut self.inner, Inner::Done) {
            Inner::Remote {
                subject,
                shared: Some(shared),
                armed,
                // Relaxed: only this value (one owner) writes and reads it.
            } if armed.load(Ordering::Relaxed) => {
                match encode(&shared, &value) {
                    Ok(encoded) => {
                        if encoded.publish(&shared, subject, None).is_err() {
                            shared.lanes.note_dropped_reply();
                        }
                    }
                    Err(e) => shared.send_reply(shared.error_out(subject, &e.to_string())),
                }
                shared.reply_settled();
            }
            Inner::Local(slot) => {
                if let Some(reply) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    reply.send(value);
                }
            }
            // The asker's own copy: nobody waits on it.
            _ => {}
        }
    }

    /// Whether the asker may still be waiting: always `true` for a remote
    /// asker (its timeout is on its node), [`Reply::is_pending`] for a
    /// local one.
    pub fn is_pending(&self) -> bool {
        match &self.inner {
            Inner::Remote { .. } => true,
            Inner::Local(slot) => slot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(Reply::is_pending),
            Inner::Done => false,
        }
    }
}

impl<R: Send + 'static> From<Reply<R>> for RemoteReply<R> {
    fn from(reply: Reply<R>) -> RemoteReply<R> {
        RemoteReply {
            inner: Inner::Local(Mutex::new(Some(reply))),
        }
    }
}

/// A local ask's [`Reply`] wrapped: `actor.ask(Cmd::Get, timeout)` on a
/// local actor whose message takes a `RemoteReply` (the same message a
/// [`RemoteRef`](crate::RemoteRef) asks with).
impl<R: Send + 'static> proscenium::FromReply for RemoteReply<R> {
    type Value = R;
    #[inline]
    fn from_reply(reply: Reply<R>) -> Self {
        RemoteReply::from(reply)
    }
}

impl<R: Send + 'static> Drop for RemoteReply<R> {
    fn drop(&mut self) {
        if let Inner::Remote {
            subject,
            shared: Some(shared),
            armed,
        } = &mut self.inner
        {
            // Relaxed: only this value (one owner) writes and reads it.
            if !armed.load(Ordering::Relaxed) {
                return;
            }
            // Dropped inside the decode that made it (a later field
            // failed): the decode tells the asker why, once it knows.
            let subject = std::mem::take(subject);
            let Some(subject) = hand_to_decode(shared, subject) else {
                return;
            };
            shared.send_reply(shared.error_out(subject, "dropped"));
            shared.reply_settled();
        }
    }
}

/// Hands a reply dropped during a decode on its node to that decode
/// (`None`); outside one, gives the subject back.
fn hand_to_decode(shared: &Arc<Shared>, subject: String) -> Option<String> {
    let mut subject = Some(subject);
    // `try_with`: a reply dropped while the thread's locals are torn down
    // is dropped as usual.
    let _ = DECODING.try_with(|c| {
        if let Ok(mut ctx) = c.try_borrow_mut() {
            if let Some(ctx) = ctx.as_mut().filter(|ctx| Arc::ptr_eq(&ctx.shared, shared)) {
                ctx.discarded.extend(subject.take());
            }
        }
    });
    subject
}

impl<R: Send + 'static> fmt::Debug for RemoteReply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.inner {
            Inner::Remote { subject, .. } => subject.as_str(),
            Inner::Local(_) => "local",
            Inner::Done => "done",
        };
        f.debug_tuple("RemoteReply").field(&kind).finish()
    }
}

impl<R: DeserializeOwned + Send + 'static> Serialize for RemoteReply<R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        match &self.inner {
            Inner::Remote {
                subject,
                shared,
                armed,
            } => {
                // Forwarded in a message this node encodes: the duty to
                // answer goes with the message (its encode settles it
                // once the message is queued, or tells the asker
                // "dropped" if it cannot be sent), and this copy's drop
                // must not tell the asker "dropped". Serialized by anyone
                // else (a log, say), it stays armed here.
                if let Some(shared) = shared {
                    ENCODING.with(|c| {
                        if let Some(ctx) = c.borrow_mut().as_mut() {
                            // Relaxed: the flag is only read by this value's own drop.
                            if armed.swap(false, Ordering::Relaxed) {
                                ctx.forwarded.push((Arc::clone(shared), subject.clone()));
                            }
                        }
                    });
                }
                serializer.serialize_str(subject)
            }
            Inner::Local(slot) => {
                let subject = ENCODING.with(|c| {
                    let mut ctx = c.borrow_mut();
                    let ctx = ctx.as_mut().ok_or_else(|| {
                        S::Error::custom("a RemoteReply can only be encoded by proscenium-remote")
                    })?;
                    let reply = slot
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take()
                        .ok_or_else(|| S::Error::custom("this RemoteReply was already sent"))?;
                    let (id, subject) = ctx.shared.new_reply_subject();
                    ctx.shared
                        .put_pending(id, local_pending(ctx.shared.clone(), reply));
                    ctx.registered.push(id);
                    Ok(subject)
                })?;
                serializer.serialize_str(&subject)
            }
            Inner::Done => Err(S::Error::custom("this RemoteReply was already sent")),
        }
    }
}

/// Where the answer to a local asker's reply goes: decoded and sent to
/// the `Reply`; a failure drops it (the asker gets `NoReply`).
fn local_pending<R: DeserializeOwned + Send + 'static>(
    shared: Arc<Shared>,
    reply: Reply<R>,
) -> Pending {
    let alive = Arc::new(Mutex::new(Some(reply)));
    let check = Arc::clone(&alive);
    Pending {
        deliver: Box::new(move |outcome| {
            let reply = alive.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let (Some(reply), Ok(msg)) = (reply, outcome) {
                if msg.status.is_none()
                    && msg
                        .headers
                        .as_ref()
                        .and_then(|h| h.get(ERROR_HEADER))
                        .is_none()
                {
                    match decode::<R>(&shared, &msg.payload, None) {
                        Ok(value) => reply.send(value),
                        Err(reason) => tracing::warn!(%reason, "a reply could not be decoded"),
                    }
                }
            }
        }),
        alive: Some(Box::new(move || {
            check
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(Reply::is_pending)
        })),
        // The local asker has its own timeout; the heartbeat's sweep drops
        // the entry once it gave up.
        deadline: None,
    }
}

impl<'de, R: Send + 'static> Deserialize<'de> for RemoteReply<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let subject = String::deserialize(deserializer)?;
        let shared = DECODING
            .with(|c| c.borrow().as_ref().map(|ctx| Arc::clone(&ctx.shared)))
            .ok_or_else(|| {
                D::Error::custom("a RemoteReply can only be decoded by proscenium-remote")
            })?;
        shared.reply_armed();
        Ok(RemoteReply {
            inner: Inner::Remote {
                subject,
                shared: Some(shared),
                armed: AtomicBool::new(true),
            },
        })
    }
}
