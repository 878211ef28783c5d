//! Typed errors of the engine's API.

/// Why an actor could not be spawned. Nothing was created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    /// The name is empty, starts with `$` (kept for generated names), is
    /// `.` or `..` (path elements that read as this actor or its parent),
    /// or holds a character outside letters, digits and `-_.*+:@&=,!~';`.
    #[error("invalid actor name {name:?}: {reason}")]
    InvalidName {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The parent already has a live child with this name.
    #[error("actor name {name:?} is not unique under {parent}")]
    DuplicateName {
        /// The parent's path.
        parent: String,
        /// The name asked for.
        name: String,
    },
    /// The parent is stopping (or stopped) and takes no new children.
    #[error("{parent} is terminating and takes no new children")]
    ParentTerminating {
        /// The parent's path.
        parent: String,
    },
    /// The actor system has terminated.
    #[error("the actor system has terminated")]
    SystemTerminated,
    /// `Props::with_mailbox_capacity(0)`.
    #[error("a bounded mailbox needs a capacity of at least one message")]
    ZeroCapacity,
}

/// Why an actor system could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// The scheduler could not start.
    #[error("the scheduler could not start: {0}")]
    Scheduler(#[from] proscenium_scheduler::BuildError),
    /// The guardians did not start.
    #[error("the guardian actors did not start: {0}")]
    Guardians(String),
    /// The system's name is empty or holds a NUL byte (its threads are
    /// named after it). Checked before any thread starts.
    #[error("invalid actor system name {name:?}: {reason}")]
    InvalidName {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The coordinated-shutdown configuration is invalid (an unknown phase
    /// in `depends-on`, a cycle, a bad value): the error names it.
    #[error("invalid coordinated-shutdown configuration: {0}")]
    Shutdown(#[from] proscenium_shutdown::ConfigError),
}

/// Checks an actor system's name: its threads are named after it
/// (`<name>-<index>`, `<name>-timer`, `<name>-reaper`).
pub(crate) fn validate_system_name(name: &str) -> Result<(), SystemError> {
    let invalid = |reason| {
        Err(SystemError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("names must not be empty");
    }
    if name.contains('\0') {
        return invalid("names must not contain a NUL byte (threads are named after the system)");
    }
    Ok(())
}

/// Checks an actor name (Akka's rules: URI-safe characters, `$` reserved;
/// and neither `.` nor `..`, which would make paths such as `/user/..`).
pub(crate) fn validate_name(name: &str) -> Result<(), SpawnError> {
    let invalid = |reason| {
        Err(SpawnError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("names must not be empty");
    }
    if name.starts_with('$') {
        return invalid("names starting with '$' are reserved for generated names");
    }
    if name == "." || name == ".." {
        return invalid(
            "'.' and '..' are not names: in a path they would read as the actor itself or its parent",
        );
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.*$+:@&=,!~';".contains(c);
    if !name.chars().all(ok) {
        return invalid("only ASCII letters, digits and -_.*$+:@&=,!~'; are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("worker-1").is_ok());
        assert!(validate_name("a.b:c@d").is_ok());
        assert!(matches!(
            validate_name(""),
            Err(SpawnError::InvalidName { .. })
        ));
        assert!(matches!(
            validate_name("$a"),
            Err(SpawnError::InvalidName { .. })
        ));
        assert!(matches!(
            validate_name("a/b"),
            Err(SpawnError::InvalidName { .. })
        ));
        assert!(matches!(
            validate_name("a b"),
            Err(SpawnError::InvalidName { .. })
        ));
        let Err(e) = validate_name("a/b") else {
            panic!("a/b is not a valid name");
        };
        assert!(e.to_string().contains("a/b"));
    }

    /// `.` and `..` would make paths such as `/user/..`, which read as a
    /// parent; other names made of dots are fine.
    #[test]
    fn dot_and_dot_dot_are_refused() {
        for bad in [".", ".."] {
            let Err(SpawnError::InvalidName { name, reason }) = validate_name(bad) else {
                panic!("{bad:?} accepted");
            };
            assert_eq!(name, bad);
            assert!(reason.contains("'.' and '..'"), "{reason}");
        }
        assert!(validate_name("...").is_ok());
        assert!(validate_name(".hidden").is_ok());
        assert!(validate_name("a..b").is_ok());
    }
}
