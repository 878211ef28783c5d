//! The stash: an actor sets user messages aside ([`Context::stash`]) and
//! takes them all back later ([`Context::unstash_all`]), as Akka's `Stash`,
//! typically while it waits for its initialization to finish.
//!
//! Unstashed messages are handled before any message still in the mailbox,
//! in the order they were stashed (system signals still come first). The
//! stash is bounded by [`Props::with_stash_capacity`](crate::Props::with_stash_capacity)
//! (unbounded by default, as Akka's default `stash-capacity`); a full stash
//! hands the message back in a [`StashOverflowError`]. On restart the stash
//! is unstashed for the new instance; when the actor stops, what it still
//! holds goes to dead letters.

use std::collections::VecDeque;
use std::fmt;

use crate::api::actor::Actor;
use crate::api::context::Context;
use crate::patterns::timers::Extras;

/// The stash is full: the message is handed back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct StashOverflowError<M>(pub M);

impl<M> StashOverflowError<M> {
    /// Takes the message back.
    pub fn into_inner(self) -> M {
        self.0
    }
}

impl<M> fmt::Debug for StashOverflowError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StashOverflowError { .. }")
    }
}

impl<M> fmt::Display for StashOverflowError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the stash is full")
    }
}

impl<M> std::error::Error for StashOverflowError<M> {}

/// An actor's stash, and the unstashed messages not handled yet.
pub(crate) struct Stash<M> {
    capacity: Option<usize>,
    stashed: VecDeque<M>,
    /// Handed out by the driver before the mailbox's next user message.
    unstashed: VecDeque<M>,
}

impl<M> Stash<M> {
    pub(crate) fn new(capacity: Option<usize>) -> Stash<M> {
        Stash {
            capacity,
            stashed: VecDeque::new(),
            unstashed: VecDeque::new(),
        }
    }

    /// Moves the stash behind what was unstashed before and not handled
    /// yet (both are older than anything still in the mailbox).
    fn unstash_all(&mut self) -> usize {
        let n = self.stashed.len();
        self.unstashed.append(&mut self.stashed);
        n
    }
}

impl<A: Actor> Context<A> {
    /// Sets the message being handled aside (a handler takes its message by
    /// value, so it hands it back here), to be handled again after
    /// [`unstash_all`](Self::unstash_all). A full stash hands it back.
    ///
    /// ```
    /// # #![allow(dead_code)]
    /// # use proscenium::prelude::*;
    /// enum Msg { Ready, Work(u32) }
    /// struct Lazy { ready: bool, done: Vec<u32> }
    /// impl Actor for Lazy {
    ///     type Msg = Msg;
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
    ///         match msg {
    ///             Msg::Ready => {
    ///                 self.ready = true;
    ///                 ctx.unstash_all();
    ///             }
    ///             Msg::Work(n) if self.ready => self.done.push(n),
    ///             // Not ready yet: keep it for later; a full stash fails the actor.
    ///             work => ctx.stash(work)?,
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// let props = Props::new(|| Lazy { ready: false, done: vec![] }).with_stash_capacity(100);
    /// # let _ = props;
    /// ```
    pub fn stash(&mut self, msg: A::Msg) -> Result<(), StashOverflowError<A::Msg>> {
        let stash = &mut self.extras_mut().stash;
        if stash.capacity.is_some_and(|c| stash.stashed.len() >= c) {
            return Err(StashOverflowError(msg));
        }
        stash.stashed.push_back(msg);
        Ok(())
    }

    /// Takes every stashed message back: they are handled next, before any
    /// message still in the mailbox, in the order they were stashed.
    /// Returns how many there were.
    pub fn unstash_all(&mut self) -> usize {
        self.extras_if_any()
            .map_or(0, |x| x.stash.unstash_all())
    }

    /// Messages in the stash now.
    pub fn stash_len(&self) -> usize {
        self.extras().map_or(0, |x| x.stash.stashed.len())
    }

    // ---- for the driver ----------------------------------------------------

    pub(crate) fn extras_mut(&mut self) -> &mut Extras<A::Msg> {
        self.rare_mut()
            .extras
            .get_or_insert_with(|| Box::new(Extras::new(None)))
    }

    /// Whether unstashed messages wait (one branch for most actors).
    #[inline]
    pub(crate) fn has_unstashed(&self) -> bool {
        self.extras()
            .is_some_and(|x| !x.stash.unstashed.is_empty())
    }

    pub(crate) fn next_unstashed(&mut self) -> Option<A::Msg> {
        self.extras_if_any()
            .and_then(|x| x.stash.unstashed.pop_front())
    }

    /// Everything stashed or unstashed and not handled, oldest first (the
    /// actor is stopping: for dead letters).
    pub(crate) fn take_stash(&mut self) -> Vec<A::Msg> {
        let Some(x) = self.extras_if_any() else {
            return Vec::new();
        };
        x.stash.unstash_all();
        x.stash.unstashed.drain(..).collect()
    }
}
