//! Pinning workers to cores.

/// Where a worker runs, as reported by [`crate::Scheduler::pinning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinning {
    /// Pinned to this core id.
    Pinned {
        /// The core id (as `core_affinity` numbers them).
        core: usize,
    },
    /// Runs unpinned, for this reason.
    Unpinned(UnpinnedReason),
}

/// Why a worker runs unpinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnpinnedReason {
    /// The builder said `pin_workers(false)`.
    Disabled,
    /// The cores could not be listed on this platform.
    CoresUnknown,
    /// There are more workers than cores; this one got none.
    NoCoreLeft,
    /// The operating system refused to set the affinity.
    Refused,
}

/// Pins the calling thread (worker `index`) to `cores[index]` if asked to.
pub(crate) fn pin_current(
    index: usize,
    pin: bool,
    cores: Option<&[core_affinity::CoreId]>,
) -> Pinning {
    if !pin {
        return Pinning::Unpinned(UnpinnedReason::Disabled);
    }
    let Some(cores) = cores else {
        return Pinning::Unpinned(UnpinnedReason::CoresUnknown);
    };
    let Some(core) = cores.get(index) else {
        return Pinning::Unpinned(UnpinnedReason::NoCoreLeft);
    };
    if core_affinity::set_for_current(*core) {
        Pinning::Pinned { core: core.id }
    } else {
        Pinning::Unpinned(UnpinnedReason::Refused)
    }
}

/// Says once (one tracing event for the whole pool) which workers run
/// unpinned and why.
pub(crate) fn report(pinning: &[Pinning]) {
    let unpinned: Vec<(usize, UnpinnedReason)> = pinning
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Pinning::Unpinned(r) if *r != UnpinnedReason::Disabled => Some((i, *r)),
            _ => None,
        })
        .collect();
    if !unpinned.is_empty() {
        tracing::warn!(
            workers = pinning.len(),
            unpinned = ?unpinned,
            "some scheduler workers could not be pinned to a core and run unpinned"
        );
    }
}
