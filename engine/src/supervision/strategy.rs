//! Supervision: [`SupervisorStrategy`], [`Directive`], the default decider,
//! and the retry window each child's restarts are counted in.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::supervision::failure::Failure;

/// What a supervisor does with a failed child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Directive {
    /// Resume the child, keeping its accumulated state; the failing message
    /// is not handled again.
    Resume,
    /// Restart the child: a new instance from the same [`Props`](crate::Props)
    /// factory; the failing message is not handled again.
    Restart,
    /// Stop the child permanently.
    Stop,
    /// Fail the supervisor itself with the same failure, handing it to its
    /// own supervisor.
    Escalate,
}

/// Which children a directive applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrategyKind {
    /// Only the failed child (the default).
    OneForOne,
    /// The failed child and all its siblings.
    AllForOne,
}

type Decider = Arc<dyn Fn(&Failure) -> Directive + Send + Sync>;

/// How an actor supervises its children: one-for-one or all-for-one, a
/// decider from failure to [`Directive`], and a limit on restarts.
///
/// ```
/// use proscenium::{Directive, SupervisorStrategy};
/// use std::time::Duration;
///
/// let strategy = SupervisorStrategy::one_for_one()
///     .max_retries(10)
///     .within(Duration::from_secs(60))
///     .decider(|f| if f.is_panic() { Directive::Restart } else { Directive::Escalate });
/// # let _ = strategy;
/// ```
///
/// A child that would be restarted more than `max_retries` times within the
/// window is stopped instead.
#[derive(Clone)]
pub struct SupervisorStrategy {
    kind: StrategyKind,
    max_retries: Option<u32>,
    within: Option<Duration>,
    decider: Decider,
    logging: bool,
}

/// The default decider: [`Directive::Stop`] for initialization failures and
/// for [`Killed`](crate::Killed), [`Directive::Restart`] for everything else
/// (handler errors, panics, death pacts).
pub fn default_decider(failure: &Failure) -> Directive {
    if failure.is_initialization() || failure.is_killed() {
        Directive::Stop
    } else {
        Directive::Restart
    }
}

impl SupervisorStrategy {
    /// One-for-one with the default decider and no restart limit.
    pub fn one_for_one() -> SupervisorStrategy {
        SupervisorStrategy {
            kind: StrategyKind::OneForOne,
            max_retries: None,
            within: None,
            decider: Arc::new(default_decider),
            logging: true,
        }
    }

    /// All-for-one with the default decider and no restart limit.
    pub fn all_for_one() -> SupervisorStrategy {
        SupervisorStrategy {
            kind: StrategyKind::AllForOne,
            ..SupervisorStrategy::one_for_one()
        }
    }

    /// One-for-one that stops the child on every failure (Akka's
    /// `StoppingStrategy`, used by the root guardian).
    pub fn stopping() -> SupervisorStrategy {
        SupervisorStrategy::one_for_one().decider(|_| Directive::Stop)
    }

    /// At most `n` restarts per child (within the window, if one is set);
    /// the next failure that asks for a restart stops the child. `0` means
    /// never restart.
    pub fn max_retries(mut self, n: u32) -> SupervisorStrategy {
        self.max_retries = Some(n);
        self
    }

    /// The window the restarts are counted in. Without
    /// [`max_retries`](Self::max_retries), one restart per window is allowed
    /// (as in Akka).
    pub fn within(mut self, window: Duration) -> SupervisorStrategy {
        self.within = Some(window);
        self
    }

    /// The function from failure to directive.
    pub fn decider(
        mut self,
        decider: impl Fn(&Failure) -> Directive + Send + Sync + 'static,
    ) -> SupervisorStrategy {
        self.decider = Arc::new(decider);
        self
    }

    /// Whether failures are logged (with `tracing`) when they are handled;
    /// on by default.
    pub fn logging(mut self, on: bool) -> SupervisorStrategy {
        self.logging = on;
        self
    }

    /// One-for-one or all-for-one.
    pub fn kind(&self) -> StrategyKind {
        self.kind
    }

    /// The directive for `failure`. A panicking decider escalates.
    pub fn decide(&self, failure: &Failure) -> Directive {
        let decider = &self.decider;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decider(failure)))
            .unwrap_or(Directive::Escalate)
    }

    pub(crate) fn logs(&self) -> bool {
        self.logging
    }

    /// The `max_retries` set, if any (a backoff supervisor's default limit).
    pub(crate) fn retry_limit(&self) -> Option<u32> {
        self.max_retries
    }

    pub(crate) fn restart_allowed(&self, stats: &mut RestartStats, now: Instant) -> bool {
        stats.request(self.max_retries, self.within, now)
    }
}

impl Default for SupervisorStrategy {
    /// One-for-one, default decider, no restart limit.
    fn default() -> SupervisorStrategy {
        SupervisorStrategy::one_for_one()
    }
}

impl fmt::Debug for SupervisorStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SupervisorStrategy")
            .field("kind", &self.kind)
            .field("max_retries", &self.max_retries)
            .field("within", &self.within)
            .finish_non_exhaustive()
    }
}

/// A child's restarts, counted by its supervisor (Akka's
/// `ChildRestartStats`).
#[derive(Debug, Default, Clone)]
pub(crate) struct RestartStats {
    count: u32,
    window_start: Option<Instant>,
}

impl RestartStats {
    /// Asks for one more restart; `false` means the limit is reached and the
    /// child must be stopped instead.
    pub(crate) fn request(&mut self, max: Option<u32>, within: Option<Duration>, now: Instant) -> bool {
        match (max, within) {
            (Some(0), _) => false,
            (None, None) => true,
            (Some(max), None) => {
                self.count = self.count.saturating_add(1);
                self.count <= max
            }
            (max, Some(window)) => {
                let max = max.unwrap_or(1);
                let start = *self.window_start.get_or_insert(now);
                if now.duration_since(start) <= window {
                    self.count = self.count.saturating_add(1);
                    self.count <= max
                } else {
                    self.count = 1;
                    self.window_start = Some(now);
                    true
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_without_a_window_are_counted_forever() {
        let s = SupervisorStrategy::one_for_one().max_retries(2);
        let mut stats = RestartStats::default();
        let now = Instant::now();
        assert!(s.restart_allowed(&mut stats, now));
        assert!(s.restart_allowed(&mut stats, now));
        assert!(!s.restart_allowed(&mut stats, now));
    }

    #[test]
    fn the_window_resets_the_count() {
        let s = SupervisorStrategy::one_for_one()
            .max_retries(2)
            .within(Duration::from_secs(10));
        let mut stats = RestartStats::default();
        let t0 = Instant::now();
        assert!(s.restart_allowed(&mut stats, t0));
        assert!(s.restart_allowed(&mut stats, t0 + Duration::from_secs(1)));
        assert!(!s.restart_allowed(&mut stats, t0 + Duration::from_secs(2)));
        // A failure after the window opens a new one.
        let mut stats = RestartStats::default();
        assert!(s.restart_allowed(&mut stats, t0));
        assert!(s.restart_allowed(&mut stats, t0 + Duration::from_secs(1)));
        assert!(s.restart_allowed(&mut stats, t0 + Duration::from_secs(11)));
        assert!(s.restart_allowed(&mut stats, t0 + Duration::from_secs(12)));
        assert!(!s.restart_allowed(&mut stats, t0 + Duration::from_secs(13)));
    }

    #[test]
    fn zero_retries_never_restarts_and_none_always_does() {
        let mut stats = RestartStats::default();
        let now = Instant::now();
        assert!(!SupervisorStrategy::one_for_one()
            .max_retries(0)
            .restart_allowed(&mut stats, now));
        let unlimited = SupervisorStrategy::one_for_one();
        for _ in 0..1000 {
            assert!(unlimited.restart_allowed(&mut stats, now));
        }
    }

    #[test]
    fn a_panicking_decider_escalates() {
        let s = SupervisorStrategy::one_for_one().decider(|_| panic!("bad decider"));
        let f = Failure::from_error("/user/x".into(), "e".into());
        assert_eq!(s.decide(&f), Directive::Escalate);
    }
}
