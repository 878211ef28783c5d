//! An actor's own supervision: [`Supervision`], given to its
//! [`Props`](crate::Props), decides the actor's failures itself, before
//! (and instead of) its parent's [`SupervisorStrategy`](crate::SupervisorStrategy),
//! as Akka Typed's `Behaviors.supervise(behavior).onFailure(strategy)`
//! wraps one behaviour. The runtime (`runtime/driver.rs`) asks
//! [`OwnSupervision::decide`] when the actor fails and carries the answer
//! out with the same system messages a parent would send.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium_scheduler::TimerHandle;

use crate::observe::events::SupervisionReason;
use crate::patterns::backoff::{backoff_delay, XorShift};
use crate::supervision::failure::Failure;
use crate::supervision::strategy::RestartStats;

type OnlyWhen = Arc<dyn Fn(&Failure) -> bool + Send + Sync>;

/// How an actor handles its own failures: restart (optionally at most so
/// many times within a window), restart after a growing delay (backoff),
/// stop, or resume. Given to [`Props::with_supervision`](crate::Props::with_supervision);
/// the actor's parent then never hears of the failures it takes.
///
/// Without it, an actor's failures go to its parent's
/// [`SupervisorStrategy`](crate::SupervisorStrategy), and bounding one
/// top-level actor's restarts means writing a parent for it (or changing
/// `/user`'s strategy for every top-level actor). With it, the bound is
/// on the actor itself (Akka Typed's
/// `Behaviors.supervise(..).onFailure(SupervisorStrategy.restart.withLimit(..))`):
///
/// ```
/// use proscenium::prelude::*;
/// use std::time::Duration;
///
/// struct Connection;
/// impl Actor for Connection {
///     type Msg = ();
///     fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome {
///         Err("the peer went away".into())
///     }
/// }
///
/// // At most 3 restarts within any minute; the fourth failure stops it.
/// let props = Props::new(|| Connection)
///     .with_supervision(Supervision::restart().with_limit(3, Duration::from_secs(60)));
/// // Or: restart after 100 ms, 200 ms, 400 ms, ... up to 10 s (+ up to 20 %
/// // at random), from 100 ms again once it has run 30 s without failing.
/// let backoff = Props::new(|| Connection).with_supervision(
///     Supervision::restart_with_backoff(Duration::from_millis(100), Duration::from_secs(10), 0.2)
///         .with_reset_after(Duration::from_secs(30)),
/// );
/// # let _ = (props, backoff);
/// ```
///
/// **What it decides.** Every failure of the actor: an error or a panic
/// from a handler or a hook, an unhandled `Terminated` (a
/// [`DeathPact`](crate::DeathPact)), a failure of one of its children
/// that its own [`supervisor_strategy`](crate::Actor::supervisor_strategy)
/// escalated, and a failed start (the factory, `pre_start` or
/// `post_restart`), with these exceptions, which go to the parent as if
/// the actor had no `Supervision`:
///
/// * a failure [`only_when`](Self::only_when) does not accept;
/// * [`Killed`](crate::Killed): Kill is its sender's decision, not a
///   fault of the actor's (the parent's default decider stops it);
/// * a failed start under [`resume`](Self::resume) (there is no instance
///   to resume) or under [`restart`](Self::restart) without a limit (it
///   would likely fail again at once, forever; Akka Typed's restart
///   supervisor hands those on too). With a limit, or with backoff, a
///   failed start is restarted like any failure: the common case of a
///   resource that is not there yet.
///
/// **No Escalate.** A `Supervision` has no directive that fails the
/// parent: what it does not take goes to the parent's strategy, which
/// decides (Resume, Restart, Stop or Escalate) exactly as for an actor
/// without one, and counts that child's restarts in its own statistics.
/// The parent's strategy still covers everything else: its other
/// children's failures, and what follows from them (an all-for-one
/// parent restarts this actor too when a sibling fails; a parent that
/// restarts or stops stops or restarts its children, this one included).
///
/// **After the limit.** A restart over [`with_limit`](Self::with_limit)'s
/// bound stops the actor (as a parent's strategy over its limit does):
/// its watchers, its parent included, get `Terminated`.
///
/// **Events.** Each decision is published as a
/// [`SupervisionEvent`](crate::SupervisionEvent) whose `supervisor` and
/// `child` are both the actor (a Stop over the limit with
/// [`SupervisionReason::RestartLimitReached`]), and is logged as a
/// parent's decision is; a delayed restart is also published as a
/// [`BackoffRestartScheduled`](crate::BackoffRestartScheduled) whose
/// `supervisor` is the actor.
#[derive(Clone)]
pub struct Supervision {
    policy: Policy,
    /// At most this many restarts within the window.
    limit: Option<(u32, Duration)>,
    /// Backoff: the delay starts over once an incarnation has run this long.
    reset_after: Option<Duration>,
    only_when: Option<OnlyWhen>,
    logging: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    Resume,
    Stop,
    Restart,
    Backoff {
        min: Duration,
        max: Duration,
        random_factor: f64,
    },
}

impl Supervision {
    /// Restart the actor on failure, at once and without limit (bound it
    /// with [`with_limit`](Self::with_limit)): a new instance from the
    /// props' factory, the restart sequence of a parent's Restart, the
    /// failing message not handled again, the queued ones kept.
    pub fn restart() -> Supervision {
        Supervision::with_policy(Policy::Restart)
    }

    /// Restart the actor on failure after a delay that doubles with each
    /// restart: `min_backoff`, twice that, ... up to `max_backoff`, each
    /// lengthened by up to `random_factor` of itself at random (the delays
    /// of the [`BackoffSupervisor`](crate::BackoffSupervisor), see
    /// [`backoff_delay`](crate::backoff_delay)). Meanwhile the actor stays
    /// suspended: its messages wait in its mailbox for the new instance.
    /// The delay starts over from `min_backoff` once an incarnation has
    /// run [`with_reset_after`](Self::with_reset_after) (default:
    /// `min_backoff`, as Akka Typed) without failing. No limit on the
    /// restarts unless [`with_limit`](Self::with_limit) sets one.
    ///
    /// # Panics
    ///
    /// If `max_backoff < min_backoff` or `random_factor` is not in
    /// `[0, 1]`, as [`BackoffOptions`](crate::BackoffOptions) does.
    pub fn restart_with_backoff(
        min_backoff: Duration,
        max_backoff: Duration,
        random_factor: f64,
    ) -> Supervision {
        assert!(
            max_backoff >= min_backoff,
            "max_backoff must be at least min_backoff"
        );
        assert!(
            (0.0..=1.0).contains(&random_factor),
            "random_factor must be between 0.0 and 1.0"
        );
        Supervision::with_policy(Policy::Backoff {
            min: min_backoff,
            max: max_backoff,
            random_factor,
        })
    }

    /// Stop the actor on failure.
    pub fn stop() -> Supervision {
        Supervision::with_policy(Policy::Stop)
    }

    /// Resume the actor on failure: it keeps its state and goes on with
    /// the next message (the failing one is not handled again).
    pub fn resume() -> Supervision {
        Supervision::with_policy(Policy::Resume)
    }

    fn with_policy(policy: Policy) -> Supervision {
        Supervision {
            policy,
            limit: None,
            reset_after: None,
            only_when: None,
            logging: true,
        }
    }

    /// At most `max_retries` restarts within `within` (the window opens
    /// at the first restart it counts and a failure after it closes opens
    /// the next one, as a [`SupervisorStrategy`](crate::SupervisorStrategy)
    /// counts); the failure that asks for one more stops the actor. `0`
    /// means never restart. For [`restart`](Self::restart) and
    /// [`restart_with_backoff`](Self::restart_with_backoff) (whose
    /// restarts it counts whatever their delay); [`stop`](Self::stop) and
    /// [`resume`](Self::resume) never restart, so it changes nothing there.
    pub fn with_limit(mut self, max_retries: u32, within: Duration) -> Supervision {
        self.limit = Some((max_retries, within));
        self
    }

    /// For [`restart_with_backoff`](Self::restart_with_backoff): the
    /// delay goes back to its minimum once an incarnation has run this
    /// long without failing ("the back-off is automatically reset if the
    /// child does not throw any errors within" it). Changes nothing for
    /// the others, which have no delay.
    pub fn with_reset_after(mut self, period: Duration) -> Supervision {
        self.reset_after = Some(period);
        self
    }

    /// Take only the failures `accept` holds for; the others go to the
    /// parent's strategy, as if the actor had no `Supervision` (Akka
    /// Typed's `onFailure[SomeException]`). A panicking `accept` hands the
    /// failure on too.
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use proscenium::Supervision;
    /// # struct Db;
    /// # impl Actor for Db { type Msg = (); fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome { Ok(()) } }
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("database unavailable")]
    /// struct DbDown;
    ///
    /// // Resume on DbDown; anything else is the parent's to decide.
    /// let props = Props::new(|| Db)
    ///     .with_supervision(Supervision::resume().only_when(|f| f.is::<DbDown>()));
    /// # let _ = props;
    /// ```
    pub fn only_when(
        mut self,
        accept: impl Fn(&Failure) -> bool + Send + Sync + 'static,
    ) -> Supervision {
        self.only_when = Some(Arc::new(accept));
        self
    }

    /// Whether the failures it decides are logged (with `tracing`), as a
    /// parent's strategy logs them; on by default.
    pub fn logging(mut self, on: bool) -> Supervision {
        self.logging = on;
        self
    }

    pub(crate) fn logs(&self) -> bool {
        self.logging
    }

    /// The `max_retries` of [`with_limit`](Self::with_limit), if set (for
    /// the log line of a stop over the limit).
    pub(crate) fn retry_limit(&self) -> Option<u32> {
        self.limit.map(|(n, _)| n)
    }
}

impl fmt::Debug for Supervision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Supervision");
        match self.policy {
            Policy::Resume => s.field("policy", &"resume"),
            Policy::Stop => s.field("policy", &"stop"),
            Policy::Restart => s.field("policy", &"restart"),
            Policy::Backoff {
                min,
                max,
                random_factor,
            } => s
                .field("policy", &"restart_with_backoff")
                .field("min_backoff", &min)
                .field("max_backoff", &max)
                .field("random_factor", &random_factor),
        };
        s.field("limit", &self.limit)
            .field("reset_after", &self.reset_after)
            .field("only_when", &self.only_when.is_some())
            .field("logging", &self.logging)
            .finish()
    }
}

/// What an actor's own supervision does with one failure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum OwnDecision {
    /// Not this supervision's to decide: the failure goes to the parent.
    Parent,
    Resume,
    Restart,
    /// Restart once `delay` has passed: restart number `attempt` since the
    /// backoff was last reset.
    RestartAfter {
        attempt: u32,
        delay: Duration,
    },
    /// Stop: decided, or a restart over the limit.
    Stop(SupervisionReason),
}

/// Numbers the delayed restarts (0 is never used).
static RESTART_TOKENS: AtomicU64 = AtomicU64::new(1);

/// A delayed restart, waiting for its timer.
pub(crate) struct PendingRestart {
    /// The token the timer's message carries; only the pending one counts.
    pub(crate) token: u64,
    timer: TimerHandle,
    /// For `post_restart`.
    pub(crate) failure: Failure,
}

/// An actor's own supervision and what it counts: kept in the actor's
/// context (`Rare`), from its creation to its termination.
pub(crate) struct OwnSupervision {
    supervision: Arc<Supervision>,
    /// The restarts [`Supervision::with_limit`] counts.
    stats: RestartStats,
    /// Backoff: restarts since the last reset, the exponent of the next
    /// delay.
    attempt: u32,
    /// When the current incarnation started (created, or restarted);
    /// `None` until then and from its failure on.
    running_since: Option<Instant>,
    /// The delayed restart armed, if one is.
    pub(crate) pending: Option<PendingRestart>,
    rng: XorShift,
}

impl OwnSupervision {
    pub(crate) fn new(supervision: Arc<Supervision>) -> OwnSupervision {
        OwnSupervision {
            supervision,
            stats: RestartStats::default(),
            attempt: 0,
            running_since: None,
            pending: None,
            rng: XorShift::seeded(),
        }
    }

    pub(crate) fn supervision(&self) -> &Supervision {
        &self.supervision
    }

    /// The actor's new incarnation has started (its `pre_start` or
    /// `post_restart` succeeded) at `now`.
    pub(crate) fn started(&mut self, now: Instant) {
        self.running_since = Some(now);
    }

    /// What to do with `failure`, which happened at `now`; counts a
    /// restart against the limit (and, for backoff, the delay).
    pub(crate) fn decide(&mut self, failure: &Failure, now: Instant) -> OwnDecision {
        let s = &self.supervision;
        if let Some(accept) = &s.only_when {
            if !catch_unwind(AssertUnwindSafe(|| accept(failure))).unwrap_or(false) {
                return OwnDecision::Parent;
            }
        }
        if failure.is_killed() {
            return OwnDecision::Parent;
        }
        let initialization = failure.is_initialization();
        let ran_since = self.running_since.take();
        match s.policy {
            Policy::Resume if initialization => OwnDecision::Parent,
            Policy::Resume => OwnDecision::Resume,
            Policy::Stop => OwnDecision::Stop(SupervisionReason::Decided),
            Policy::Restart if initialization && s.limit.is_none() => OwnDecision::Parent,
            Policy::Restart => match self.restart_allowed(now) {
                true => OwnDecision::Restart,
                false => OwnDecision::Stop(SupervisionReason::RestartLimitReached),
            },
            Policy::Backoff {
                min,
                max,
                random_factor,
            } => {
                let reset_after = s.reset_after.unwrap_or(min);
                if ran_since.is_some_and(|t| now.saturating_duration_since(t) >= reset_after) {
                    self.attempt = 0;
                }
                if !self.restart_allowed(now) {
                    return OwnDecision::Stop(SupervisionReason::RestartLimitReached);
                }
                let attempt = self.attempt;
                self.attempt = attempt.saturating_add(1);
                let delay = backoff_delay(attempt, min, max, random_factor, self.rng.next_unit());
                OwnDecision::RestartAfter { attempt, delay }
            }
        }
    }

    fn restart_allowed(&mut self, now: Instant) -> bool {
        match self.supervision.limit {
            None => true,
            Some((max, within)) => self.stats.request(Some(max), Some(within), now),
        }
    }

    /// A fresh token for a delayed restart (unique in the process, so a
    /// timer's message from an earlier arming never matches a later one).
    pub(crate) fn next_token() -> u64 {
        // Relaxed: only uniqueness matters.
        RESTART_TOKENS.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps the delayed restart armed with `timer`.
    pub(crate) fn arm(&mut self, token: u64, timer: TimerHandle, failure: Failure) {
        self.pending = Some(PendingRestart {
            token,
            timer,
            failure,
        });
    }

    /// Cancels the delayed restart, if one is armed (something else
    /// restarted or is stopping the actor meanwhile); `true` if one was. A
    /// timer that fired already has its message queued, which no longer
    /// matches.
    pub(crate) fn cancel_pending(&mut self) -> bool {
        match self.pending.take() {
            Some(pending) => {
                pending.timer.cancel();
                true
            }
            None => false,
        }
    }

    /// The delayed restart whose timer sent `token`, taken; `None` if it
    /// was cancelled or replaced meanwhile.
    pub(crate) fn take_due(&mut self, token: u64) -> Option<Failure> {
        self.pending
            .take_if(|p| p.token == token)
            .map(|p| p.failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervision::failure::Killed;

    fn failure() -> Failure {
        Failure::from_error("/user/a".into(), "boom".into())
    }

    fn init_failure() -> Failure {
        failure().into_initialization()
    }

    fn own(s: Supervision) -> OwnSupervision {
        OwnSupervision::new(Arc::new(s))
    }

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// "limits on how often a child is allowed to fail before terminating
    /// it": `max_retries` restarts within the window, then a stop; a
    /// failure after the window opens a new one.
    #[test]
    fn restart_counts_within_the_window_then_stops() {
        let t0 = Instant::now();
        let mut o = own(Supervision::restart().with_limit(2, S(10)));
        assert_eq!(o.decide(&failure(), t0), OwnDecision::Restart);
        assert_eq!(o.decide(&failure(), t0 + S(1)), OwnDecision::Restart);
        assert_eq!(
            o.decide(&failure(), t0 + S(2)),
            OwnDecision::Stop(SupervisionReason::RestartLimitReached)
        );
        let mut o = own(Supervision::restart().with_limit(2, S(10)));
        assert_eq!(o.decide(&failure(), t0), OwnDecision::Restart);
        assert_eq!(o.decide(&failure(), t0 + S(1)), OwnDecision::Restart);
        // The window closed: a new one opens with this restart.
        assert_eq!(o.decide(&failure(), t0 + S(11)), OwnDecision::Restart);
        assert_eq!(o.decide(&failure(), t0 + S(12)), OwnDecision::Restart);
        assert_eq!(
            o.decide(&failure(), t0 + S(13)),
            OwnDecision::Stop(SupervisionReason::RestartLimitReached)
        );
        let mut never = own(Supervision::restart().with_limit(0, S(10)));
        assert_eq!(
            never.decide(&failure(), t0),
            OwnDecision::Stop(SupervisionReason::RestartLimitReached)
        );
        let mut unlimited = own(Supervision::restart());
        for i in 0..1000 {
            assert_eq!(unlimited.decide(&failure(), t0 + MS(i)), OwnDecision::Restart);
        }
    }

    /// The delays double up to the maximum; an incarnation that ran for
    /// `reset_after` ("does not throw any errors within" it) brings the
    /// next delay back to the minimum, one that failed sooner does not.
    #[test]
    fn backoff_grows_and_resets_after_a_stable_period() {
        let t0 = Instant::now();
        let mut o = own(Supervision::restart_with_backoff(MS(10), MS(40), 0.0).with_reset_after(S(1)));
        let mut t = t0;
        let mut delays = Vec::new();
        for attempt in 0..4 {
            let OwnDecision::RestartAfter { attempt: a, delay } = o.decide(&failure(), t) else {
                panic!("a delayed restart")
            };
            assert_eq!(a, attempt);
            delays.push(delay);
            t += delay;
            o.started(t); // ran briefly, then failed again
            t += MS(5);
        }
        assert_eq!(delays, [MS(10), MS(20), MS(40), MS(40)]);
        // Ran for the whole stable period: back to the minimum.
        t += S(1);
        assert_eq!(
            o.decide(&failure(), t),
            OwnDecision::RestartAfter {
                attempt: 0,
                delay: MS(10)
            }
        );
        // Its default is the minimum backoff.
        let mut o = own(Supervision::restart_with_backoff(MS(10), MS(40), 0.0));
        assert!(matches!(o.decide(&failure(), t0), OwnDecision::RestartAfter { attempt: 0, .. }));
        o.started(t0 + MS(10));
        assert!(matches!(o.decide(&failure(), t0 + MS(15)), OwnDecision::RestartAfter { attempt: 1, .. }));
        o.started(t0 + MS(35));
        assert!(matches!(o.decide(&failure(), t0 + MS(45)), OwnDecision::RestartAfter { attempt: 0, .. }));
    }

    /// A backoff with a limit counts its restarts as `restart` does, and a
    /// failed start is restarted (not handed on).
    #[test]
    fn backoff_restarts_a_failed_start_within_its_limit() {
        let t0 = Instant::now();
        let mut o = own(Supervision::restart_with_backoff(MS(1), MS(8), 0.0).with_limit(2, S(60)));
        assert!(matches!(o.decide(&init_failure(), t0), OwnDecision::RestartAfter { .. }));
        assert!(matches!(o.decide(&init_failure(), t0), OwnDecision::RestartAfter { .. }));
        assert_eq!(
            o.decide(&init_failure(), t0),
            OwnDecision::Stop(SupervisionReason::RestartLimitReached)
        );
    }

    /// What goes to the parent: what `only_when` refuses (or panics on),
    /// Kill, a failed start under resume or an unlimited restart.
    #[test]
    fn what_it_does_not_take_goes_to_the_parent() {
        let now = Instant::now();
        #[derive(Debug, thiserror::Error)]
        #[error("mine")]
        struct Mine;
        let mut o = own(Supervision::resume().only_when(|f| f.is::<Mine>()));
        assert_eq!(o.decide(&failure(), now), OwnDecision::Parent);
        let mine = Failure::from_error("/user/a".into(), Box::new(Mine));
        assert_eq!(o.decide(&mine, now), OwnDecision::Resume);
        let mut panicky = own(Supervision::stop().only_when(|_| panic!("bad predicate")));
        assert_eq!(panicky.decide(&failure(), now), OwnDecision::Parent);
        let killed = Failure::from_error("/user/a".into(), Box::new(Killed));
        for s in [Supervision::resume(), Supervision::stop(), Supervision::restart()] {
            assert_eq!(own(s).decide(&killed, now), OwnDecision::Parent);
        }
        assert_eq!(own(Supervision::resume()).decide(&init_failure(), now), OwnDecision::Parent);
        assert_eq!(own(Supervision::restart()).decide(&init_failure(), now), OwnDecision::Parent);
        assert_eq!(
            own(Supervision::restart().with_limit(1, S(1))).decide(&init_failure(), now),
            OwnDecision::Restart
        );
        assert_eq!(
            own(Supervision::stop()).decide(&init_failure(), now),
            OwnDecision::Stop(SupervisionReason::Decided)
        );
    }

    #[test]
    #[should_panic(expected = "max_backoff must be at least min_backoff")]
    fn a_backoff_maximum_below_its_minimum_is_refused() {
        let _ = Supervision::restart_with_backoff(S(2), S(1), 0.0);
    }
}
