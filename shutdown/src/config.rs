//! [`ShutdownConfig`]: the settings of a coordinated shutdown, in code or
//! from TOML with Akka's key names, and their validation into an order.

use std::path::Path;
use std::time::Duration;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::de;
use crate::phase::{default_phases, Phase, PhaseConfig};

/// Why a configuration was refused. Every variant names what is involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `depends_on` names a phase that does not exist.
    #[error("phase `{phase}` depends on `{depends_on}`, which is not a phase")]
    UnknownPhase {
        /// The phase with the dependency.
        phase: String,
        /// The missing phase it names.
        depends_on: String,
    },
    /// The dependencies form a cycle.
    #[error("the phases form a cycle: {}", cycle_text(.phases))]
    Cycle {
        /// The phases on the cycle, each depending on the next, the last on
        /// the first.
        phases: Vec<String>,
    },
    /// A phase depends on `actor-system-terminate`, the last phase: it would
    /// run after the actor system has terminated.
    #[error("phase `{phase}` depends on `actor-system-terminate`, which must stay the last phase")]
    AfterLastPhase {
        /// The phase with the dependency.
        phase: String,
    },
    /// A phase configured in a file (`[coordinated-shutdown.phases.<name>]`)
    /// that is not one of Akka's phases and is tied to none by
    /// `depends-on` (it depends on no phase, and no phase depends on it):
    /// most likely a misspelt phase, whose settings would go to a new,
    /// empty phase instead of the one meant. A phase of the application's
    /// own needs a `depends-on` (or another phase's `depends-on` naming
    /// it) to place it in the shutdown.
    #[error(
        "`coordinated-shutdown.phases.{phase}` is not one of Akka's phases and no `depends-on` \
         ties it to one (it depends on no phase, and no phase depends on it), so it would be a \
         new, empty phase: did you mean `{closest}`?"
    )]
    UnconnectedPhase {
        /// The phase as configured.
        phase: String,
        /// The known phase whose name is closest to it (fewest edits).
        closest: String,
    },
    /// A key has a value of the wrong type or form.
    #[error("`{key}`: {message}")]
    InvalidValue {
        /// The full key, e.g. `coordinated-shutdown.phases.service-stop.timeout`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// A key this configuration does not know.
    #[error("unknown key `{key}`{}", position_text(*.line, *.column))]
    UnknownKey {
        /// The full key.
        key: String,
        /// The key's line in the text (from 1), where the reader knows it
        /// (TOML's does).
        line: Option<usize>,
        /// The key's column in its line (from 1, in characters), with the
        /// line.
        column: Option<usize>,
    },
    /// The text is not TOML.
    #[error("not valid TOML: {0}")]
    Parse(String),
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
}

/// ` (line L, column C)`, as an `InvalidValue`'s message ends; empty
/// without a line.
fn position_text(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" (line {line}, column {column})"),
        (Some(line), None) => format!(" (line {line})"),
        (None, _) => String::new(),
    }
}

fn cycle_text(phases: &[String]) -> String {
    let mut text = phases.join(" -> ");
    if let Some(first) = phases.first() {
        text.push_str(" -> ");
        text.push_str(first);
    }
    text
}

/// The settings of a coordinated shutdown (`coordinated-shutdown.*`).
///
/// ```
/// use proscenium_shutdown::{Phase, PhaseConfig, ShutdownConfig};
/// use std::time::Duration;
///
/// let config = ShutdownConfig::default()
///     .default_phase_timeout(Duration::from_secs(2))
///     .phase("flush-caches", PhaseConfig::new().depends_on(Phase::SERVICE_STOP))
///     .depends_on(Phase::BEFORE_CLUSTER_SHUTDOWN, "flush-caches");
/// let order = config.ordered_phases().unwrap();
/// let at = |p: &str| order.iter().position(|q| q == p).unwrap();
/// assert!(at(Phase::SERVICE_STOP) < at("flush-caches"));
/// assert!(at("flush-caches") < at(Phase::BEFORE_CLUSTER_SHUTDOWN));
/// ```
///
/// `Deserialize` reads the keys of a `[coordinated-shutdown]` table (see
/// [`from_toml_str`](Self::from_toml_str)) over the defaults and validates
/// the phase graph, so the section can be a field of an application's own
/// configuration struct (see [`crate::de`]); unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ShutdownSection")]
pub struct ShutdownConfig {
    /// The timeout of phases that set none (`default-phase-timeout`).
    pub default_phase_timeout: Duration,
    /// Exit the process once the run has completed (`exit-process`).
    pub exit_process: bool,
    /// The process's exit code then (`exit-code`).
    pub exit_code: i32,
    /// SIGTERM and SIGINT run the shutdown (`run-by-signals`).
    pub run_by_signals: bool,
    /// The last phase terminates the actor system (`terminate-actor-system`).
    pub terminate_actor_system: bool,
    /// Terminating the actor system runs the shutdown
    /// (`run-by-actor-system-terminate`).
    pub run_by_actor_system_terminate: bool,
    /// In the order they were defined: the defaults first.
    phases: Vec<(String, PhaseConfig)>,
}

impl Default for ShutdownConfig {
    /// Akka's defaults: the default phases, a 5 s default phase timeout,
    /// run by signals and by the actor system's terminate, terminating the
    /// system in the last phase; the process is not exited (Akka's
    /// `exit-jvm = off`), exit code 0.
    fn default() -> ShutdownConfig {
        ShutdownConfig {
            default_phase_timeout: Duration::from_secs(5),
            exit_process: false,
            exit_code: 0,
            run_by_signals: true,
            terminate_actor_system: true,
            run_by_actor_system_terminate: true,
            phases: default_phases(),
        }
    }
}

impl ShutdownConfig {
    /// The timeout of phases that set none.
    pub fn default_phase_timeout(mut self, timeout: Duration) -> ShutdownConfig {
        self.default_phase_timeout = timeout;
        self
    }

    /// Exit the process once the run has completed.
    pub fn exit_process(mut self, on: bool) -> ShutdownConfig {
        self.exit_process = on;
        self
    }

    /// The process's exit code when `exit_process` is on.
    pub fn exit_code(mut self, code: i32) -> ShutdownConfig {
        self.exit_code = code;
        self
    }

    /// Run on SIGTERM and SIGINT.
    pub fn run_by_signals(mut self, on: bool) -> ShutdownConfig {
        self.run_by_signals = on;
        self
    }

    /// Terminate the actor system in the last phase (off for tests).
    pub fn terminate_actor_system(mut self, on: bool) -> ShutdownConfig {
        self.terminate_actor_system = on;
        self
    }

    /// Run when the actor system is terminated.
    pub fn run_by_actor_system_terminate(mut self, on: bool) -> ShutdownConfig {
        self.run_by_actor_system_terminate = on;
        self
    }

    /// Adds a phase, or merges `config` into an existing one exactly as a
    /// TOML `[coordinated-shutdown.phases.<name>]` table does: its
    /// `depends_on` adds to the phase's dependencies, and each setting it
    /// sets (a `timeout`; `recover` or `enabled` through their setters)
    /// replaces the phase's; what it does not set keeps its current value.
    ///
    /// Merging, not replacing, because the phases are a shared DAG: a
    /// replace would silently drop dependencies that an earlier call (a
    /// [`depends_on`](Self::depends_on), a library's phase, the TOML file)
    /// added, reordering the shutdown without a word. To start a phase
    /// over, use [`replace_phase`](Self::replace_phase).
    ///
    /// ```
    /// use proscenium_shutdown::{Phase, PhaseConfig, ShutdownConfig};
    /// use std::time::Duration;
    ///
    /// let config = ShutdownConfig::default()
    ///     .phase("early", PhaseConfig::new())
    ///     .depends_on(Phase::SERVICE_STOP, "early")
    ///     .phase(Phase::SERVICE_STOP, PhaseConfig::new().timeout(Duration::from_secs(1)));
    /// let stop = config.phase_config(Phase::SERVICE_STOP).unwrap();
    /// assert_eq!(stop.depends_on, [Phase::SERVICE_REQUESTS_DONE, "early"]);
    /// assert_eq!(stop.timeout, Some(Duration::from_secs(1)));
    /// ```
    pub fn phase(mut self, name: impl Into<String>, config: PhaseConfig) -> ShutdownConfig {
        let name = name.into();
        match self.phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, existing)) => existing.merge(config),
            None => self.phases.push((name, config)),
        }
        self
    }

    /// Adds a phase, or replaces every setting of an existing one,
    /// dependencies included (a default phase's dependency on the phase
    /// before it too, unless `config` names it again).
    pub fn replace_phase(mut self, name: impl Into<String>, config: PhaseConfig) -> ShutdownConfig {
        self.set_phase(name.into(), config);
        self
    }

    fn set_phase(&mut self, name: String, config: PhaseConfig) {
        match self.phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, existing)) => *existing = config,
            None => self.phases.push((name, config)),
        }
    }

    /// Makes `phase` depend on `on` as well (Akka: "overriding a phase with
    /// an additional depends-on"); adds `phase` if it is new.
    pub fn depends_on(mut self, phase: impl Into<String>, on: impl Into<String>) -> ShutdownConfig {
        let phase = phase.into();
        let on = on.into();
        match self.phases.iter_mut().find(|(n, _)| *n == phase) {
            Some((_, existing)) => {
                if !existing.depends_on.contains(&on) {
                    existing.depends_on.push(on);
                }
            }
            None => self.phases.push((phase, PhaseConfig::new().depends_on(on))),
        }
        self
    }

    /// A phase's settings.
    pub fn phase_config(&self, name: &str) -> Option<&PhaseConfig> {
        self.phases.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// A phase's timeout: its own, else the default phase timeout.
    pub fn phase_timeout(&self, name: &str) -> Option<Duration> {
        self.phase_config(name)
            .map(|c| c.timeout.unwrap_or(self.default_phase_timeout))
    }

    /// Validates the DAG and sorts it topologically: a phase comes after
    /// every phase it depends on; among phases whose dependencies are all
    /// placed, the one defined first (the defaults in their order, then the
    /// added ones in the order added) goes first, except
    /// `actor-system-terminate`, which always comes last (no phase may
    /// depend on it).
    pub fn ordered_phases(&self) -> Result<Vec<String>, ConfigError> {
        let index = |name: &str| self.phases.iter().position(|(n, _)| n == name);
        let n = self.phases.len();
        let mut deps: Vec<Vec<usize>> = Vec::with_capacity(n);
        for (name, config) in &self.phases {
            let mut mine = Vec::with_capacity(config.depends_on.len());
            for dep in &config.depends_on {
                match index(dep) {
                    Some(i) => mine.push(i),
                    None => {
                        return Err(ConfigError::UnknownPhase {
                            phase: name.clone(),
                            depends_on: dep.clone(),
                        })
                    }
                }
            }
            deps.push(mine);
        }
        // The last phase terminates the actor system: nothing may come
        // after it (Akka: "Don't add phases that depends on this phase").
        let last = index(Phase::ACTOR_SYSTEM_TERMINATE);
        if let Some(last) = last {
            let after: Vec<String> = (0..n)
                .filter(|&i| deps[i].contains(&last))
                .map(|i| self.phases[i].0.clone())
                .collect();
            if let Some(phase) = after.into_iter().next() {
                return Err(ConfigError::AfterLastPhase { phase });
            }
        }
        let mut placed = vec![false; n];
        let mut order = Vec::with_capacity(n);
        while order.len() < n {
            let ready = |i: usize| !placed[i] && deps[i].iter().all(|&d| placed[d]);
            // The last phase waits until no other phase is ready, so a phase
            // that nothing depends on still runs before the system stops.
            let next = (0..n)
                .find(|&i| ready(i) && Some(i) != last)
                .or_else(|| last.filter(|&l| ready(l)));
            match next {
                Some(i) => {
                    placed[i] = true;
                    order.push(self.phases[i].0.clone());
                }
                None => return Err(self.cycle(&deps, &placed)),
            }
        }
        Ok(order)
    }

    /// A cycle among the phases not placed (every one of them waits on
    /// another unplaced phase, so following dependencies must loop).
    fn cycle(&self, deps: &[Vec<usize>], placed: &[bool]) -> ConfigError {
        let start = placed.iter().position(|p| !p).unwrap_or(0);
        let mut path = vec![start];
        let mut at = start;
        // Every unplaced phase has an unplaced dependency, so this loops
        // back on the path (the `while let` ends only if that were false).
        while let Some(&next) = deps[at].iter().find(|&&d| !placed[d]) {
            if let Some(pos) = path.iter().position(|&p| p == next) {
                path.drain(..pos);
                break;
            }
            path.push(next);
            at = next;
        }
        ConfigError::Cycle {
            phases: path.iter().map(|&i| self.phases[i].0.clone()).collect(),
        }
    }

    /// Reads the `[coordinated-shutdown]` table of a TOML file over the
    /// defaults (see [`from_toml_str`](Self::from_toml_str)).
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<ShutdownConfig, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        ShutdownConfig::from_toml_str(&text)
    }

    /// Reads the `[coordinated-shutdown]` table of a TOML document over the
    /// defaults. Keys mirror Akka's: `default-phase-timeout = "5 s"`,
    /// `exit-process`, `exit-code`, `run-by-signals`,
    /// `terminate-actor-system`, `run-by-actor-system-terminate`, and
    /// `[coordinated-shutdown.phases.<name>]` with `depends-on = [..]`,
    /// `timeout`, `recover`, `enabled`. A `depends-on` of an existing phase
    /// adds to its dependencies; the other keys replace. Durations are
    /// strings with a unit, as
    /// [`de::parse_duration`](crate::de::parse_duration) reads them, here
    /// as in every section: a bare number (`timeout = 5`) is refused with an
    /// error that asks for a unit ([`de::duration_with`](crate::de::duration_with)); flags
    /// take `true` / `false` or Akka's `"on"` / `"off"`. Other top-level
    /// tables are left to their owners; an unknown key inside
    /// `coordinated-shutdown` is an error. The DAG is validated, its errors
    /// typed ([`ConfigError::Cycle`], ...), and a phase the file names that
    /// is not one of Akka's must be tied to the others by a `depends-on`
    /// (its own, or another phase's): otherwise it is most likely a
    /// misspelling, refused with [`ConfigError::UnconnectedPhase`], which
    /// names the closest of Akka's phases.
    ///
    /// The same section embedded in an application's own configuration
    /// struct: [`ShutdownConfig`]'s `Deserialize` (see [`crate::de`]).
    ///
    /// ```
    /// use proscenium_shutdown::ShutdownConfig;
    /// let config = ShutdownConfig::from_toml_str(r#"
    ///     [coordinated-shutdown]
    ///     default-phase-timeout = "2 s"
    ///     exit-code = 3
    ///     [coordinated-shutdown.phases.drain-queues]
    ///     depends-on = ["service-requests-done"]
    ///     timeout = "500 ms"
    ///     recover = "off"
    /// "#).unwrap();
    /// assert_eq!(config.exit_code, 3);
    /// assert_eq!(config.phase_timeout("drain-queues"), Some(std::time::Duration::from_millis(500)));
    /// ```
    pub fn from_toml_str(text: &str) -> Result<ShutdownConfig, ConfigError> {
        /// The document: other tables belong to other layers.
        #[derive(Deserialize)]
        struct Document {
            #[serde(rename = "coordinated-shutdown")]
            section: Option<ShutdownSection>,
        }
        let doc: Document = de::from_toml_str(text)?;
        let Some(section) = doc.section else {
            return Ok(ShutdownConfig::default());
        };
        section.into_config()
    }
}

/// The keys of `[coordinated-shutdown]`, each optional: what is set
/// replaces (or, for a phase's `depends-on`, adds to) the defaults.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ShutdownSection {
    #[serde(default, deserialize_with = "some_duration")]
    default_phase_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "some_flag")]
    exit_process: Option<bool>,
    exit_code: Option<i32>,
    #[serde(default, deserialize_with = "some_flag")]
    run_by_signals: Option<bool>,
    #[serde(default, deserialize_with = "some_flag")]
    terminate_actor_system: Option<bool>,
    #[serde(default, deserialize_with = "some_flag")]
    run_by_actor_system_terminate: Option<bool>,
    /// Sorted by name (the order the phases are added in, which breaks
    /// ties in [`ShutdownConfig::ordered_phases`]), as before serde.
    #[serde(default)]
    phases: BTreeMap<String, PhaseSection>,
}

/// The keys of `[coordinated-shutdown.phases.<name>]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PhaseSection {
    depends_on: Option<Vec<String>>,
    #[serde(default, deserialize_with = "some_duration")]
    timeout: Option<Duration>,
    #[serde(default, deserialize_with = "some_flag")]
    recover: Option<bool>,
    #[serde(default, deserialize_with = "some_flag")]
    enabled: Option<bool>,
}

impl ShutdownSection {
    /// The defaults with this section applied, validated: the phase graph
    /// ([`ShutdownConfig::ordered_phases`]), then the phases this section
    /// configures ([`check_configured_phases`]).
    fn into_config(self) -> Result<ShutdownConfig, ConfigError> {
        let configured: Vec<String> = self.phases.keys().cloned().collect();
        let config = self.apply(ShutdownConfig::default());
        config.ordered_phases()?;
        check_configured_phases(&config, &configured)?;
        Ok(config)
    }

    /// `config` with the settings of this section applied.
    fn apply(self, mut config: ShutdownConfig) -> ShutdownConfig {
        let set = |target: &mut bool, value: Option<bool>| {
            if let Some(value) = value {
                *target = value;
            }
        };
        if let Some(timeout) = self.default_phase_timeout {
            config.default_phase_timeout = timeout;
        }
        set(&mut config.exit_process, self.exit_process);
        if let Some(code) = self.exit_code {
            config.exit_code = code;
        }
        set(&mut config.run_by_signals, self.run_by_signals);
        set(
            &mut config.terminate_actor_system,
            self.terminate_actor_system,
        );
        set(
            &mut config.run_by_actor_system_terminate,
            self.run_by_actor_system_terminate,
        );
        for (name, section) in self.phases {
            let mut phase = config.phase_config(&name).cloned().unwrap_or_default();
            for dep in section.depends_on.unwrap_or_default() {
                phase = phase.depends_on(dep);
            }
            if let Some(timeout) = section.timeout {
                phase.timeout = Some(timeout);
            }
            set(&mut phase.recover, section.recover);
            set(&mut phase.enabled, section.enabled);
            config.set_phase(name, phase);
        }
        config
    }
}

/// The section read over the defaults and validated (an invalid DAG is an
/// error at the section's key), for [`ShutdownConfig`]'s `Deserialize`.
impl TryFrom<ShutdownSection> for ShutdownConfig {
    type Error = ConfigError;

    fn try_from(section: ShutdownSection) -> Result<ShutdownConfig, ConfigError> {
        section.into_config()
    }
}

/// Refuses a phase named in the file (`configured`, in the order they are
/// added) that is not one of Akka's and that no `depends-on` ties to
/// another phase: [`ConfigError::UnconnectedPhase`], naming the closest of
/// Akka's phases. In code, such a phase stays allowed (it runs just before
/// the last phase, [`ShutdownConfig::ordered_phases`]): a typo there is a
/// misspelt constant, which `Phase::SERVICE_STOP` and its siblings avoid.
fn check_configured_phases(
    config: &ShutdownConfig,
    configured: &[String],
) -> Result<(), ConfigError> {
    for name in configured {
        if Phase::DEFAULTS.contains(&name.as_str()) {
            continue;
        }
        let depends = config
            .phase_config(name)
            .is_some_and(|c| !c.depends_on.is_empty());
        let depended_on = config
            .phases
            .iter()
            .any(|(_, c)| c.depends_on.iter().any(|d| d == name));
        if !depends && !depended_on {
            return Err(ConfigError::UnconnectedPhase {
                phase: name.clone(),
                closest: closest_phase(name).to_owned(),
            });
        }
    }
    Ok(())
}

/// The phase of Akka's whose name is the fewest single-character edits
/// (insertions, deletions, substitutions) from `name`; the earlier phase
/// on a tie.
fn closest_phase(name: &str) -> &'static str {
    Phase::DEFAULTS
        .into_iter()
        .min_by_key(|phase| edit_distance(name, phase))
        .expect("Akka has phases")
}

/// Levenshtein's distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // One row of the table: distances from a prefix of `a` to each prefix
    // of `b`.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de::duration(d).map(Some)
}

fn some_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    de::flag(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::{closest_phase, edit_distance};

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            edit_distance("service-request-done", "service-requests-done"),
            1
        );
        assert_eq!(edit_distance("é", "e"), 1);
    }

    #[test]
    fn the_closest_phase() {
        assert_eq!(
            closest_phase("service-request-done"),
            "service-requests-done"
        );
        assert_eq!(closest_phase("servce-stop"), "service-stop");
        assert_eq!(
            closest_phase("befor-service-unbind"),
            "before-service-unbind"
        );
        assert_eq!(closest_phase("cluster-exit"), "cluster-exiting");
    }
}
