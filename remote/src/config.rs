//! [`RemoteSettings`] from the `[remote]` table of a TOML file, through
//! serde: the keys as a struct (unknown ones refused), then the checks
//! that span keys (one way to authenticate, a TLS certificate with its
//! key) and [`RemoteSettings::validate`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use proscenium::de::{self, Scalar};
use serde::{Deserialize, Deserializer};

use crate::auth::{NatsAuth, Secret};
use crate::settings::{check_name, invalid, ConfigError, RemoteSettings, BYTES, TOKEN};
use crate::MAX_NODE_NAME_LEN;

impl RemoteSettings {
    /// Reads the `[remote]` table of a TOML document: `servers` (an array
    /// of URLs, or one string), `cluster`, `node` (required),
    /// `heartbeat-interval`, `failure-detector-timeout`, `connect-timeout`,
    /// `subscription-capacity` (a positive integer),
    /// `subscription-capacity-bytes` (bytes; the `nats-patch` feature),
    /// `outbound-capacity`
    /// (bytes: an integer or `"64 MiB"`), `reliable-window`,
    /// `reliable-resend-timeout`, `reliable-max-producers`,
    /// `reliable-idle-timeout` (durations as in every proscenium
    /// section, see [`de::parse_duration`]: strings with a unit, `"500ms"`,
    /// `"3 s"`, `"1.5 s"`, `"1 m"`, `"1 h"`, Akka's long unit names; a bare
    /// number such as `250` is refused, asking for a unit, see
    /// [`de::duration_with`]); credentials, at most one way: `user` with `password`
    /// (or `password-file`), `token` (or `token-file`), `nkey-seed` (or
    /// `nkey-seed-file`), `credentials-file`; TLS: `tls-ca-file`,
    /// `tls-cert-file` with `tls-key-file`, `tls-required` (`true` /
    /// `false` or `"on"` / `"off"`); `cluster-key` (or `cluster-key-file`),
    /// the secret that signs the cluster's messages. A `*-file` secret is
    /// read when the TOML is, relative paths from the working directory.
    /// Other tables are left alone; an unknown key or a bad value is an
    /// error naming the key, such as `remote.node`. The result is
    /// [validated](Self::validate): TOML and code refuse the same settings.
    ///
    /// `RemoteSettings` is also `Deserialize` (the same keys, the same
    /// checks), to embed the section in an application's own
    /// configuration struct and read it with [`de::from_toml_str`]; a
    /// check that spans keys is then an error at the section's key whose
    /// message names the key (`remote.password`).
    pub fn from_toml_str(text: &str) -> Result<RemoteSettings, ConfigError> {
        /// The document: other tables belong to others.
        #[derive(Deserialize)]
        struct Document {
            remote: Option<RemoteSection>,
        }
        let doc: Document = de::from_toml_str(text)?;
        doc.remote
            .ok_or_else(|| invalid("remote", "a [remote] table"))?
            .into_settings()
    }

    /// [`from_toml_str`](Self::from_toml_str) on a file's contents.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<RemoteSettings, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        RemoteSettings::from_toml_str(&text)
    }
}

/// The `[remote]` keys; the checks that span keys are made after.
impl<'de> Deserialize<'de> for RemoteSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RemoteSettings, D::Error> {
        RemoteSection::deserialize(deserializer)?
            .into_settings()
            .map_err(serde::de::Error::custom)
    }
}

/// The keys of `[remote]`, each optional here (the required ones are
/// checked in [`into_settings`](Self::into_settings), naming them).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RemoteSection {
    #[serde(default, deserialize_with = "servers")]
    servers: Option<Vec<String>>,
    #[serde(default, deserialize_with = "token")]
    cluster: Option<String>,
    #[serde(default, deserialize_with = "token")]
    node: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    heartbeat_interval: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    failure_detector_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    connect_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de::positive_integer")]
    subscription_capacity: Option<usize>,
    #[serde(default, deserialize_with = "bytes")]
    outbound_capacity: Option<usize>,
    #[serde(default, deserialize_with = "bytes")]
    subscription_capacity_bytes: Option<usize>,
    #[serde(default, deserialize_with = "de::positive_integer")]
    reliable_window: Option<usize>,
    #[serde(default, deserialize_with = "duration")]
    reliable_resend_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de::positive_integer")]
    reliable_max_producers: Option<usize>,
    #[serde(default, deserialize_with = "duration")]
    reliable_idle_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "string")]
    user: Option<String>,
    #[serde(default, deserialize_with = "secret")]
    password: Option<Secret>,
    #[serde(default, deserialize_with = "secret_file")]
    password_file: Option<Secret>,
    #[serde(default, deserialize_with = "secret")]
    token: Option<Secret>,
    #[serde(default, deserialize_with = "secret_file")]
    token_file: Option<Secret>,
    #[serde(default, deserialize_with = "secret")]
    nkey_seed: Option<Secret>,
    #[serde(default, deserialize_with = "secret_file")]
    nkey_seed_file: Option<Secret>,
    #[serde(default, deserialize_with = "path")]
    credentials_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "path")]
    tls_ca_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "path")]
    tls_cert_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "path")]
    tls_key_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "flag")]
    tls_required: Option<bool>,
    #[serde(default, deserialize_with = "secret")]
    cluster_key: Option<Secret>,
    #[serde(default, deserialize_with = "secret_file")]
    cluster_key_file: Option<Secret>,
}

impl RemoteSection {
    /// The settings: the defaults of [`RemoteSettings::new`] with the keys
    /// set here, checked together and [validated](RemoteSettings::validate).
    fn into_settings(self) -> Result<RemoteSettings, ConfigError> {
        let mut out = RemoteSettings::new("", "", "");
        out.servers = self.servers.ok_or_else(|| missing("remote.servers"))?;
        out.cluster = self.cluster.ok_or_else(|| missing("remote.cluster"))?;
        out.node = self.node.ok_or_else(|| missing("remote.node"))?;
        let durations = [
            (&mut out.heartbeat_interval, self.heartbeat_interval),
            (
                &mut out.failure_detector_timeout,
                self.failure_detector_timeout,
            ),
            (&mut out.connect_timeout, self.connect_timeout),
            (
                &mut out.reliable_resend_timeout,
                self.reliable_resend_timeout,
            ),
            (&mut out.reliable_idle_timeout, self.reliable_idle_timeout),
        ];
        for (field, value) in durations {
            if let Some(value) = value {
                *field = value;
            }
        }
        let counts = [
            (&mut out.subscription_capacity, self.subscription_capacity),
            (&mut out.outbound_capacity, self.outbound_capacity),
            (&mut out.reliable_window, self.reliable_window),
            (&mut out.reliable_max_producers, self.reliable_max_producers),
        ];
        for (field, value) in counts {
            if let Some(value) = value {
                *field = value;
            }
        }
        out.subscription_capacity_bytes = self.subscription_capacity_bytes;
        // A secret given both inline and in a file: the file's (as the
        // table walk read them, in key order).
        out.auth = AuthKeys {
            user: self.user,
            password: self.password_file.or(self.password),
            token: self.token_file.or(self.token),
            nkey: self.nkey_seed_file.or(self.nkey_seed),
            creds: self.credentials_file,
        }
        .into_auth()?;
        out.tls.ca_file = self.tls_ca_file;
        out.tls.required = self.tls_required.unwrap_or(false);
        out.tls.client_cert = match (self.tls_cert_file, self.tls_key_file) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(missing_with("remote.tls-key-file", "tls-cert-file")),
            (None, Some(_)) => return Err(missing_with("remote.tls-cert-file", "tls-key-file")),
        };
        out.cluster_key = match (self.cluster_key, self.cluster_key_file) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "remote.cluster-key-file",
                    "cluster-key or cluster-key-file, not both",
                ))
            }
            (key, file) => key.or(file),
        };
        // What code would refuse at `connect`, TOML refuses when read.
        out.validate()?;
        Ok(out)
    }
}

/// The `[remote]` keys of the credentials, gathered before they are
/// checked together: one method at most.
struct AuthKeys {
    user: Option<String>,
    password: Option<Secret>,
    token: Option<Secret>,
    nkey: Option<Secret>,
    creds: Option<PathBuf>,
}

impl AuthKeys {
    fn into_auth(self) -> Result<NatsAuth, ConfigError> {
        const ONE: &str = "one way to authenticate: user and password, token, nkey-seed or \
                           credentials-file, not two";
        let mut methods = Vec::new();
        let user = match (self.user, self.password) {
            (Some(user), Some(password)) => Some(NatsAuth::UserPassword { user, password }),
            (None, None) => None,
            (Some(_), None) => return Err(missing_with("remote.password", "user")),
            (None, Some(_)) => return Err(missing_with("remote.user", "password")),
        };
        methods.extend(user.map(|a| ("remote.user", a)));
        methods.extend(self.token.map(|t| ("remote.token", NatsAuth::Token(t))));
        methods.extend(self.nkey.map(|n| ("remote.nkey-seed", NatsAuth::NKey(n))));
        methods.extend(
            self.creds
                .map(|c| ("remote.credentials-file", NatsAuth::CredentialsFile(c))),
        );
        match methods.len() {
            0 => Ok(NatsAuth::None),
            1 => Ok(methods.remove(0).1),
            _ => Err(invalid(methods[1].0, ONE)),
        }
    }
}

fn missing(key: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        message: "required".to_owned(),
    }
}

/// `key` is required because `with` is set.
fn missing_with(key: &str, with: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        message: format!("required with `{with}`"),
    }
}

const NON_EMPTY: &str = "a non-empty string";

fn non_empty(value: Scalar<'_>) -> Option<String> {
    match value {
        Scalar::String(s) if !s.is_empty() => Some(s.to_owned()),
        _ => None,
    }
}

fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    de::scalar(d, NON_EMPTY, non_empty).map(Some)
}

fn path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    de::scalar(d, NON_EMPTY, non_empty).map(|s| Some(PathBuf::from(s)))
}

/// A secret given inline.
fn secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    de::scalar(d, NON_EMPTY, non_empty).map(|s| Some(Secret::new(s)))
}

/// A secret in a file, read now; the error names the file, never shows
/// what is in it.
fn secret_file<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    let path = de::scalar(d, NON_EMPTY, non_empty)?;
    Secret::from_file(&path)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("expected a readable file (`{path}`: {e})")))
}

fn token<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    de::scalar(d, TOKEN, |value| match value {
        Scalar::String(s) if check_name(s, MAX_NODE_NAME_LEN).is_ok() => Some(s.to_owned()),
        _ => None,
    })
    .map(Some)
}

/// A server URL or an array of them, none blank.
fn servers<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Servers {
        One(String),
        Many(Vec<String>),
    }
    const EXPECTED: &str = "a server URL or a non-empty array of them";
    let list = match Servers::deserialize(d) {
        Ok(Servers::One(s)) => vec![s],
        Ok(Servers::Many(list)) => list,
        Err(_) => return Err(serde::de::Error::custom(format!("expected {EXPECTED}"))),
    };
    // An empty list is refused by `validate` (after the keys are all
    // read, so an unknown key beside it is the error reported).
    if list.iter().any(|s| s.trim().is_empty()) {
        return Err(serde::de::Error::custom(format!("expected {EXPECTED}")));
    }
    Ok(Some(list))
}

/// A positive size in bytes ([`de::read_byte_size`]).
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    de::scalar(d, BYTES, |value| {
        de::read_byte_size(value).filter(|&n| n > 0)
    })
    .map(Some)
}

fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    de::flag(d).map(Some)
}

/// A positive duration, a string ([`de::parse_duration`]), as in every
/// section ([`de::duration_with`]: a bare number is refused, asking for a
/// unit; this section alone used to read one as milliseconds).
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    const EXPECTED: &str = "a positive duration such as \"500 ms\", \"3 s\" or \"1 m\"";
    de::duration_with(d, EXPECTED, |s| {
        de::parse_duration(s).filter(|d| !d.is_zero())
    })
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[remote]` nested in an application's struct: the same settings as
    /// `from_toml_str`, errors naming the full key path.
    #[test]
    fn the_section_embeds_in_an_application_struct() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Cluster {
            remote: RemoteSettings,
        }
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct App {
            cluster: Cluster,
        }
        let section = "servers = \"nats://127.0.0.1:4222\"\ncluster = \"c\"\nnode = \"n\"\n\
                       heartbeat-interval = \"250 ms\"\n";
        let app: App = de::from_toml_str(&format!("[cluster.remote]\n{section}")).expect("valid");
        let direct = RemoteSettings::from_toml_str(&format!("[remote]\n{section}")).expect("valid");
        assert_eq!(app.cluster.remote, direct);
        assert_eq!(direct.heartbeat_interval, Duration::from_millis(250));
        let err = |extra: &str| {
            de::from_toml_str::<App>(&format!("[cluster.remote]\n{section}{extra}"))
                .expect_err(extra)
        };
        let key_of = |err: ConfigError| match err {
            ConfigError::InvalidValue { key, .. } | ConfigError::UnknownKey { key, .. } => key,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            key_of(err("connect-timeout = \"0 s\"")),
            "cluster.remote.connect-timeout"
        );
        assert_eq!(key_of(err("nod = 1")), "cluster.remote.nod");
        // A check across keys: at the section, its message naming the key.
        let cross = err("user = \"u\"");
        assert!(cross.to_string().contains("remote.password"), "{cross}");
        assert_eq!(key_of(cross), "cluster.remote");
    }

    const BASE: &str =
        "[remote]\nservers = [\"nats://127.0.0.1:4222\"]\ncluster = \"c\"\nnode = \"n\"\n";

    /// One rule for durations in every section (issue 35, item 4c): a
    /// string with a unit. `[remote]` alone read a bare integer as
    /// milliseconds; it is now refused, at its key and line, with an error
    /// that says to add a unit, as in `[coordinated-shutdown]` and
    /// `[http.server]`.
    #[test]
    fn a_bare_number_is_refused_asking_for_a_unit() {
        for key in [
            "heartbeat-interval",
            "failure-detector-timeout",
            "connect-timeout",
            "reliable-resend-timeout",
        ] {
            let err =
                RemoteSettings::from_toml_str(&format!("{BASE}{key} = 250\n")).expect_err(key);
            let ConfigError::InvalidValue { key: k, message } = &err else {
                panic!("{err:?}");
            };
            assert_eq!(k, &format!("remote.{key}"));
            assert_eq!(
                message,
                &format!(
                    "invalid value: integer `250`, expected a positive duration such as \
                     \"500 ms\", \"3 s\" or \"1 m\"; a bare number has no unit: write \"250 s\" \
                     or \"250 ms\" (line 5, column {})",
                    key.len() + 4
                )
            );
        }
        let s = RemoteSettings::from_toml_str(&format!("{BASE}heartbeat-interval = \"250 ms\"\n"))
            .expect("a unit");
        assert_eq!(s.heartbeat_interval, Duration::from_millis(250));
    }
}
