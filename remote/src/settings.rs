//! [`RemoteSettings`]: where NATS is, which cluster, which node; in code
//! or from the `[remote]` table of a TOML file.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use proscenium_shutdown::ConfigError;

use crate::auth::{readable, redact_url, NatsAuth, Secret, TlsSettings};

/// How a node joins: the NATS servers to connect to, the cluster (the
/// subject prefix every node of one application shares) and this node's
/// name (unique in the cluster), plus the failure detector's timing.
///
/// ```
/// use proscenium_remote::RemoteSettings;
/// use std::time::Duration;
///
/// let in_code = RemoteSettings::new("nats://127.0.0.1:4222", "shop", "node-a")
///     .failure_detector(Duration::from_millis(500), Duration::from_secs(3));
/// let from_toml = RemoteSettings::from_toml_str(r#"
///     [remote]
///     servers = ["nats://127.0.0.1:4222"]
///     cluster = "shop"
///     node = "node-a"
///     heartbeat-interval = "500ms"
///     failure-detector-timeout = "3s"
/// "#)?;
/// assert_eq!(in_code, from_toml);
///
/// let bad = RemoteSettings::from_toml_str("[remote]\nservers = []\ncluster = \"shop\"\nnode = \"a\"\nnod = 1");
/// assert_eq!(bad.unwrap_err().to_string(), "unknown key `remote.nod` (line 5, column 1)");
/// # Ok::<(), proscenium_remote::ConfigError>(())
/// ```
///
/// Credentials and TLS (see [`NatsAuth`], [`TlsSettings`]); secrets never
/// show in `Debug`, nor in a server URL's userinfo:
///
/// ```
/// use proscenium_remote::RemoteSettings;
///
/// let s = RemoteSettings::new("tls://nats.internal:4222", "shop", "node-a")
///     .user_password("node-a", "s3cret")
///     .tls_required(true);
/// assert!(!format!("{s:?}").contains("s3cret"));
/// let s = RemoteSettings::new("nats://node-a:s3cret@nats.internal:4222", "shop", "node-a");
/// assert!(!format!("{s:?}").contains("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteSettings {
    /// NATS server URLs (`nats://host:port`); the client picks one and
    /// fails over to the others (and to the servers the cluster gossips).
    pub servers: Vec<String>,
    /// The cluster's name: the first token of every subject this node uses.
    pub cluster: String,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// How often the node publishes its heartbeat (default 1 s).
    pub heartbeat_interval: Duration,
    /// A watched node silent for this long is taken as gone: its watchers
    /// get their Terminated this long after its last heartbeat reached
    /// this node (default 5 s; more than a few heartbeats).
    pub failure_detector_timeout: Duration,
    /// How long `connect` tries to reach a server (default 5 s).
    pub connect_timeout: Duration,
    /// How many received messages one exposed name may have waiting to be
    /// told to its actor (default 65 536, the NATS client's own default).
    /// Past it the NATS client drops what arrives for that name (NATS's
    /// "slow consumer"), which [`Remote::dropped_by_slow_consumer`](crate::Remote::dropped_by_slow_consumer)
    /// counts. The buffer grows as it fills, so a large value costs memory
    /// only while a backlog lasts.
    pub subscription_capacity: usize,
    /// How many bytes of received messages one subscription (an exposed
    /// name's messages, its reliable messages, the control notices) may
    /// hold before the node has looked at them; past it the NATS client
    /// drops what arrives, as past `subscription-capacity` (a slow
    /// consumer, counted). `None` (the default): 64 MiB. Needs the
    /// `nats-patch` feature (the NATS client this workspace patches,
    /// third_party/async-nats/PATCH.md): without it, setting it is an
    /// error, and only `subscription-capacity` bounds the buffers.
    pub subscription_capacity_bytes: Option<usize>,
    /// How many bytes of user messages (tells, asks, replies) the node
    /// may hold on their way to the server (default 64 MiB). While the
    /// connection is down (or slower than the senders) they wait in this
    /// queue; past it `tell` and `ask` fail at once with
    /// [`RemoteError::OutboundFull`](crate::RemoteError::OutboundFull),
    /// and a reply is dropped (counted by
    /// [`Remote::dropped_replies`](crate::Remote::dropped_replies)).
    /// Heartbeats and other control messages have a queue of their own.
    pub outbound_capacity: usize,
    /// How many messages of one [`ReliableRef`](crate::ReliableRef) may be
    /// in flight, unconfirmed (default 8 192). Keep it at most the
    /// receiving nodes' `subscription-capacity` (default 65 536): then a
    /// burst never overflows their buffer, and nothing is sent twice.
    pub reliable_window: usize,
    /// How long a [`ReliableRef`](crate::ReliableRef) waits for a
    /// confirmation before it sends the unconfirmed messages again
    /// (default 1 s).
    pub reliable_resend_timeout: Duration,
    /// How many producers (reliable refs of other nodes, one per node and
    /// name) the receiving side of one exposed name keeps track of
    /// (default 65 536; about 200 bytes each). Past it, the least recently
    /// heard eighth is forgotten (its confirmation sent first).
    pub reliable_max_producers: usize,
    /// A producer not heard from for this long is forgotten by the
    /// receiving side (default 5 minutes). A forgotten producer's next
    /// message starts a new session: nothing it had confirmed is
    /// delivered again, but a message delivered whose confirmation it never
    /// got is (at least once, then). Keep it well above
    /// `reliable-resend-timeout`: a producer with unconfirmed messages
    /// resends every resend timeout, so it is never idle that long.
    pub reliable_idle_timeout: Duration,
    /// How this node authenticates to NATS (default: no credentials, or
    /// those of the server URLs).
    pub auth: NatsAuth,
    /// TLS to the NATS server.
    pub tls: TlsSettings,
    /// The cluster's shared secret (at least 32 bytes; every node of the
    /// cluster needs the same): with it, everything a node publishes is
    /// signed (HMAC-SHA256) and everything it receives must verify, so a
    /// NATS client without it cannot forge control notices, replies or
    /// messages (dropped and counted:
    /// [`Remote::rejected_messages`](crate::Remote::rejected_messages)).
    /// Default: none (a warning at connect; see
    /// docs/decisions/0023-remote-security.md for the trust model).
    pub cluster_key: Option<Secret>,
}

impl fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let servers: Vec<String> = self.servers.iter().map(|s| redact_url(s)).collect();
        f.debug_struct("RemoteSettings")
            .field("servers", &servers)
            .field("cluster", &self.cluster)
            .field("node", &self.node)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("failure_detector_timeout", &self.failure_detector_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("subscription_capacity", &self.subscription_capacity)
            .field(
                "subscription_capacity_bytes",
                &self.subscription_capacity_bytes,
            )
            .field("outbound_capacity", &self.outbound_capacity)
            .field("reliable_window", &self.reliable_window)
            .field("reliable_resend_timeout", &self.reliable_resend_timeout)
            .field("reliable_max_producers", &self.reliable_max_producers)
            .field("reliable_idle_timeout", &self.reliable_idle_timeout)
            .field("auth", &self.auth)
            .field("tls", &self.tls)
            .field("cluster_key", &self.cluster_key)
            .finish()
    }
}

impl RemoteSettings {
    /// Settings with one server URL (add more with
    /// [`server`](Self::server)) and the default timing.
    pub fn new(
        server: impl Into<String>,
        cluster: impl Into<String>,
        node: impl Into<String>,
    ) -> RemoteSettings {
        RemoteSettings {
            servers: vec![server.into()],
            cluster: cluster.into(),
            node: node.into(),
            heartbeat_interval: Duration::from_secs(1),
            failure_detector_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            subscription_capacity: 65_536,
            subscription_capacity_bytes: None,
            outbound_capacity: 64 << 20,
            reliable_window: 8192,
            reliable_resend_timeout: Duration::from_secs(1),
            reliable_max_producers: 65_536,
            reliable_idle_timeout: Duration::from_secs(300),
            auth: NatsAuth::None,
            tls: TlsSettings::default(),
            cluster_key: None,
        }
    }

    /// Sets the cluster key (see [`cluster_key`](Self::cluster_key)).
    pub fn cluster_key(mut self, key: impl Into<Secret>) -> RemoteSettings {
        self.cluster_key = Some(key.into());
        self
    }

    /// Authenticates with a user and password.
    pub fn user_password(
        mut self,
        user: impl Into<String>,
        password: impl Into<Secret>,
    ) -> RemoteSettings {
        self.auth = NatsAuth::UserPassword {
            user: user.into(),
            password: password.into(),
        };
        self
    }

    /// Authenticates with a token.
    pub fn token(mut self, token: impl Into<Secret>) -> RemoteSettings {
        self.auth = NatsAuth::Token(token.into());
        self
    }

    /// Authenticates with an nkey, given its seed (`SU...`).
    pub fn nkey_seed(mut self, seed: impl Into<Secret>) -> RemoteSettings {
        self.auth = NatsAuth::NKey(seed.into());
        self
    }

    /// Authenticates with a `.creds` file (user JWT and nkey seed).
    pub fn credentials_file(mut self, path: impl Into<PathBuf>) -> RemoteSettings {
        self.auth = NatsAuth::CredentialsFile(path.into());
        self
    }

    /// Trusts the CA certificate(s) in this PEM file for the server's
    /// certificate (instead of the system's roots).
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> RemoteSettings {
        self.tls.ca_file = Some(path.into());
        self
    }

    /// Presents this certificate chain and key (PEM files) to a server
    /// that verifies its clients (mutual TLS).
    pub fn tls_client_cert(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> RemoteSettings {
        self.tls.client_cert = Some((cert.into(), key.into()));
        self
    }

    /// Refuses to connect without TLS.
    pub fn tls_required(mut self, required: bool) -> RemoteSettings {
        self.tls.required = required;
        self
    }

    /// Adds a server URL.
    pub fn server(mut self, url: impl Into<String>) -> RemoteSettings {
        self.servers.push(url.into());
        self
    }

    /// Sets the heartbeat interval and the failure-detector timeout.
    pub fn failure_detector(mut self, heartbeat: Duration, timeout: Duration) -> RemoteSettings {
        self.heartbeat_interval = heartbeat;
        self.failure_detector_timeout = timeout;
        self
    }

    /// Sets how many received messages one exposed name may have waiting
    /// (see [`subscription_capacity`](Self::subscription_capacity)).
    pub fn subscription_capacity(mut self, capacity: usize) -> RemoteSettings {
        self.subscription_capacity = capacity;
        self
    }

    /// Sets how many bytes one subscription may hold (see
    /// [`subscription_capacity_bytes`](Self::subscription_capacity_bytes);
    /// needs the `nats-patch` feature).
    pub fn subscription_capacity_bytes(mut self, bytes: usize) -> RemoteSettings {
        self.subscription_capacity_bytes = Some(bytes);
        self
    }

    /// Sets how many bytes of user messages may wait for the server (see
    /// [`outbound_capacity`](Self::outbound_capacity)).
    pub fn outbound_capacity(mut self, bytes: usize) -> RemoteSettings {
        self.outbound_capacity = bytes;
        self
    }

    /// Sets the window and the resend timeout of reliable delivery (see
    /// [`reliable_window`](Self::reliable_window)).
    pub fn reliable(mut self, window: usize, resend_timeout: Duration) -> RemoteSettings {
        self.reliable_window = window;
        self.reliable_resend_timeout = resend_timeout;
        self
    }

    /// Sets how many producers, and for how long idle, the receiving side
    /// of each exposed name keeps (see
    /// [`reliable_max_producers`](Self::reliable_max_producers) and
    /// [`reliable_idle_timeout`](Self::reliable_idle_timeout)).
    pub fn reliable_receiver(
        mut self,
        max_producers: usize,
        idle_timeout: Duration,
    ) -> RemoteSettings {
        self.reliable_max_producers = max_producers;
        self.reliable_idle_timeout = idle_timeout;
        self
    }

    /// Sets how long `connect` tries to reach a server.
    pub fn connect_timeout(mut self, timeout: Duration) -> RemoteSettings {
        self.connect_timeout = timeout;
        self
    }

    /// Checks the names and the timing (`connect` and
    /// [`from_toml_str`](Self::from_toml_str) call it): at least one
    /// server, `cluster` and `node` subject tokens of at most
    /// [`MAX_NODE_NAME_LEN`] bytes, positive
    /// `heartbeat-interval`, `connect-timeout` and `subscription-capacity`,
    /// a `failure-detector-timeout` longer than the heartbeat interval,
    /// credentials that can be used (a user name, a token, a well-formed
    /// nkey seed, a readable credentials file) and readable TLS files.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.servers.is_empty() {
            return Err(invalid("remote.servers", "at least one server URL"));
        }
        check_token(&self.cluster, "remote.cluster")?;
        check_token(&self.node, "remote.node")?;
        if self.heartbeat_interval.is_zero() {
            return Err(invalid("remote.heartbeat-interval", "a positive duration"));
        }
        if self.connect_timeout.is_zero() {
            return Err(invalid("remote.connect-timeout", "a positive duration"));
        }
        if self.subscription_capacity == 0 {
            return Err(invalid(
                "remote.subscription-capacity",
                "a positive integer",
            ));
        }
        match self.subscription_capacity_bytes {
            Some(0) => return Err(invalid("remote.subscription-capacity-bytes", BYTES)),
            Some(_) if !cfg!(feature = "nats-patch") => {
                return Err(invalid(
                    "remote.subscription-capacity-bytes",
                    "no byte bound: it needs proscenium-remote's `nats-patch` feature (the \
                     patched NATS client of third_party/async-nats); without it only \
                     subscription-capacity bounds the buffers",
                ))
            }
            _ => {}
        }
        if self.reliable_window == 0 {
            return Err(invalid("remote.reliable-window", "a positive integer"));
        }
        if self.reliable_resend_timeout.is_zero() {
            return Err(invalid(
                "remote.reliable-resend-timeout",
                "a positive duration",
            ));
        }
        if self.reliable_max_producers == 0 {
            return Err(invalid(
                "remote.reliable-max-producers",
                "a positive integer",
            ));
        }
        if self.reliable_idle_timeout <= self.reliable_resend_timeout {
            return Err(invalid(
                "remote.reliable-idle-timeout",
                "a duration longer than reliable-resend-timeout",
            ));
        }
        if self.outbound_capacity == 0 {
            return Err(invalid("remote.outbound-capacity", BYTES));
        }
        if self.failure_detector_timeout <= self.heartbeat_interval {
            return Err(invalid(
                "remote.failure-detector-timeout",
                "a duration longer than heartbeat-interval",
            ));
        }
        match &self.auth {
            NatsAuth::UserPassword { user, .. } if user.is_empty() => {
                return Err(invalid("remote.user", "a non-empty user name"));
            }
            NatsAuth::Token(t) if t.reveal().is_empty() => {
                return Err(invalid("remote.token", "a non-empty token"));
            }
            NatsAuth::NKey(seed) if nkeys::KeyPair::from_seed(seed.reveal()).is_err() => {
                // Never the seed itself in the message.
                return Err(invalid(
                    "remote.nkey-seed",
                    "an nkey seed (58 characters, `SU...` for a user)",
                ));
            }
            NatsAuth::CredentialsFile(path) => readable(path, "remote.credentials-file")?,
            _ => {}
        }
        self.tls.validate()?;
        if let Some(key) = &self.cluster_key {
            if key.reveal().len() < crate::sign::MIN_KEY_LEN {
                return Err(invalid(
                    "remote.cluster-key",
                    "a secret of at least 32 bytes (such as `openssl rand -base64 32`)",
                ));
            }
        }
        Ok(())
    }
}

/// The longest name [`Remote::expose`](crate::Remote::expose),
/// [`Remote::actor_ref`](crate::Remote::actor_ref) and
/// [`Remote::watch`](crate::Remote::watch) accept, in bytes (UTF-8).
///
/// A name goes into the subjects of every operation on it, twice into a
/// group's subscription (subject and queue group): with the longest
/// cluster name, the longest protocol line this crate writes stays far
/// below nats-server's default `max_control_line` of 4 KiB (a server that
/// gets a longer one closes the connection).
pub const MAX_NAME_LEN: usize = 256;

/// The longest cluster or node name, in bytes (`remote.cluster`,
/// `remote.node`).
pub const MAX_NODE_NAME_LEN: usize = 64;

/// What is wrong with a name, if anything: see [`check_name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameProblem {
    /// Empty, or a character a subject token cannot hold.
    BadCharacters,
    /// Longer than the limit (its length in bytes).
    TooLong(usize),
}

/// Checks that `name` can be one token of a NATS subject of this crate:
/// 1 to `max` bytes, none of `.`, `*`, `>`, whitespace or control
/// characters (a control character can end a protocol line).
pub(crate) fn check_name(name: &str, max: usize) -> Result<(), NameProblem> {
    // Length first: a huge name is refused without scanning it all.
    if name.len() > max {
        return Err(NameProblem::TooLong(name.len()));
    }
    if name.is_empty()
        || name
            .chars()
            .any(|c| c == '.' || c == '*' || c == '>' || c.is_whitespace() || c.is_control())
    {
        return Err(NameProblem::BadCharacters);
    }
    Ok(())
}

/// [`check_name`] for a name of an actor, as a [`RemoteError`](crate::RemoteError).
pub(crate) fn check_actor_name(name: &str) -> Result<(), crate::RemoteError> {
    check_name(name, MAX_NAME_LEN).map_err(|problem| match problem {
        NameProblem::TooLong(len) => crate::RemoteError::NameTooLong {
            len,
            max: MAX_NAME_LEN,
        },
        NameProblem::BadCharacters => crate::RemoteError::BadName(name.to_owned()),
    })
}

/// An invalid value at `key`: "expected {expected}".
pub(crate) fn invalid(key: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        message: format!("expected {expected}"),
    }
}

fn check_token(name: &str, key: &str) -> Result<(), ConfigError> {
    check_name(name, MAX_NODE_NAME_LEN).map_err(|_| invalid(key, TOKEN))
}

pub(crate) const BYTES: &str =
    "a positive size in bytes: an integer, or a string such as \"64 MiB\" (B, KiB, MiB, GiB)";

pub(crate) const TOKEN: &str =
    "a name of 1 to 64 bytes without '.', '*', '>', whitespace or control characters";

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(err: ConfigError) -> String {
        match err {
            ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
            other => panic!("not a keyed error: {other:?}"),
        }
    }

    const BASE: &str =
        "[remote]\nservers = [\"nats://127.0.0.1:4222\"]\ncluster = \"c\"\nnode = \"n\"\n";

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("servers = []", "remote.servers"),
            ("servers = 3", "remote.servers"),
            ("cluster = \"a.b\"", "remote.cluster"),
            ("node = \"\"", "remote.node"),
            ("node = \"a b\"", "remote.node"),
            ("node = \"a\\u0000b\"", "remote.node"),
            (
                "node = \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"",
                "remote.node",
            ),
            ("cluster = \"c\\u007f\"", "remote.cluster"),
            (
                "heartbeat-interval = \"1 fortnight\"",
                "remote.heartbeat-interval",
            ),
            ("heartbeat-interval = \"1.5\"", "remote.heartbeat-interval"),
            (
                "failure-detector-timeout = -1",
                "remote.failure-detector-timeout",
            ),
            ("connect-timeout = \"0s\"", "remote.connect-timeout"),
            ("subscription-capacity = 0", "remote.subscription-capacity"),
            ("outbound-capacity = 0", "remote.outbound-capacity"),
            ("reliable-window = 0", "remote.reliable-window"),
            (
                "reliable-resend-timeout = 0",
                "remote.reliable-resend-timeout",
            ),
            ("outbound-capacity = \"8 MB\"", "remote.outbound-capacity"),
            (
                "subscription-capacity = \"many\"",
                "remote.subscription-capacity",
            ),
            ("colour = 1", "remote.colour"),
        ];
        for (line, key) in cases {
            // The bad line replaces the base's key of the same name, or is added.
            let name = line.split(' ').next().unwrap_or_default();
            let text: String = BASE
                .lines()
                .filter(|l| !l.starts_with(&format!("{name} ")))
                .chain([line])
                .collect::<Vec<_>>()
                .join("\n");
            let err = RemoteSettings::from_toml_str(&text).expect_err(line);
            assert_eq!(key_of(err), key, "{line}");
        }
    }

    #[test]
    fn credentials_and_tls_keys_are_read_and_checked() {
        let read = |extra: &str| RemoteSettings::from_toml_str(&format!("{BASE}{extra}"));
        let s = read("user = \"u\"\npassword = \"pw-1\"").expect("valid");
        assert_eq!(
            s.auth,
            NatsAuth::UserPassword {
                user: "u".into(),
                password: Secret::new("pw-1")
            }
        );
        assert!(!format!("{s:?}").contains("pw-1"), "{s:?}");
        let s = read("token = \"tok\"").expect("valid");
        assert_eq!(s.auth, NatsAuth::Token(Secret::new("tok")));
        let s = read("tls-required = true").expect("valid");
        assert!(s.tls.required);
        let dir = std::env::temp_dir().join(format!("proscenium-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("token");
        std::fs::write(&file, "from-file\n").expect("write");
        let s = read(&format!("token-file = \"{}\"", file.display())).expect("valid");
        assert_eq!(s.auth, NatsAuth::Token(Secret::new("from-file")));
        let s = read(&format!(
            "tls-ca-file = \"{0}\"\ntls-cert-file = \"{0}\"\ntls-key-file = \"{0}\"",
            file.display()
        ))
        .expect("valid");
        assert_eq!(s.tls.client_cert, Some((file.clone(), file.clone())));
        let cases = [
            ("user = \"u\"", "remote.password"),
            ("password = \"p\"", "remote.user"),
            (
                "token = \"t\"\nuser = \"u\"\npassword = \"p\"",
                "remote.token",
            ),
            ("token = \"t\"\nnkey-seed = \"SU\"", "remote.nkey-seed"),
            ("nkey-seed = \"SUAnotaseed\"", "remote.nkey-seed"),
            ("token = \"\"", "remote.token"),
            (
                "token-file = \"/nonexistent/proscenium\"",
                "remote.token-file",
            ),
            (
                "credentials-file = \"/nonexistent/x.creds\"",
                "remote.credentials-file",
            ),
            (
                "tls-ca-file = \"/nonexistent/ca.pem\"",
                "remote.tls-ca-file",
            ),
            (
                "tls-cert-file = \"/nonexistent/c.pem\"",
                "remote.tls-key-file",
            ),
            (
                "tls-key-file = \"/nonexistent/k.pem\"",
                "remote.tls-cert-file",
            ),
            ("tls-required = \"yes\"", "remote.tls-required"),
        ];
        for (extra, key) in cases {
            let err = read(extra).expect_err(extra);
            // A secret never shows in the message.
            assert!(!err.to_string().contains("SUAnotaseed"), "{err}");
            assert_eq!(key_of(err), key, "{extra}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn required_keys_are_named() {
        for key in ["servers", "cluster", "node"] {
            let text: String = BASE
                .lines()
                .filter(|l| !l.starts_with(key))
                .collect::<Vec<_>>()
                .join("\n");
            let err = RemoteSettings::from_toml_str(&text).expect_err(key);
            assert_eq!(key_of(err), format!("remote.{key}"));
        }
        let err = RemoteSettings::from_toml_str("[other]\nx = 1").expect_err("no table");
        assert_eq!(key_of(err), "remote");
    }

    /// The README's `[remote]` examples ("More than one machine") parse
    /// and show every key between them (the files they name replaced by
    /// files that exist here; an alternative way to authenticate may be
    /// shown commented out, as only one may be set).
    #[test]
    fn the_readme_examples_parse_and_show_every_key() {
        let readme = include_str!("../README.md");
        let blocks: Vec<&str> = readme
            .split("```toml\n")
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .filter(|b| b.starts_with("[remote]"))
            .collect();
        assert!(
            blocks.len() >= 2,
            "two ```toml blocks with [remote] in the README"
        );
        let dir = std::env::temp_dir().join(format!("proscenium-readme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("any");
        std::fs::write(&file, "secret-from-a-file-of-32-bytes-or-more\n").expect("write");
        for block in &blocks {
            let text: String = block
                .lines()
                .map(|l| match l.split_once(" = ") {
                    Some((key, _)) if key.ends_with("-file") => {
                        format!("{key} = \"{}\"\n", file.display())
                    }
                    _ => format!("{l}\n"),
                })
                .collect();
            let s = RemoteSettings::from_toml_str(&text).expect("the README's example is valid");
            assert_eq!(s.cluster, "shop");
        }
        let _ = std::fs::remove_dir_all(&dir);
        let shown = |key: &str| {
            blocks
                .iter()
                .flat_map(|b| b.lines())
                .any(|l| l.starts_with(&format!("{key} =")) || l.starts_with(&format!("# {key} =")))
        };
        for key in [
            "servers",
            "cluster",
            "node",
            "heartbeat-interval",
            "failure-detector-timeout",
            "connect-timeout",
            "subscription-capacity",
            "outbound-capacity",
            "reliable-window",
            "reliable-resend-timeout",
            "reliable-max-producers",
            "reliable-idle-timeout",
            "user",
            "password-file",
            "token-file",
            "nkey-seed-file",
            "credentials-file",
            "tls-ca-file",
            "tls-cert-file",
            "tls-key-file",
            "tls-required",
            "cluster-key-file",
        ] {
            assert!(
                shown(key),
                "the README's [remote] examples do not show `{key}`"
            );
        }
    }

    /// Code and TOML refuse the same settings, naming the same key: a
    /// setting rejected in one is rejected in the other.
    #[test]
    fn code_and_toml_reject_the_same_settings() {
        let base = RemoteSettings::new("nats://127.0.0.1:4222", "c", "n");
        let zero = Duration::ZERO;
        let ms = Duration::from_millis;
        let cases: [(RemoteSettings, &str, &str); 5] = [
            (
                base.clone().connect_timeout(zero),
                "connect-timeout = 0",
                "remote.connect-timeout",
            ),
            (
                base.clone().failure_detector(zero, ms(5000)),
                "heartbeat-interval = 0",
                "remote.heartbeat-interval",
            ),
            (
                base.clone().failure_detector(ms(1000), zero),
                "failure-detector-timeout = 0",
                "remote.failure-detector-timeout",
            ),
            (
                base.clone().failure_detector(ms(1000), ms(1000)),
                "failure-detector-timeout = 1000",
                "remote.failure-detector-timeout",
            ),
            (
                base.clone().subscription_capacity(0),
                "subscription-capacity = 0",
                "remote.subscription-capacity",
            ),
        ];
        for (in_code, line, key) in cases {
            let err = in_code.validate().expect_err(line);
            assert_eq!(key_of(err), key, "in code: {line}");
            let err = RemoteSettings::from_toml_str(&format!("{BASE}{line}")).expect_err(line);
            assert_eq!(key_of(err), key, "in TOML: {line}");
        }
        // TOML that parses but fails `validate` is refused when read.
        let err = RemoteSettings::from_toml_str(&format!(
            "{BASE}heartbeat-interval = \"2s\"\nfailure-detector-timeout = \"1s\""
        ))
        .expect_err("fd <= hb");
        assert_eq!(key_of(err), "remote.failure-detector-timeout");
    }

    #[test]
    fn durations_and_defaults() {
        let s = RemoteSettings::from_toml_str(&format!(
            "{BASE}heartbeat-interval = \"250ms\"\nfailure-detector-timeout = \"2s\"\nconnect-timeout = \"1m\""
        ))
        .expect("valid");
        assert_eq!(s.heartbeat_interval, Duration::from_millis(250));
        assert_eq!(s.failure_detector_timeout, Duration::from_secs(2));
        assert_eq!(s.connect_timeout, Duration::from_secs(60));
        // The same duration forms as every other section (proscenium::de).
        let s = RemoteSettings::from_toml_str(&format!(
            "{BASE}heartbeat-interval = \"1.5 s\"\nconnect-timeout = \"1 h\""
        ))
        .expect("valid");
        assert_eq!(s.heartbeat_interval, Duration::from_millis(1500));
        assert_eq!(s.connect_timeout, Duration::from_secs(3600));
        let d = RemoteSettings::from_toml_str(BASE).expect("valid");
        assert_eq!(d, RemoteSettings::new("nats://127.0.0.1:4222", "c", "n"));
        assert_eq!(d.subscription_capacity, 65_536);
        assert!(d.validate().is_ok());
        let s = RemoteSettings::from_toml_str(&format!("{BASE}subscription-capacity = 1048576"))
            .expect("valid");
        assert_eq!(s.subscription_capacity, 1 << 20);
        let zero = d.clone().subscription_capacity(0);
        assert_eq!(
            key_of(zero.validate().expect_err("zero capacity")),
            "remote.subscription-capacity"
        );
        let short = d.failure_detector(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(
            key_of(short.validate().expect_err("fd <= hb")),
            "remote.failure-detector-timeout"
        );
    }
}
