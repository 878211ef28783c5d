//! The phases: their names, their settings, and Akka's default DAG.

use std::time::Duration;

/// The names of the default phases (akka-coordinated-shutdown.txt), in
/// their order. Each depends on the one before it.
///
/// ```
/// use proscenium_shutdown::Phase;
/// assert_eq!(Phase::BEFORE_SERVICE_UNBIND, "before-service-unbind");
/// assert_eq!(Phase::DEFAULTS.last(), Some(&Phase::ACTOR_SYSTEM_TERMINATE));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Phase;

impl Phase {
    /// The first phase that applications add tasks to.
    pub const BEFORE_SERVICE_UNBIND: &'static str = "before-service-unbind";
    /// Stop accepting new incoming connections.
    pub const SERVICE_UNBIND: &'static str = "service-unbind";
    /// Wait for requests in progress to complete.
    pub const SERVICE_REQUESTS_DONE: &'static str = "service-requests-done";
    /// Final shutdown of service endpoints.
    pub const SERVICE_STOP: &'static str = "service-stop";
    /// Application tasks after service shutdown, before cluster shutdown.
    pub const BEFORE_CLUSTER_SHUTDOWN: &'static str = "before-cluster-shutdown";
    /// Cluster hook point (no clustering here): sharding regions.
    pub const CLUSTER_SHARDING_SHUTDOWN_REGION: &'static str = "cluster-sharding-shutdown-region";
    /// Cluster hook point: leave.
    pub const CLUSTER_LEAVE: &'static str = "cluster-leave";
    /// Cluster hook point: exiting.
    pub const CLUSTER_EXITING: &'static str = "cluster-exiting";
    /// Cluster hook point: exiting done.
    pub const CLUSTER_EXITING_DONE: &'static str = "cluster-exiting-done";
    /// Cluster hook point: the cluster extension's shutdown.
    pub const CLUSTER_SHUTDOWN: &'static str = "cluster-shutdown";
    /// Application tasks after cluster shutdown, before the system stops.
    pub const BEFORE_ACTOR_SYSTEM_TERMINATE: &'static str = "before-actor-system-terminate";
    /// The last phase: the actor system terminates.
    pub const ACTOR_SYSTEM_TERMINATE: &'static str = "actor-system-terminate";

    /// Every default phase, in order.
    pub const DEFAULTS: [&'static str; 12] = [
        Phase::BEFORE_SERVICE_UNBIND,
        Phase::SERVICE_UNBIND,
        Phase::SERVICE_REQUESTS_DONE,
        Phase::SERVICE_STOP,
        Phase::BEFORE_CLUSTER_SHUTDOWN,
        Phase::CLUSTER_SHARDING_SHUTDOWN_REGION,
        Phase::CLUSTER_LEAVE,
        Phase::CLUSTER_EXITING,
        Phase::CLUSTER_EXITING_DONE,
        Phase::CLUSTER_SHUTDOWN,
        Phase::BEFORE_ACTOR_SYSTEM_TERMINATE,
        Phase::ACTOR_SYSTEM_TERMINATE,
    ];
}

/// One phase's settings (`coordinated-shutdown.phases.<name>`).
///
/// ```
/// use proscenium_shutdown::PhaseConfig;
/// use std::time::Duration;
/// let p = PhaseConfig::new()
///     .depends_on("service-stop")
///     .timeout(Duration::from_secs(3))
///     .recover(false);
/// assert_eq!(p.depends_on, ["service-stop"]);
/// assert!(p.enabled);
/// ```
#[derive(Debug, Clone)]
pub struct PhaseConfig {
    /// Phases that must finish (or time out) before this one starts.
    pub depends_on: Vec<String>,
    /// Overrides the default phase timeout.
    pub timeout: Option<Duration>,
    /// On (the default): a failed or timed-out task is logged and shutdown
    /// goes on. Off: the rest of the run is aborted.
    pub recover: bool,
    /// Off: the phase's tasks are skipped (logged).
    pub enabled: bool,
    /// Which of `recover` and `enabled` the setters set, so that
    /// [`ShutdownConfig::phase`](crate::ShutdownConfig::phase) merges only
    /// what was set (a field assigned directly counts as set when it
    /// differs from the default).
    explicit: Explicit,
}

#[derive(Debug, Clone, Copy, Default)]
struct Explicit {
    recover: bool,
    enabled: bool,
}

/// Equal settings are equal configs, however they were set.
impl PartialEq for PhaseConfig {
    fn eq(&self, other: &PhaseConfig) -> bool {
        self.depends_on == other.depends_on
            && self.timeout == other.timeout
            && self.recover == other.recover
            && self.enabled == other.enabled
    }
}

impl Eq for PhaseConfig {}

impl Default for PhaseConfig {
    fn default() -> PhaseConfig {
        PhaseConfig::new()
    }
}

impl PhaseConfig {
    /// No dependencies, the default timeout, recover on, enabled.
    pub fn new() -> PhaseConfig {
        PhaseConfig {
            depends_on: Vec::new(),
            timeout: None,
            recover: true,
            enabled: true,
            explicit: Explicit::default(),
        }
    }

    /// Adds a dependency.
    pub fn depends_on(mut self, phase: impl Into<String>) -> PhaseConfig {
        let phase = phase.into();
        if !self.depends_on.contains(&phase) {
            self.depends_on.push(phase);
        }
        self
    }

    /// Sets the phase's timeout.
    pub fn timeout(mut self, timeout: Duration) -> PhaseConfig {
        self.timeout = Some(timeout);
        self
    }

    /// Sets `recover`.
    pub fn recover(mut self, recover: bool) -> PhaseConfig {
        self.recover = recover;
        self.explicit.recover = true;
        self
    }

    /// Sets `enabled`.
    pub fn enabled(mut self, enabled: bool) -> PhaseConfig {
        self.enabled = enabled;
        self.explicit.enabled = true;
        self
    }
}

impl PhaseConfig {
    /// Merges `update` into these settings, as TOML does: its
    /// dependencies are added to these, and each other setting it sets
    /// replaces this one (a timeout that is `Some`; `recover` and `enabled`
    /// set by their setters or different from the default); what it does
    /// not set stays.
    pub(crate) fn merge(&mut self, update: PhaseConfig) {
        for dep in update.depends_on {
            if !self.depends_on.contains(&dep) {
                self.depends_on.push(dep);
            }
        }
        if update.timeout.is_some() {
            self.timeout = update.timeout;
        }
        if update.explicit.recover || !update.recover {
            self.recover = update.recover;
            self.explicit.recover = true;
        }
        if update.explicit.enabled || !update.enabled {
            self.enabled = update.enabled;
            self.explicit.enabled = true;
        }
    }
}

/// Akka's default phases: a chain, three of them with a 10 s timeout.
pub(crate) fn default_phases() -> Vec<(String, PhaseConfig)> {
    let ten = Duration::from_secs(10);
    let mut out: Vec<(String, PhaseConfig)> = Vec::with_capacity(Phase::DEFAULTS.len());
    for (i, name) in Phase::DEFAULTS.iter().enumerate() {
        let mut config = PhaseConfig::new();
        if i > 0 {
            config = config.depends_on(Phase::DEFAULTS[i - 1]);
        }
        if matches!(
            *name,
            Phase::CLUSTER_SHARDING_SHUTDOWN_REGION
                | Phase::CLUSTER_EXITING
                | Phase::ACTOR_SYSTEM_TERMINATE
        ) {
            config = config.timeout(ten);
        }
        out.push(((*name).to_owned(), config));
    }
    out
}
