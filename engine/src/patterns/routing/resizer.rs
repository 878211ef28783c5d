//! [`Resizer`]: grows and shrinks a pool with the load, after Akka's
//! `DefaultResizer`.

/// Resizes a pool router between two bounds, after Akka's `DefaultResizer`.
///
/// Every [`messages_per_resize`](Self::messages_per_resize) routed messages
/// (the first one included), the router counts the routees under pressure
/// (busy: running a message or with messages queued) and
///
/// * grows by `ceil(rampup_rate * size)` when every routee is busy,
/// * shrinks by `floor(backoff_rate * size)` (at least one) when fewer than
///   `backoff_threshold * size` routees are busy,
///
/// always within `lower_bound..=upper_bound`. Removed routees get a
/// PoisonPill after the messages already routed to them; none is routed to
/// them afterwards (the router routes on its own thread, so Akka's
/// 100 ms grace delay is not needed).
///
/// ```
/// use proscenium::Resizer;
///
/// let resizer = Resizer::new(2, 16).rampup_rate(0.5).messages_per_resize(100);
/// assert_eq!(resizer.capacity_delta(4, 4), 2); // all busy: +50%
/// assert_eq!(resizer.capacity_delta(0, 4), -1); // idle: shrink
/// assert_eq!(resizer.capacity_delta(0, 2), 0); // not below the lower bound
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Resizer {
    lower_bound: usize,
    upper_bound: usize,
    rampup_rate: f64,
    backoff_threshold: f64,
    backoff_rate: f64,
    messages_per_resize: u64,
}

impl Resizer {
    /// A resizer keeping the pool within `lower_bound..=upper_bound`, with
    /// Akka's defaults: rampup rate 0.2, backoff threshold 0.3, backoff
    /// rate 0.1, a check every 10 messages. An `upper_bound` below
    /// `lower_bound` is raised to it.
    pub fn new(lower_bound: usize, upper_bound: usize) -> Resizer {
        Resizer {
            lower_bound,
            upper_bound: upper_bound.max(lower_bound),
            rampup_rate: 0.2,
            backoff_threshold: 0.3,
            backoff_rate: 0.1,
            messages_per_resize: 10,
        }
    }

    /// How much to grow, as a share of the current size, when every routee
    /// is busy (0.2: by a fifth, at least one).
    pub fn rampup_rate(mut self, rate: f64) -> Resizer {
        self.rampup_rate = rate.max(0.0);
        self
    }

    /// Shrink when fewer than this share of the routees are busy (0 turns
    /// shrinking off).
    pub fn backoff_threshold(mut self, threshold: f64) -> Resizer {
        self.backoff_threshold = threshold.max(0.0);
        self
    }

    /// How much to shrink, as a share of the current size (at least one
    /// routee; 0 turns shrinking off).
    pub fn backoff_rate(mut self, rate: f64) -> Resizer {
        self.backoff_rate = rate.max(0.0);
        self
    }

    /// Check the load every `n` routed messages (at least 1).
    pub fn messages_per_resize(mut self, n: u64) -> Resizer {
        self.messages_per_resize = n.max(1);
        self
    }

    /// The lower bound.
    pub fn lower_bound(&self) -> usize {
        self.lower_bound
    }

    /// The upper bound.
    pub fn upper_bound(&self) -> usize {
        self.upper_bound
    }

    /// Whether the message numbered `routed` (from 0) triggers a check.
    pub(crate) fn is_time_for_resize(&self, routed: u64) -> bool {
        routed.is_multiple_of(self.messages_per_resize)
    }

    /// `size` clamped to the bounds (the initial pool size).
    pub(crate) fn clamp(&self, size: usize) -> usize {
        size.clamp(self.lower_bound, self.upper_bound)
    }

    /// How many routees to add (positive) or remove (negative) when `busy`
    /// of `size` routees are under pressure.
    pub fn capacity_delta(&self, busy: usize, size: usize) -> isize {
        let s = size as f64;
        let rampup = if size > 0 && busy >= size {
            (self.rampup_rate * s).ceil() as isize
        } else {
            0
        };
        let backoff = if self.backoff_threshold > 0.0
            && self.backoff_rate > 0.0
            && size > 0
            && (busy as f64) / s < self.backoff_threshold
        {
            (-self.backoff_rate * s).floor() as isize
        } else {
            0
        };
        let proposed = size as isize + rampup + backoff;
        let clamped = proposed.clamp(self.lower_bound as isize, self.upper_bound as isize);
        clamped - size as isize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_when_all_busy_within_the_upper_bound() {
        let r = Resizer::new(1, 10);
        assert_eq!(r.capacity_delta(5, 5), 1); // ceil(0.2 * 5)
        assert_eq!(r.capacity_delta(9, 9), 1);
        assert_eq!(r.capacity_delta(10, 10), 0);
        assert_eq!(r.capacity_delta(4, 5), 0); // not all busy, not idle
    }

    #[test]
    fn shrinks_when_underused_within_the_lower_bound() {
        let r = Resizer::new(2, 10);
        assert_eq!(r.capacity_delta(0, 10), -1);
        assert_eq!(r.capacity_delta(2, 10), -1); // 0.2 < 0.3
        assert_eq!(r.capacity_delta(3, 10), 0);
        assert_eq!(r.capacity_delta(0, 2), 0);
        assert_eq!(r.capacity_delta(0, 0), 2); // back up to the lower bound
    }
}
