//! Builder validation and pinning reports.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::{BuildError, Pinning, Scheduler, UnpinnedReason};

#[test]
fn zero_workers_is_a_typed_error_naming_the_key() {
    let err = Scheduler::builder().workers(0).build().unwrap_err();
    assert!(matches!(err, BuildError::ZeroWorkers));
    assert!(err.to_string().contains("scheduler.workers"));
}

#[test]
fn zero_throughput_is_a_typed_error_naming_the_key() {
    let err = Scheduler::builder().throughput(0).build().unwrap_err();
    assert!(matches!(err, BuildError::ZeroThroughput));
    assert!(err.to_string().contains("scheduler.throughput"));
}

#[test]
fn too_many_workers_is_refused() {
    let err = Scheduler::builder().workers(1 << 20).build().unwrap_err();
    assert!(matches!(err, BuildError::TooManyWorkers { .. }));
}

#[test]
fn default_uses_one_worker_per_core() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let s = Scheduler::builder().pin_workers(false).build().unwrap();
    assert_eq!(s.handle().num_workers(), cores);
}

#[test]
fn pinning_disabled_is_reported_per_worker() {
    let s = support::scheduler(3);
    assert_eq!(
        s.pinning(),
        &[Pinning::Unpinned(UnpinnedReason::Disabled); 3]
    );
}

#[test]
fn pinning_is_reported_per_worker_and_extra_workers_run_unpinned() {
    let Some(cores) = core_ids() else {
        return; // cores cannot be listed here: nothing to check
    };
    let s = Scheduler::builder()
        .workers(cores + 1)
        .pin_workers(true)
        .build()
        .unwrap();
    let pinning = s.pinning();
    assert_eq!(pinning.len(), cores + 1);
    for p in &pinning[..cores] {
        // Pinned, unless this environment refuses affinity changes.
        assert!(
            matches!(
                p,
                Pinning::Pinned { .. } | Pinning::Unpinned(UnpinnedReason::Refused)
            ),
            "{p:?}"
        );
    }
    let pinned: Vec<usize> = pinning
        .iter()
        .filter_map(|p| match p {
            Pinning::Pinned { core } => Some(*core),
            _ => None,
        })
        .collect();
    let mut distinct = pinned.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), pinned.len(), "each worker on its own core");
    assert_eq!(
        pinning[cores],
        Pinning::Unpinned(UnpinnedReason::NoCoreLeft)
    );
    // The pool works, pinned or not.
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..100 {
        let tx = tx.clone();
        s.handle()
            .submit(support::job(move || tx.send(()).unwrap()))
            .unwrap();
    }
    for _ in 0..100 {
        rx.recv_timeout(support::FAILSAFE).unwrap();
    }
}

fn core_ids() -> Option<usize> {
    // The same source the scheduler uses.
    core_affinity::get_core_ids().map(|ids| ids.len())
}

#[test]
fn public_handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<proscenium_scheduler::Handle>();
    send_sync::<Scheduler>();
    send_sync::<proscenium_scheduler::JoinHandle<u32>>();
    send_sync::<proscenium_scheduler::TimerHandle>();
    send_sync::<proscenium_scheduler::Sleep>();
    send_sync::<proscenium_scheduler::Metrics>();
}

#[test]
fn a_stack_size_below_the_minimum_is_a_typed_error_naming_the_key() {
    let err = Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .stack_size(16 * 1024)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            BuildError::StackSizeTooSmall {
                requested: 16384,
                min: proscenium_scheduler::MIN_STACK_SIZE,
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("scheduler.stack-size"), "{err}");
}

/// A run that needs more stack than std's default 2 MiB completes on
/// workers given 16 MiB (on 2 MiB it would overflow and abort the process).
#[test]
fn workers_run_on_the_configured_stack_size() {
    let s = Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .stack_size(16 << 20)
        .build()
        .unwrap();
    let sum = s.handle().spawn(async {
        // A local of `poll` (no await after it), so it lives on the
        // worker's stack, not in the task.
        let big = std::hint::black_box([1u8; 4 << 20]);
        big.iter().map(|&b| u64::from(b)).sum::<u64>()
    });
    assert_eq!(sum.wait(), Ok(4 << 20));
}

#[test]
fn a_thread_name_with_a_nul_is_a_typed_error() {
    // std's thread builder panics on such a name.
    let err = Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .thread_name("a\0b")
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, BuildError::InvalidThreadName { name } if name == "a\0b"),
        "{err:?}"
    );
}
