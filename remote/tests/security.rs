//! Credentials and TLS against real nats-servers (issue 25, item 1): a
//! node authenticates with a user and password (in the settings or the
//! URL), a token, an nkey, or a `.creds` file (an operator-mode server),
//! connects over mutual TLS with its own CA, and no error or `Debug`
//! output shows a secret.

mod support;

use std::time::Duration;

use proscenium_remote::{ConnectError, Remote, RemoteSettings};
use support::pki::{user_nkey, Operator, Pki};
use support::{require_nats, system, Cmd, Counter, NatsServer, ServerOptions, TempDir, GUARD};

fn settings(url: &str, node: &str) -> RemoteSettings {
    RemoteSettings::new(url, "s", node).connect_timeout(Duration::from_secs(5))
}

/// Connects, exposes a counter and asks it over NATS: the node works.
fn connects_and_works(settings: RemoteSettings) {
    let sys = system("s");
    let remote = Remote::connect(&sys, settings).expect("connect");
    let counter = sys.spawn(Counter::props("s"), "counter").expect("spawn");
    counter.tell(Cmd::Add(3));
    remote.expose(&counter, "counter").expect("expose");
    let far = remote.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(3));
    drop(remote);
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
}

/// Connecting fails; returns the error.
fn refused(settings: RemoteSettings) -> ConnectError {
    let sys = system("s");
    let err = Remote::connect(&sys, settings).expect_err("refused");
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
    err
}

/// Neither the error's `Display` nor its `Debug` holds `secret`.
fn shows_no(err: &ConnectError, secret: &str) {
    let (shown, debug) = (err.to_string(), format!("{err:?}"));
    assert!(!shown.contains(secret), "{shown}");
    assert!(!debug.contains(secret), "{debug}");
}

/// Issue 25, item 1: a server that requires a user and password refused
/// every node (async-nats ignores a URL's credentials, and the settings had
/// no key for them), and the error printed the password back.
#[test]
fn a_node_connects_with_a_user_and_password_and_errors_never_show_it() {
    require_nats!();
    let server = NatsServer::start_with_options(ServerOptions::args(&[
        "--user",
        "node",
        "--pass",
        "s3cret-pw",
    ]));
    let port = server.port;
    connects_and_works(settings(
        &format!("nats://node:s3cret-pw@127.0.0.1:{port}"),
        "a",
    ));
    connects_and_works(settings(&server.url(), "b").user_password("node", "s3cret-pw"));
    // A wrong password, in the URL or the settings: refused, typed, and
    // shown nowhere (the URL without its credentials).
    let err = refused(settings(
        &format!("nats://node:wr0ng-pw@127.0.0.1:{port}"),
        "c",
    ));
    assert!(matches!(err, ConnectError::Unauthorized { .. }), "{err:?}");
    shows_no(&err, "wr0ng-pw");
    assert!(
        err.to_string()
            .contains(&format!("nats://***@127.0.0.1:{port}")),
        "{err}"
    );
    let err = refused(settings(&server.url(), "d").user_password("node", "wr0ng-pw"));
    assert!(matches!(err, ConnectError::Unauthorized { .. }), "{err:?}");
    shows_no(&err, "wr0ng-pw");
    // No credentials at all.
    let err = refused(settings(&server.url(), "e"));
    assert!(matches!(err, ConnectError::Unauthorized { .. }), "{err:?}");
    // Credentials twice (URL and settings) are a settings error.
    let err = refused(
        settings(&format!("nats://node:s3cret-pw@127.0.0.1:{port}"), "f")
            .user_password("node", "s3cret-pw"),
    );
    assert!(matches!(err, ConnectError::Settings(_)), "{err:?}");
    shows_no(&err, "s3cret-pw");
}

#[test]
fn a_node_connects_with_a_token() {
    require_nats!();
    let server = NatsServer::start_with_options(ServerOptions::args(&["--auth", "t0ken-xyz"]));
    connects_and_works(settings(
        &format!("nats://t0ken-xyz@127.0.0.1:{}", server.port),
        "a",
    ));
    connects_and_works(settings(&server.url(), "b").token("t0ken-xyz"));
    let err = refused(settings(&server.url(), "c").token("n0t-the-token"));
    assert!(matches!(err, ConnectError::Unauthorized { .. }), "{err:?}");
    shows_no(&err, "n0t-the-token");
}

#[test]
fn a_node_connects_with_an_nkey() {
    require_nats!();
    let (public, seed) = user_nkey();
    let server = NatsServer::start_with_options(ServerOptions::config(format!(
        "authorization {{\n  users: [ {{ nkey: {public} }} ]\n}}\n"
    )));
    connects_and_works(settings(&server.url(), "a").nkey_seed(seed.as_str()));
    // Another user's seed: refused.
    let (_, other) = user_nkey();
    let err = refused(settings(&server.url(), "b").nkey_seed(other.as_str()));
    assert!(matches!(err, ConnectError::Unauthorized { .. }), "{err:?}");
    shows_no(&err, &other);
    // Not a seed: a settings error naming the key, without the value.
    let err = refused(settings(&server.url(), "c").nkey_seed("SUnot-a-seed"));
    assert!(err.to_string().starts_with("`remote.nkey-seed`"), "{err}");
    shows_no(&err, "SUnot-a-seed");
}

#[test]
fn a_node_connects_with_a_creds_file_to_an_operator_mode_server() {
    require_nats!();
    let dir = TempDir::new("creds");
    let operator = Operator::new(&dir);
    let server = NatsServer::start_with_options(ServerOptions::config(operator.config.clone()));
    connects_and_works(settings(&server.url(), "a").credentials_file(&operator.creds));
    // Without them the operator's server refuses the node.
    let err = refused(settings(&server.url(), "b"));
    assert!(matches!(err, ConnectError::Unauthorized { .. }), "{err:?}");
    // A creds file that is not there: a settings error naming the key.
    let err = refused(settings(&server.url(), "c").credentials_file(dir.path().join("none")));
    assert!(
        err.to_string().starts_with("`remote.credentials-file`"),
        "{err}"
    );
}

#[test]
fn a_node_connects_over_mutual_tls_with_its_own_ca() {
    require_nats!();
    let pki = Pki::new();
    let server = NatsServer::start_with_options(ServerOptions::config(pki.server_tls_block(true)));
    let tls = |s: RemoteSettings| s.tls_ca_file(&pki.ca).tls_required(true);
    connects_and_works(
        tls(settings(&server.url(), "a")).tls_client_cert(&pki.client_cert, &pki.client_key),
    );
    connects_and_works(
        settings(&format!("tls://127.0.0.1:{}", server.port), "b")
            .tls_ca_file(&pki.ca)
            .tls_client_cert(&pki.client_cert, &pki.client_key),
    );
    // Without a client certificate the server closes the connection.
    let err = refused(tls(settings(&server.url(), "c")));
    assert!(
        matches!(err, ConnectError::Tls { .. } | ConnectError::Nats { .. }),
        "{err:?}"
    );
    // Without the CA the server's certificate is not trusted.
    let err = refused(
        settings(&server.url(), "d")
            .tls_required(true)
            .tls_client_cert(&pki.client_cert, &pki.client_key),
    );
    assert!(matches!(err, ConnectError::Tls { .. }), "{err:?}");
    // A CA file that is not there: a settings error naming the key.
    let err = refused(tls(settings(&server.url(), "e")).tls_ca_file(pki.dir.path().join("none")));
    assert!(err.to_string().starts_with("`remote.tls-ca-file`"), "{err}");
}

#[test]
fn tls_required_refuses_a_server_without_tls() {
    require_nats!();
    let server = NatsServer::start();
    let err = refused(settings(&server.url(), "a").tls_required(true));
    assert!(matches!(err, ConnectError::Tls { .. }), "{err:?}");
}

/// The same credentials and TLS from a `[remote]` TOML table, secrets in
/// files, against a server that wants both.
#[test]
fn credentials_and_tls_from_toml() {
    require_nats!();
    let pki = Pki::new();
    let server = NatsServer::start_with_options(ServerOptions::config(format!(
        "{}authorization {{\n  user: node\n  password: \"fr0m-a-file\"\n}}\n",
        pki.server_tls_block(true)
    )));
    let password = pki.dir.write("password", "fr0m-a-file\n");
    let toml = format!(
        "[remote]\nservers = \"{}\"\ncluster = \"s\"\nnode = \"t\"\nuser = \"node\"\n\
         password-file = \"{}\"\ntls-ca-file = \"{}\"\ntls-cert-file = \"{}\"\n\
         tls-key-file = \"{}\"\ntls-required = true\n",
        server.url(),
        password.display(),
        pki.ca.display(),
        pki.client_cert.display(),
        pki.client_key.display()
    );
    let s = RemoteSettings::from_toml_str(&toml).expect("valid");
    assert!(!format!("{s:?}").contains("fr0m-a-file"));
    connects_and_works(s);
}

/// Issue 33, item 10: TLS settings without `tls-required` connected in
/// the clear to a server whose (unauthenticated) INFO did not ask for
/// TLS. A CA or a client certificate means TLS: refused, saying why.
#[test]
fn a_ca_or_a_client_certificate_means_tls() {
    require_nats!();
    let server = NatsServer::start();
    let pki = Pki::new();
    let err = refused(settings(&server.url(), "p").tls_ca_file(&pki.ca));
    assert!(matches!(err, ConnectError::Tls { .. }), "{err:?}");
    let err =
        refused(settings(&server.url(), "q").tls_client_cert(&pki.client_cert, &pki.client_key));
    assert!(matches!(err, ConnectError::Tls { .. }), "{err:?}");
    eprintln!("refused: {err}");
    // Without either, the same server is fine in the clear.
    connects_and_works(settings(&server.url(), "r"));
}
