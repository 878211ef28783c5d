//! The `metrics` feature: the system's counters through the `metrics`
//! facade ([`ActorSystem::publish_metrics`], docs/metrics.md).
//!
//! Sampled, not recorded per event: a publication reads the counters the
//! system keeps (the scheduler's per-worker counters, the dead letters,
//! live cells, panics) and the three this feature adds (actors spawned,
//! restarted, stopped: one relaxed add each on the spawn, restart and stop
//! paths, never on a message's path), and sets them as absolute counters
//! and gauges in the installed recorder. The recorder is called only by the
//! publishing thread: a scrape handler, or the sampler actor
//! ([`ActorSystem::spawn_metrics_sampler`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ::metrics::{describe_counter, describe_gauge, Label, Unit};

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::ActorRef;
use crate::api::context::Context;
use crate::error::SpawnError;
use crate::runtime::system::ActorSystem;
use crate::supervision::failure::Outcome;

/// A publisher added with [`ActorSystem::add_metrics_source`].
type Source = Box<dyn Fn() -> bool + Send + Sync>;

/// What the feature adds to a system: three counters and the extensions'
/// publishers.
#[derive(Default)]
pub(crate) struct SystemMetrics {
    /// Actor cells created (the guardians included). Written by whichever
    /// thread spawns.
    spawned: AtomicU64,
    /// Incarnations that replaced a failed one. Written by the restarted
    /// actor's worker.
    restarts: AtomicU64,
    /// Actors that terminated (`post_stop` run, children stopped). Written
    /// by the stopped actor's worker.
    stopped: AtomicU64,
    sources: Mutex<Vec<Source>>,
}

impl SystemMetrics {
    /// An actor cell was created (`ActorCell::new`: the spawn path).
    pub(crate) fn spawned(&self) {
        // Relaxed: a statistic; a publication reads it on its own, and
        // nothing else is published through it (it pairs with nothing).
        self.spawned.fetch_add(1, Ordering::Relaxed);
    }

    /// An actor was restarted (its new incarnation's `post_restart` ran).
    pub(crate) fn restarted(&self) {
        // Relaxed: a statistic; see `spawned`.
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// An actor terminated (before its Stopped event is published and any
    /// watcher is told, so whoever learns of the stop sees it counted).
    pub(crate) fn stopped(&self) {
        // Relaxed: a statistic; see `spawned`. A watcher that learned of
        // the stop sees the add all the same: the notification travels
        // through the mailbox's release/acquire handoff, after this.
        self.stopped.fetch_add(1, Ordering::Relaxed);
    }
}

impl ActorSystem {
    /// Publishes the system's metrics through the [`metrics`](::metrics)
    /// facade's recorder, then calls every source added with
    /// [`add_metrics_source`](Self::add_metrics_source) (the HTTP server's
    /// and remote's, with their features, labelled `address` and `node`).
    /// The system's own carry the label `system` (the system's name: give
    /// two systems of one process different names); docs/metrics.md lists
    /// them all:
    ///
    /// - the scheduler's, from
    ///   [`Handle::publish_metrics`](proscenium_scheduler::Handle::publish_metrics):
    ///   `proscenium_scheduler_runs_total{worker}` and the other per-worker
    ///   counters, `proscenium_scheduler_injector_depth` and the other
    ///   gauges;
    /// - counters `proscenium_actors_spawned_total`,
    ///   `proscenium_actors_restarts_total`,
    ///   `proscenium_actors_stopped_total`,
    ///   `proscenium_dead_letters_total`,
    ///   `proscenium_actor_escaped_panics_total`,
    ///   `proscenium_pipe_panics_total`;
    /// - the gauge `proscenium_actor_cells_live`.
    ///
    /// A sample: it reads counters the system keeps anyway, on the calling
    /// thread, and sets absolute values (so calling it twice publishes the
    /// same values twice, never double counts). Call it before rendering a
    /// scrape (see http/examples/metrics.rs), or let
    /// [`spawn_metrics_sampler`](Self::spawn_metrics_sampler) call it
    /// periodically (for a push exporter). Without an installed recorder
    /// it does nothing visible.
    ///
    /// ```
    /// use proscenium::ActorSystem;
    ///
    /// let recorder = metrics_util::debugging::DebuggingRecorder::new();
    /// let snapshotter = recorder.snapshotter();
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// metrics::with_local_recorder(&recorder, || system.publish_metrics());
    /// let spawned = snapshotter.snapshot().into_vec().into_iter().find_map(|(key, _, _, value)| {
    ///     (key.key().name() == "proscenium_actors_spawned_total").then_some(value)
    /// });
    /// // The three guardians: `/`, `/user`, `/system`.
    /// assert_eq!(spawned, Some(metrics_util::debugging::DebugValue::Counter(3)));
    /// system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_metrics(&self) {
        let labels = [Label::new("system", self.name().to_owned())];
        self.scheduler_handle().publish_metrics(&labels);
        let own = self.metrics_state();
        // Relaxed: statistics (see `SystemMetrics::spawned`).
        let counters = [
            (
                "proscenium_actors_spawned_total",
                "Actor cells created (the three guardians included).",
                own.spawned.load(Ordering::Relaxed),
            ),
            (
                "proscenium_actors_restarts_total",
                "Actor incarnations that replaced a failed one.",
                own.restarts.load(Ordering::Relaxed),
            ),
            (
                "proscenium_actors_stopped_total",
                "Actors that terminated (post_stop run).",
                own.stopped.load(Ordering::Relaxed),
            ),
            (
                "proscenium_dead_letters_total",
                "Messages that could not be delivered.",
                self.dead_letter_count(),
            ),
            (
                "proscenium_actor_escaped_panics_total",
                "Panics that escaped an actor's run (zero when healthy).",
                self.escaped_panics(),
            ),
            (
                "proscenium_pipe_panics_total",
                "Panics in piped futures and their mappings.",
                self.pipe_panics(),
            ),
        ];
        for (name, help, value) in counters {
            describe_counter!(name, Unit::Count, help);
            ::metrics::counter!(name, labels.to_vec()).absolute(value);
        }
        let live = "proscenium_actor_cells_live";
        describe_gauge!(live, Unit::Count, "Actor cells allocated now.");
        // Far below 2^53: exact as an f64.
        ::metrics::gauge!(live, labels.to_vec()).set(self.live_cells() as f64);
        self.metrics_state()
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|source| source());
    }

    /// Adds a source of metrics that [`publish_metrics`](Self::publish_metrics)
    /// calls after the system's own, on the publishing thread (for
    /// extensions: the HTTP server adds each binding's, remote each
    /// node's). It returns whether to keep it: `false` once what it
    /// publishes is gone (a source holds a `Weak` to it, so that the
    /// system does not keep it alive). It runs under the list's lock: it
    /// must not call `publish_metrics` or add a source itself.
    pub fn add_metrics_source(&self, source: impl Fn() -> bool + Send + Sync + 'static) {
        self.metrics_state()
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(source));
    }

    /// Spawns a system actor, `/system/metrics-sampler`, that calls
    /// [`publish_metrics`](Self::publish_metrics) every `interval`, for
    /// exporters that push (an OpenTelemetry or StatsD recorder) or read
    /// their own state on a schedule. A Prometheus scrape needs none:
    /// publish in the scrape's handler instead, and the values are
    /// current. The sampler's timer stops with it (stop it through the
    /// returned reference, or it stops with the system), so it leaves no
    /// timer pending at termination.
    ///
    /// It fails if a sampler is already running under that name, or the
    /// system has terminated.
    pub fn spawn_metrics_sampler(
        &self,
        interval: Duration,
    ) -> Result<ActorRef<SamplerTick>, SpawnError> {
        self.spawn_system_actor(Props::new(move || Sampler { interval }), "metrics-sampler")
    }
}

/// The message of the sampler actor ([`ActorSystem::spawn_metrics_sampler`]):
/// a tick publishes the metrics once more (its timer sends them; one sent
/// by hand publishes at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplerTick;

/// Publishes the system's metrics every `interval`.
struct Sampler {
    interval: Duration,
}

impl Actor for Sampler {
    type Msg = SamplerTick;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        ctx.start_timer_with_fixed_delay("sample", SamplerTick, self.interval);
        ctx.system().publish_metrics();
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, SamplerTick: SamplerTick) -> Outcome {
        ctx.system().publish_metrics();
        Ok(())
    }
}

// The sources are closures: shown by count.
impl std::fmt::Debug for SystemMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemMetrics")
            .field("spawned", &self.spawned)
            .field("restarts", &self.restarts)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}
