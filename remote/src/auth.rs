//! How a node proves who it is to NATS ([`NatsAuth`]), TLS to the server
//! ([`TlsSettings`]), and [`Secret`], which keeps passwords, tokens, seeds
//! and the cluster key out of `Debug` output and error messages.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::settings::invalid;
use proscenium_shutdown::ConfigError;

/// A secret (a password, a token, an nkey seed, the cluster key). Its
/// `Debug` shows `Secret(***)`, never the value, and it has no `Display`:
/// settings can be logged whole.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret from its value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// A secret read from a file (the whole file, without surrounding
    /// whitespace such as a final newline).
    pub fn from_file(path: impl AsRef<Path>) -> std::io::Result<Secret> {
        Ok(Secret(std::fs::read_to_string(path)?.trim().to_owned()))
    }

    /// The value: for this crate's use only (connect, sign), never printed.
    pub(crate) fn reveal(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

/// How a node authenticates to its NATS server (the server's
/// `authorization` or `accounts` block, or its operator mode). One method
/// at a time, as NATS has it. Credentials in a server URL
/// (`nats://user:password@host`, `nats://token@host`) are taken too,
/// when no method is set here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NatsAuth {
    /// No credentials (or those of the server URLs).
    #[default]
    None,
    /// A user and password (nats-server `--user`/`--pass`, or a `users`
    /// entry).
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: Secret,
    },
    /// A token (nats-server `--auth`, or `authorization { token }`).
    Token(Secret),
    /// An nkey: the user's seed (`SU...`), which signs the server's nonce;
    /// the server knows only the public key.
    NKey(Secret),
    /// A `.creds` file (a user JWT and its nkey seed; NATS's decentralized
    /// auth, an operator-mode server): read when connecting.
    CredentialsFile(PathBuf),
}

impl NatsAuth {
    /// The secret values, to scrub from messages that might echo them.
    pub(crate) fn secrets(&self) -> Vec<&str> {
        match self {
            NatsAuth::None | NatsAuth::CredentialsFile(_) => Vec::new(),
            NatsAuth::UserPassword { password, .. } => vec![password.reveal()],
            NatsAuth::Token(t) | NatsAuth::NKey(t) => vec![t.reveal()],
        }
    }
}

/// TLS to the NATS server. A `tls://` server URL, a server that requires
/// TLS, `required`, a `ca_file` or a `client_cert` turns it on: a node
/// given a CA or a certificate never connects in the clear (a server whose
/// INFO does not offer TLS is refused with
/// [`ConnectError::Tls`](crate::ConnectError::Tls)). Without a `ca_file`
/// the system's roots are trusted (and `SSL_CERT_FILE`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TlsSettings {
    /// The CA certificate(s) (PEM) to trust for the server's certificate,
    /// instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// This node's certificate chain and private key (PEM), for a server
    /// that verifies its clients (mutual TLS).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Refuse to connect without TLS (implied by `ca_file` and
    /// `client_cert`).
    pub required: bool,
}

impl TlsSettings {
    /// Whether the connection must be TLS: asked for, or implied by a CA
    /// or a client certificate (a setting that means nothing in the clear).
    pub(crate) fn implied(&self) -> bool {
        self.required || self.ca_file.is_some() || self.client_cert.is_some()
    }

    /// Checks that the files named can be read (`remote.tls-*` keys).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(ca) = &self.ca_file {
            readable(ca, "remote.tls-ca-file")?;
        }
        if let Some((cert, key)) = &self.client_cert {
            readable(cert, "remote.tls-cert-file")?;
            readable(key, "remote.tls-key-file")?;
        }
        Ok(())
    }
}

/// `Err` naming `key` unless `path` is a file that can be opened.
pub(crate) fn readable(path: &Path, key: &str) -> Result<(), ConfigError> {
    match std::fs::File::open(path) {
        Ok(_) => Ok(()),
        Err(e) => Err(invalid(
            key,
            &format!("a readable file (`{}`: {e})", path.display()),
        )),
    }
}

/// Where a URL's userinfo is: the bytes of `user:password@`, the `@`
/// included (the last `@` before the path ends it: a password may hold
/// one). Works on any string (also one that does not parse).
fn userinfo(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest[..authority_end]
        .rfind('@')
        .map(|at| start..start + at + 1)
}

/// `url` without the credentials in it: `nats://u:p@host` becomes
/// `nats://***@host`.
pub(crate) fn redact_url(url: &str) -> String {
    match userinfo(url) {
        Some(r) => format!("{}***@{}", &url[..r.start], &url[r.end..]),
        None => url.to_owned(),
    }
}

/// `url` without its userinfo (`nats://u:p@host` becomes `nats://host`),
/// for the client, which logs the address it connects to: the credentials
/// are taken from the URL first ([`url_auth`]).
pub(crate) fn without_userinfo(url: &str) -> String {
    match userinfo(url) {
        Some(r) => format!("{}{}", &url[..r.start], &url[r.end..]),
        None => url.to_owned(),
    }
}

/// `text` with every occurrence of each secret replaced by `***`.
pub(crate) fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(*s, "***");
    }
    out
}

/// The credentials in a server URL: `user:password@` or `token@`
/// (percent-decoded), as async-nats ignores them.
pub(crate) fn url_auth(addr: &async_nats::ServerAddr) -> NatsAuth {
    match (addr.username(), addr.password()) {
        (Some(user), Some(password)) => NatsAuth::UserPassword {
            user: percent_decode(user),
            password: Secret(percent_decode(password)),
        },
        (Some(token), None) => NatsAuth::Token(Secret(percent_decode(token))),
        _ => NatsAuth::None,
    }
}

/// `%XX` escapes decoded (a URL's userinfo); anything malformed is kept.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let v = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            redact_url("nats://u:p@127.0.0.1:4222"),
            "nats://***@127.0.0.1:4222"
        );
        assert_eq!(redact_url("tls://tok@host"), "tls://***@host");
        assert_eq!(redact_url("nats://host:4222"), "nats://host:4222");
        // An '@' past the authority is not userinfo.
        assert_eq!(redact_url("nats://host/a@b"), "nats://host/a@b");
        // The last '@' ends the userinfo (a password may hold one).
        assert_eq!(redact_url("nats://u:p@ss@host"), "nats://***@host");
        assert_eq!(redact_url("u:p@host:4222"), "***@host:4222");
        // What the client is given: no userinfo at all.
        assert_eq!(
            without_userinfo("nats://u:p@ss@127.0.0.1:4222/x@y"),
            "nats://127.0.0.1:4222/x@y"
        );
        assert_eq!(without_userinfo("tok@host"), "host");
        assert_eq!(without_userinfo("nats://host"), "nats://host");
    }

    #[test]
    fn url_credentials_are_read_and_decoded() {
        let addr: async_nats::ServerAddr = "nats://us%40r:p%3Ass@127.0.0.1:4222"
            .parse()
            .expect("a URL");
        assert_eq!(
            url_auth(&addr),
            NatsAuth::UserPassword {
                user: "us@r".into(),
                password: Secret::new("p:ss")
            }
        );
        let addr: async_nats::ServerAddr = "nats://s3cret@127.0.0.1".parse().expect("a URL");
        assert_eq!(url_auth(&addr), NatsAuth::Token(Secret::new("s3cret")));
        let addr: async_nats::ServerAddr = "nats://127.0.0.1".parse().expect("a URL");
        assert_eq!(url_auth(&addr), NatsAuth::None);
    }

    #[test]
    fn secrets_never_show() {
        let auth = NatsAuth::UserPassword {
            user: "u".into(),
            password: Secret::new("hunter2"),
        };
        assert!(!format!("{auth:?}").contains("hunter2"));
        assert_eq!(
            scrub("bad password hunter2 for u", &auth.secrets()),
            "bad password *** for u"
        );
    }
}
