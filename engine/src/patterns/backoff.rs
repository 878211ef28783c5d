//! The BackoffSupervisor pattern (Akka's `Akka.Pattern.BackoffSupervisor`):
//! a supervisor that starts one child again after it stopped (on-stop) or
//! failed (on-failure), each time after a longer delay, with jitter, a
//! manual or automatic reset of the delay, a supervisor strategy, an
//! optional limit on restarts and an optional final stop message.
//!
//! The supervisor forwards every [`BackoffMsg::Msg`] to the current child;
//! while the child is down they go to dead letters. Each scheduled restart
//! is published on the event stream as a [`BackoffRestartScheduled`]. The
//! delays come from the scheduler's timers; a pending timer is cancelled
//! when the supervisor stops, so none outlives it.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proscenium_scheduler::TimerHandle;

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::ask::Reply;
use crate::api::context::Context;
use crate::error::SpawnError;
use crate::runtime::signal::Envelope;
use crate::runtime::system::ActorSystem;
use crate::supervision::failure::Outcome;
use crate::supervision::strategy::{Directive, SupervisorStrategy};

/// The delay before restart number `restart_count` (0-based, counted since
/// the last reset): `min(max, min_backoff * 2^restart_count) * (1 +
/// random_factor * r)`, as Akka's `BackoffSupervisor.calculateDelay`. `r`
/// is the random draw in `[0, 1)` (clamped to it); the jitter may take the
/// delay above `max_backoff`, by at most `random_factor` of it.
///
/// ```
/// use proscenium::backoff_delay;
/// use std::time::Duration;
///
/// let s = Duration::from_secs;
/// let delays: Vec<Duration> = (0..6).map(|n| backoff_delay(n, s(3), s(30), 0.2, 0.0)).collect();
/// assert_eq!(delays, [s(3), s(6), s(12), s(24), s(30), s(30)]);
/// assert_eq!(backoff_delay(1, s(3), s(30), 0.2, 0.5), Duration::from_millis(6600));
/// ```
pub fn backoff_delay(
    restart_count: u32,
    min_backoff: Duration,
    max_backoff: Duration,
    random_factor: f64,
    r: f64,
) -> Duration {
    let base = 2u32
        .checked_pow(restart_count)
        .and_then(|factor| min_backoff.checked_mul(factor))
        .map_or(max_backoff, |d| d.min(max_backoff));
    let jitter = random_factor * r.clamp(0.0, 1.0);
    if !jitter.is_finite() || jitter <= 0.0 {
        return base;
    }
    // `jitter` is below 1 for a valid factor, so the product cannot
    // overflow; `min` keeps a bad factor from panicking in `mul_f64`.
    base.saturating_add(base.mul_f64(jitter.min(1.0)))
}

/// When the supervisor restarts its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum BackoffMode {
    /// Whenever the child stops (Akka's `Backoff.OnStop`): it stopped
    /// itself, or its failure was answered with Stop.
    OnStop,
    /// When the child fails and the strategy decides Restart (Akka's
    /// `Backoff.OnFailure`): the child is stopped and started again after
    /// the delay. A child that stops otherwise stops the supervisor too.
    OnFailure,
}

/// How the restart counter (and so the delay) goes back to its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum BackoffReset {
    /// The child sends [`BackoffMsg::Reset`] to its parent (see
    /// [`BackoffSupervisor::reset`]).
    Manual,
    /// The counter resets once a child has run this long without stopping
    /// or failing.
    Auto(Duration),
}

/// Numbers every timer a backoff supervisor arms (0 is never used).
static TIMER_TOKENS: AtomicU64 = AtomicU64::new(1);

type FinalStop<M> = Arc<dyn Fn(&M) -> bool + Send + Sync>;

/// How a [`BackoffSupervisor`] is set up (Akka's `BackoffOptions`); make
/// its props with [`props`](Self::props).
///
/// ```
/// use proscenium::prelude::*;
/// use std::time::Duration;
///
/// struct Echo;
/// impl Actor for Echo {
///     type Msg = (u32, Reply<u32>);
///     fn receive(&mut self, _: &mut Context<Self>, (n, reply): Self::Msg) -> Outcome {
///         reply.send(n);
///         Ok(())
///     }
/// }
///
/// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let props = BackoffOptions::on_stop(
///     Props::new(|| Echo),
///     "myEcho",
///     Duration::from_secs(3),
///     Duration::from_secs(30),
///     0.2,
/// )
/// .with_manual_reset()
/// .with_default_stopping_strategy()
/// .props();
/// let supervisor = system.spawn(props, "echoSupervisor")?;
/// let answer = supervisor.ask(|r| BackoffMsg::Msg((7, r)), Duration::from_secs(1)).wait();
/// assert_eq!(answer, Ok(7));
/// system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BackoffOptions<A: Actor> {
    mode: BackoffMode,
    child_props: Props<A>,
    child_name: String,
    min_backoff: Duration,
    max_backoff: Duration,
    random_factor: f64,
    reset: BackoffReset,
    strategy: SupervisorStrategy,
    max_retries: Option<u32>,
    final_stop: Option<FinalStop<A::Msg>>,
}

impl<A: Actor> BackoffOptions<A> {
    /// Restarts the child after it stopped, after `min_backoff`, then twice
    /// as long each time up to `max_backoff`, each delay lengthened by up to
    /// `random_factor` of itself at random. Defaults: auto reset after
    /// `min_backoff` (as Akka), the default strategy (restart in place on
    /// failure), no restart limit.
    ///
    /// # Panics
    ///
    /// If `max_backoff < min_backoff` or `random_factor` is not in `[0, 1]`
    /// (as Akka's `require`s).
    pub fn on_stop(
        child_props: Props<A>,
        child_name: &str,
        min_backoff: Duration,
        max_backoff: Duration,
        random_factor: f64,
    ) -> BackoffOptions<A> {
        BackoffOptions::new(
            BackoffMode::OnStop,
            child_props,
            child_name,
            min_backoff,
            max_backoff,
            random_factor,
        )
    }

    /// Restarts the child after a failure the strategy answers with
    /// Restart, with the delays of [`on_stop`](Self::on_stop); the child is
    /// stopped meanwhile. If it stops for another reason, the supervisor
    /// stops too.
    ///
    /// # Panics
    ///
    /// As [`on_stop`](Self::on_stop).
    pub fn on_failure(
        child_props: Props<A>,
        child_name: &str,
        min_backoff: Duration,
        max_backoff: Duration,
        random_factor: f64,
    ) -> BackoffOptions<A> {
        BackoffOptions::new(
            BackoffMode::OnFailure,
            child_props,
            child_name,
            min_backoff,
            max_backoff,
            random_factor,
        )
    }

    fn new(
        mode: BackoffMode,
        child_props: Props<A>,
        child_name: &str,
        min_backoff: Duration,
        max_backoff: Duration,
        random_factor: f64,
    ) -> BackoffOptions<A> {
        assert!(
            max_backoff >= min_backoff,
            "max_backoff must be at least min_backoff"
        );
        assert!(
            (0.0..=1.0).contains(&random_factor),
            "random_factor must be between 0.0 and 1.0"
        );
        BackoffOptions {
            mode,
            child_props,
            child_name: child_name.to_owned(),
            min_backoff,
            max_backoff,
            random_factor,
            reset: BackoffReset::Auto(min_backoff),
            strategy: SupervisorStrategy::default(),
            max_retries: None,
            final_stop: None,
        }
    }

    /// The child must send [`BackoffMsg::Reset`] to its parent to reset the
    /// backoff (see [`BackoffSupervisor::reset`]).
    pub fn with_manual_reset(mut self) -> BackoffOptions<A> {
        self.reset = BackoffReset::Manual;
        self
    }

    /// The backoff resets once a child has run for `quiet` without stopping
    /// or failing.
    pub fn with_auto_reset(mut self, quiet: Duration) -> BackoffOptions<A> {
        self.reset = BackoffReset::Auto(quiet);
        self
    }

    /// How the child's failures are decided. On-failure: a Restart becomes
    /// a stop and a restart after the backoff; the other directives apply
    /// as they are.
    pub fn with_supervisor_strategy(mut self, strategy: SupervisorStrategy) -> BackoffOptions<A> {
        self.strategy = strategy;
        self
    }

    /// Stop the child at any failure ([`SupervisorStrategy::stopping`]).
    pub fn with_default_stopping_strategy(self) -> BackoffOptions<A> {
        self.with_supervisor_strategy(SupervisorStrategy::stopping())
    }

    /// At most `n` restarts after the last reset (Akka's
    /// `maxNrOfRetries`); when the child goes down once more, the
    /// supervisor stops. Without it, the strategy's
    /// [`max_retries`](SupervisorStrategy::max_retries), if set, is the
    /// limit (as in Akka).
    pub fn with_max_retries(mut self, n: u32) -> BackoffOptions<A> {
        self.max_retries = Some(n);
        self
    }

    /// A message for which `is_final` holds is forwarded to the child, and
    /// when the child then stops the supervisor stops too instead of
    /// restarting it; such a message arriving while the child is down stops
    /// the supervisor at once.
    pub fn with_final_stop_message(
        mut self,
        is_final: impl Fn(&A::Msg) -> bool + Send + Sync + 'static,
    ) -> BackoffOptions<A> {
        self.final_stop = Some(Arc::new(is_final));
        self
    }

    /// The props of the supervisor these options describe.
    pub fn props(self) -> Props<BackoffSupervisor<A>> {
        BackoffSupervisor::props(self)
    }
}

impl<A: Actor> Clone for BackoffOptions<A> {
    fn clone(&self) -> BackoffOptions<A> {
        BackoffOptions {
            mode: self.mode,
            child_props: self.child_props.clone(),
            child_name: self.child_name.clone(),
            min_backoff: self.min_backoff,
            max_backoff: self.max_backoff,
            random_factor: self.random_factor,
            reset: self.reset,
            strategy: self.strategy.clone(),
            max_retries: self.max_retries,
            final_stop: self.final_stop.clone(),
        }
    }
}

impl<A: Actor> fmt::Debug for BackoffOptions<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackoffOptions")
            .field("mode", &self.mode)
            .field("child_name", &self.child_name)
            .field("min_backoff", &self.min_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("random_factor", &self.random_factor)
            .field("reset", &self.reset)
            .field("strategy", &self.strategy)
            .field("max_retries", &self.max_retries)
            .field("final_stop", &self.final_stop.is_some())
            .finish()
    }
}

/// What a [`BackoffSupervisor`] of an actor with messages `M` handles.
pub enum BackoffMsg<M: Send + 'static> {
    /// A message for the child: forwarded to it, or to dead letters while
    /// it is down. `From<M>` makes one: `supervisor.tell(msg.into())`.
    Msg(M),
    /// Resets the backoff, in manual-reset mode (otherwise it is published
    /// as unhandled). The child sends it with [`BackoffSupervisor::reset`].
    Reset,
    /// Answers with the current child, `None` while it is down.
    GetCurrentChild(Reply<Option<ActorRef<M>>>),
    /// Answers with the restarts since the last reset.
    GetRestartCount(Reply<u32>),
    /// The supervisor's own timers; only the supervisor makes these.
    Timer(BackoffTimer),
}

impl<M: Send + 'static> From<M> for BackoffMsg<M> {
    fn from(msg: M) -> BackoffMsg<M> {
        BackoffMsg::Msg(msg)
    }
}

impl<M: Send + 'static> ActorRef<BackoffMsg<M>> {
    /// A plain `ActorRef<M>` in front of this backoff supervisor: what it
    /// is told or asked goes to the current child (as [`BackoffMsg::Msg`];
    /// to dead letters while the child is down), whichever incarnation that
    /// is, so whoever holds it sees an actor of `M`s, not the pattern. It
    /// stops when the supervisor terminates.
    ///
    /// Cost: it is an adapter ([`ActorRef::adapt`]), one extra hop per
    /// message on top of the supervisor's own forwarding, and one small
    /// actor per call (make it once and clone it); see the router's
    /// `message_ref` for why no cheaper route exists and for ordering.
    ///
    /// ```
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// # struct Echo;
    /// # impl Actor for Echo {
    /// #     type Msg = (u32, Reply<u32>);
    /// #     fn receive(&mut self, _: &mut Context<Self>, (n, r): Self::Msg) -> Outcome { r.send(n); Ok(()) }
    /// # }
    /// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let s = Duration::from_secs;
    /// let props = BackoffOptions::on_stop(Props::new(|| Echo), "echo", s(1), s(10), 0.2).props();
    /// let supervisor = system.spawn(props, "echoSupervisor")?;
    /// let echo: ActorRef<(u32, Reply<u32>)> = supervisor.message_ref()?;
    /// assert_eq!(echo.ask(|r| (7, r), s(1)).wait(), Ok(7));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn message_ref(&self) -> Result<ActorRef<M>, SpawnError> {
        self.adapt(BackoffMsg::Msg)
    }
}

impl<M: Send + 'static> fmt::Debug for BackoffMsg<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackoffMsg::Msg(_) => f.write_str("Msg(..)"),
            BackoffMsg::Reset => f.write_str("Reset"),
            BackoffMsg::GetCurrentChild(_) => f.write_str("GetCurrentChild"),
            BackoffMsg::GetRestartCount(_) => f.write_str("GetRestartCount"),
            BackoffMsg::Timer(t) => f.debug_tuple("Timer").field(t).finish(),
        }
    }
}

/// A timer of a [`BackoffSupervisor`] fired; it cannot be made outside the
/// crate.
#[derive(Debug)]
pub struct BackoffTimer {
    kind: TimerKind,
    /// Which arming it answers (a stale one is ignored).
    token: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimerKind {
    StartChild,
    ResetCount,
}

/// A restart was scheduled; published on the event stream by a
/// [`BackoffSupervisor`], and by an actor whose own
/// [`Supervision`](crate::Supervision) restarts it with backoff (then
/// `supervisor` is that actor).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BackoffRestartScheduled {
    /// The backoff supervisor (or the actor restarting itself).
    pub supervisor: ActorId,
    /// The restart's number since the last reset (0-based): the `n` of the
    /// delay formula (see [`backoff_delay`]).
    pub attempt: u32,
    /// How long the supervisor waits before starting the child.
    pub delay: Duration,
}

/// Publishes a [`BackoffRestartScheduled`] if anyone listens (the id is
/// built only then).
pub(crate) fn publish_restart_scheduled(
    system: &ActorSystem,
    supervisor: impl FnOnce() -> ActorId,
    attempt: u32,
    delay: Duration,
) {
    let events = system.event_stream();
    if events.has_subscribers::<BackoffRestartScheduled>() {
        events.publish(BackoffRestartScheduled {
            supervisor: supervisor(),
            attempt,
            delay,
        });
    }
}

/// Supervises one child and starts it again after a growing delay, as
/// [`BackoffOptions`] describes: forwards [`BackoffMsg::Msg`] to the child
/// (to dead letters while it is down), publishes a
/// [`BackoffRestartScheduled`] for each restart it schedules, and cancels
/// its pending timer when it stops.
pub struct BackoffSupervisor<A: Actor> {
    options: BackoffOptions<A>,
    child: Option<ActorRef<A::Msg>>,
    restart_count: u32,
    /// Set by the on-failure decider when it turned a Restart into a Stop:
    /// the child's termination then schedules a restart. Written and read
    /// only in this actor's runs (the decider runs in the supervisor's own
    /// run), which the mailbox's run hand-off orders.
    restart_on_termination: Arc<AtomicBool>,
    final_stop_received: bool,
    restart_timer: Option<TimerHandle>,
    reset_timer: Option<TimerHandle>,
    /// The token of the timer armed last: only its tick counts (a stale
    /// one is recognised and ignored).
    last_token: u64,
    rng: XorShift,
}

impl<A: Actor> BackoffSupervisor<A> {
    /// The props of a backoff supervisor (as [`BackoffOptions::props`]).
    pub fn props(options: BackoffOptions<A>) -> Props<BackoffSupervisor<A>> {
        Props::new(move || BackoffSupervisor {
            options: options.clone(),
            child: None,
            restart_count: 0,
            restart_on_termination: Arc::new(AtomicBool::new(false)),
            final_stop_received: false,
            restart_timer: None,
            reset_timer: None,
            last_token: 0,
            rng: XorShift::seeded(),
        })
    }

    /// Sends [`BackoffMsg::Reset`] to the parent of the actor whose context
    /// this is; `false` if that parent is not a backoff supervisor of this
    /// actor type.
    ///
    /// ```
    /// # #![allow(dead_code)]
    /// use proscenium::prelude::*;
    ///
    /// struct Connection;
    /// impl Actor for Connection {
    ///     type Msg = ();
    ///     fn receive(&mut self, ctx: &mut Context<Self>, _: ()) -> Outcome {
    ///         // Handled a message successfully: back off from scratch next time.
    ///         BackoffSupervisor::reset(ctx);
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn reset(ctx: &Context<A>) -> bool {
        let Some(parent) = ctx
            .parent()
            .and_then(ActorId::downcast::<BackoffMsg<A::Msg>>)
        else {
            return false;
        };
        parent.tell(BackoffMsg::Reset);
        true
    }

    fn start_child(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let child = ctx.spawn(self.options.child_props.clone(), &self.options.child_name)?;
        ctx.watch(&child.id());
        self.child = Some(child);
        if let BackoffReset::Auto(quiet) = self.options.reset {
            self.reset_timer = Some(self.arm(ctx, quiet, TimerKind::ResetCount));
        }
        Ok(())
    }

    fn arm(&mut self, ctx: &Context<Self>, delay: Duration, kind: TimerKind) -> TimerHandle {
        // Relaxed: only uniqueness matters. Unique in the process, so a
        // tick that was already queued when an earlier incarnation of this
        // supervisor cancelled its timers never matches a later arming.
        let token = TIMER_TOKENS.fetch_add(1, Ordering::Relaxed);
        self.last_token = token;
        let me = ctx.self_ref();
        ctx.system().scheduler_handle().schedule(delay, move || {
            me.tell(BackoffMsg::Timer(BackoffTimer { kind, token }));
        })
    }

    /// The child went down: restart it after the backoff, unless the limit
    /// of restarts is reached.
    fn schedule_restart(&mut self, ctx: &mut Context<Self>) {
        let next = self.restart_count.saturating_add(1);
        let limit = (self.options.max_retries).or_else(|| self.options.strategy.retry_limit());
        if limit.is_some_and(|max| next > max) {
            tracing::debug!(
                supervisor = %ctx.id(),
                restarts = next,
                "stopping: the child went down more often than the restarts allowed"
            );
            ctx.stop_self();
            return;
        }
        let o = &self.options;
        let delay = backoff_delay(
            self.restart_count,
            o.min_backoff,
            o.max_backoff,
            o.random_factor,
            self.rng.next_unit(),
        );
        self.restart_timer = Some(self.arm(ctx, delay, TimerKind::StartChild));
        // Published once armed, so a subscriber sees the timer pending.
        publish_restart_scheduled(ctx.system(), || ctx.id(), self.restart_count, delay);
        self.restart_count = next;
    }

    fn forward(&mut self, ctx: &mut Context<Self>, msg: A::Msg) {
        let is_final = self.options.final_stop.as_ref().is_some_and(|f| f(&msg));
        match &self.child {
            Some(child) => {
                self.final_stop_received |= is_final;
                child.tell(msg);
            }
            None => {
                ctx.system().dead_envelope(ctx.id(), Envelope::Msg(msg));
                if is_final {
                    ctx.stop_self();
                }
            }
        }
    }

    fn timer(&mut self, ctx: &mut Context<Self>, timer: BackoffTimer) -> Outcome {
        if timer.token != self.last_token {
            // Stale: armed before a later timer (each kind is armed only
            // after the other's turn is over), or cancelled too late.
            return Ok(());
        }
        match timer.kind {
            TimerKind::StartChild => {
                if self.child.is_none() && self.restart_timer.take().is_some() {
                    self.start_child(ctx)?;
                }
            }
            TimerKind::ResetCount => {
                // The current child has run for the whole quiet period.
                if self.child.is_some() && self.reset_timer.is_some() {
                    self.reset_timer = None;
                    self.restart_count = 0;
                }
            }
        }
        Ok(())
    }

    fn cancel_timers(&mut self) {
        for timer in [self.restart_timer.take(), self.reset_timer.take()]
            .into_iter()
            .flatten()
        {
            timer.cancel();
        }
    }
}

impl<A: Actor> Actor for BackoffSupervisor<A> {
    type Msg = BackoffMsg<A::Msg>;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.start_child(ctx)
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: BackoffMsg<A::Msg>) -> Outcome {
        match msg {
            BackoffMsg::Msg(m) => self.forward(ctx, m),
            BackoffMsg::Reset => match self.options.reset {
                BackoffReset::Manual => self.restart_count = 0,
                BackoffReset::Auto(_) => ctx.unhandled(BackoffMsg::<A::Msg>::Reset),
            },
            BackoffMsg::GetCurrentChild(reply) => reply.send(self.child.clone()),
            BackoffMsg::GetRestartCount(reply) => reply.send(self.restart_count),
            BackoffMsg::Timer(timer) => return self.timer(ctx, timer),
        }
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        if self.child.as_ref().map(ActorRef::id) != Some(who) {
            return Ok(()); // not the current child: nothing to do
        }
        self.child = None;
        if let Some(timer) = self.reset_timer.take() {
            timer.cancel();
        }
        let restart = match self.options.mode {
            BackoffMode::OnStop => true,
            BackoffMode::OnFailure => self.restart_on_termination.swap(false, Ordering::Relaxed),
        };
        if self.final_stop_received || !restart {
            tracing::debug!(supervisor = %ctx.id(), "stopping: the child terminated for good");
            ctx.stop_self();
        } else {
            self.schedule_restart(ctx);
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        self.cancel_timers();
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        match self.options.mode {
            BackoffMode::OnStop => self.options.strategy.clone(),
            BackoffMode::OnFailure => {
                let inner = self.options.strategy.clone();
                let flag = Arc::clone(&self.restart_on_termination);
                self.options
                    .strategy
                    .clone()
                    .decider(move |failure| match inner.decide(failure) {
                        Directive::Restart => {
                            // Relaxed: see the field; read in `on_terminated`
                            // of this same actor.
                            flag.store(true, Ordering::Relaxed);
                            Directive::Stop
                        }
                        other => other,
                    })
            }
        }
    }
}

impl<A: Actor> fmt::Debug for BackoffSupervisor<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackoffSupervisor")
            .field("options", &self.options)
            .field("child", &self.child)
            .field("restart_count", &self.restart_count)
            .finish_non_exhaustive()
    }
}

/// xorshift64*: the jitter needs spread, not cryptographic quality (also
/// an actor's own backoff's, `supervision/own.rs`).
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn seeded() -> XorShift {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // Each `RandomState` has its own keys (random per thread, then
        // incremented per call), so supervisors started in the same
        // nanosecond still draw differently. `| 1`: xorshift needs a
        // non-zero state.
        XorShift(RandomState::new().hash_one(nanos) | 1)
    }

    /// A draw in `[0, 1)`.
    pub(crate) fn next_unit(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        let bits = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        bits as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "in increasing intervals of 3, 6, 12, 24 and finally 30 seconds"
    #[test]
    fn the_delays_double_up_to_the_maximum() {
        let s = Duration::from_secs;
        let delays: Vec<Duration> = (0..8)
            .map(|n| backoff_delay(n, s(3), s(30), 0.0, 0.7))
            .collect();
        assert_eq!(
            delays,
            [s(3), s(6), s(12), s(24), s(30), s(30), s(30), s(30)]
        );
        // Far past any doubling that fits: still the maximum.
        assert_eq!(backoff_delay(40, s(3), s(30), 0.0, 0.0), s(30));
        assert_eq!(backoff_delay(u32::MAX, s(3), s(30), 0.0, 0.0), s(30));
    }

    /// "Using a randomFactor to add a little bit of additional variance to
    /// the backoff intervals": every delay within `[d, d * (1 + factor)]`.
    #[test]
    fn the_jitter_stays_within_its_bounds() {
        let s = Duration::from_secs;
        let mut rng = XorShift::seeded();
        let mut spread = false;
        for n in 0..8 {
            let d = backoff_delay(n, s(3), s(30), 0.0, 0.0);
            let high = d + d.mul_f64(0.2);
            let mut first = None;
            for r in [0.0, 0.5, 0.999_999_9]
                .into_iter()
                .chain((0..200).map(|_| rng.next_unit()))
            {
                assert!((0.0..1.0).contains(&r));
                let j = backoff_delay(n, s(3), s(30), 0.2, r);
                assert!(d <= j && j <= high, "{j:?} outside [{d:?}, {high:?}]");
                spread |= first.is_some_and(|f| f != j);
                first.get_or_insert(j);
            }
        }
        assert!(spread, "the draws vary");
        assert_eq!(
            backoff_delay(0, s(10), s(10), 1.0, 0.5),
            Duration::from_secs(15)
        );
    }

    #[test]
    fn draws_are_in_the_unit_interval_and_vary() {
        let mut a = XorShift::seeded();
        let draws: Vec<f64> = (0..1000).map(|_| a.next_unit()).collect();
        assert!(draws.iter().all(|r| (0.0..1.0).contains(r)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((0.4..0.6).contains(&mean), "{mean}");
    }
}
