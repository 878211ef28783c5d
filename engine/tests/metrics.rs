//! The `metrics` feature (docs/metrics.md): `publish_metrics` sets the
//! system's counters in the installed recorder with the values the system
//! counted, and the sampler actor publishes without being asked.
//!
//! Run with `cargo test -p proscenium --features metrics --test metrics`
//! (.ci/run does).

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use metrics::{SharedString, Unit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use proscenium::prelude::*;

const PATIENCE: Duration = Duration::from_secs(30);

enum Msg {
    /// Fails the actor (the default strategy restarts it).
    Fail,
    /// Answers, so the sender knows every message before it was handled.
    Ping(Reply<()>),
}

struct Flaky;

impl Actor for Flaky {
    type Msg = Msg;
    fn receive(&mut self, _: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Fail => Err("failing on purpose".into()),
            Msg::Ping(reply) => {
                reply.send(());
                Ok(())
            }
        }
    }
}

fn system() -> ActorSystem {
    ActorSystem::builder()
        .name("metrics-test")
        .workers(2)
        .pin_workers(false)
        .build()
        .expect("system")
}

/// One snapshot of the recorder (a debugging recorder's snapshot takes the
/// values: read each once).
struct Sample(Vec<(CompositeKey, Option<Unit>, Option<SharedString>, DebugValue)>);

impl Sample {
    fn take(snapshotter: &Snapshotter) -> Sample {
        Sample(snapshotter.snapshot().into_vec())
    }

    /// The value of the metric `name` whose labels are exactly `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        self.0.iter().find_map(|(key, _, _, value)| {
            let key = key.key();
            let same_labels = key.labels().count() == labels.len()
                && labels
                    .iter()
                    .all(|&(k, v)| key.labels().any(|l| l.key() == k && l.value() == v));
            (key.name() == name && same_labels).then_some(value)
        })
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.value(name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            other => panic!("{name}{labels:?}: not a counter: {other:?}"),
        }
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.value(name, labels) {
            Some(DebugValue::Gauge(n)) => n.into_inner(),
            other => panic!("{name}{labels:?}: not a gauge: {other:?}"),
        }
    }

    fn described(&self, name: &str) -> bool {
        self.0
            .iter()
            .any(|(key, _, description, _)| key.key().name() == name && description.is_some())
    }
}

/// K actors spawned and stopped, R restarts, D dead letters: published
/// exactly, with the scheduler's per-worker counters beside them.
#[test]
fn publish_sets_the_counted_values() {
    const K: usize = 4;
    const R: usize = 3;
    const D: usize = 5;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let system = system();
    let (restarted_tx, restarted_rx) = mpsc::channel();
    let restarted_tx = Mutex::new(restarted_tx);
    let _restarts = system.event_stream().subscribe(move |e: &LifecycleEvent| {
        if e.kind == LifecycleKind::Restarted {
            let _ = restarted_tx.lock().map(|tx| tx.send(()));
        }
    });

    let actors: Vec<_> = (0..K)
        .map(|i| {
            system
                .spawn(Props::new(|| Flaky), &format!("flaky-{i}"))
                .expect("spawn")
        })
        .collect();
    for _ in 0..R {
        actors[0].tell(Msg::Fail);
        restarted_rx.recv_timeout(PATIENCE).expect("a restart");
    }
    for actor in &actors {
        actor.ask(Msg::Ping, PATIENCE).wait().expect("a pong");
    }
    for actor in &actors {
        assert!(actor.graceful_stop(PATIENCE).wait(), "stopped");
    }
    let dead_before = system.dead_letter_count();
    for _ in 0..D {
        actors[1].tell(Msg::Fail);
    }
    assert_eq!(system.dead_letter_count(), dead_before + D as u64);

    metrics::with_local_recorder(&recorder, || system.publish_metrics());
    let sample = Sample::take(&snapshotter);
    let sys = [("system", "metrics-test")];
    // The three guardians and the K actors.
    assert_eq!(
        sample.counter("proscenium_actors_spawned_total", &sys),
        3 + K as u64
    );
    assert_eq!(
        sample.counter("proscenium_actors_stopped_total", &sys),
        K as u64
    );
    assert_eq!(
        sample.counter("proscenium_actors_restarts_total", &sys),
        R as u64
    );
    assert_eq!(
        sample.counter("proscenium_dead_letters_total", &sys),
        system.dead_letter_count()
    );
    assert_eq!(
        sample.counter("proscenium_actor_escaped_panics_total", &sys),
        0
    );
    assert_eq!(sample.counter("proscenium_pipe_panics_total", &sys), 0);
    assert_eq!(sample.gauge("proscenium_scheduler_workers", &sys), 2.0);
    let runs: u64 = ["0", "1"]
        .iter()
        .map(|w| {
            sample.counter(
                "proscenium_scheduler_runs_total",
                &[("system", "metrics-test"), ("worker", w)],
            )
        })
        .sum();
    // Published from the workers' counters, which only grow.
    assert!(runs > 0, "the actors ran");
    assert!(runs <= system.scheduler_handle().metrics().total().runs);
    for name in [
        "proscenium_scheduler_injector_depth",
        "proscenium_scheduler_queued_runnables",
        "proscenium_scheduler_parked_workers",
    ] {
        let depth = sample.gauge(name, &sys);
        assert!((0.0..=2.0e6).contains(&depth), "{name}: {depth}");
    }
    for name in [
        "proscenium_actors_spawned_total",
        "proscenium_scheduler_runs_total",
        "proscenium_actor_cells_live",
    ] {
        assert!(sample.described(name), "{name} has a description");
    }

    // Publishing again sets the same absolute values: nothing is counted twice.
    metrics::with_local_recorder(&recorder, || system.publish_metrics());
    let again = Sample::take(&snapshotter);
    assert_eq!(
        again.counter("proscenium_actors_stopped_total", &sys),
        K as u64
    );

    drop(actors);
    assert!(system.terminate().wait().clean());
}

/// A metrics source added by an extension is called by every publication
/// until it says it is done.
#[test]
fn sources_are_called_until_they_are_done() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let system = system();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = std::sync::Arc::clone(&calls);
    system.add_metrics_source(move || {
        // Relaxed: read by this test's thread, which also runs the source.
        let n = counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        metrics::counter!("test_source_calls_total").absolute(n);
        n < 2
    });
    for _ in 0..3 {
        metrics::with_local_recorder(&recorder, || system.publish_metrics());
    }
    assert_eq!(
        Sample::take(&snapshotter).counter("test_source_calls_total", &[]),
        2
    );
    assert!(system.terminate().wait().clean());
}

/// The sampler actor publishes on its own (its first sample in its
/// `pre_start`), on a worker: the one test here with a global recorder.
/// Its timer stops with it, so a system terminated with the sampler
/// running terminates clean (no timer left pending).
#[test]
fn the_sampler_publishes_and_leaves_no_timer() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only global recorder of this binary");
    let system = ActorSystem::builder()
        .name("sampled")
        .workers(1)
        .pin_workers(false)
        .build()
        .expect("system");
    let (started_tx, started_rx) = mpsc::channel();
    let started_tx = Mutex::new(started_tx);
    let _started = system.event_stream().subscribe(move |e: &LifecycleEvent| {
        if e.kind == LifecycleKind::Started {
            let _ = started_tx.lock().map(|tx| tx.send(e.actor.path()));
        }
    });
    let _sampler = system
        .spawn_metrics_sampler(Duration::from_secs(3600))
        .expect("sampler");
    // Published once `pre_start` has sampled.
    let path = started_rx
        .recv_timeout(PATIENCE)
        .expect("the sampler started");
    assert_eq!(path, "/system/metrics-sampler");
    // The guardians and the sampler.
    let sample = Sample::take(&snapshotter);
    let sampled = [("system", "sampled")];
    assert_eq!(
        sample.counter("proscenium_actors_spawned_total", &sampled),
        4
    );
    assert!(
        sample
            .0
            .iter()
            .all(|(key, ..)| key.kind() != MetricKind::Histogram),
        "the engine publishes no histogram"
    );
    assert!(
        system
            .spawn_metrics_sampler(Duration::from_secs(1))
            .is_err(),
        "one sampler per system"
    );
    assert!(system.terminate().wait().clean());
}
